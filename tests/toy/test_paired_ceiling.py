"""Every arm's share of the oracle's step saving, (1 − TTB_arm) / (1 − TTB_oracle) (``analysis.paired --ceiling``,
issue 38), on synthetic benchmark records with known answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fake_benchmark import write_benchmark_run

from analysis import paired, paired_inputs, paired_relative, paired_stats
from bots_verl.runlog import ETR_METRIC, ROLLOUTS_METRIC, STEP_TIME_METRIC, TOY_EXACT_METRIC

STEPS = 24
EVERY = 2
START = 0.25
SLOPES = {0: 4 / 4096, 1: 6 / 4096, 2: 3 / 4096}
# (arm, slope factor, ETR): random's best (at T) is reached at T/4 by the oracle, T/2 by fast, never by flat
ARMS = (("random", 1, 0.25), ("oracle", 4, 0.9), ("fast", 2, 0.5), ("flat", 0, 0.1))


def _linear(slope: float) -> dict[str, float]:
    return {str(s): START + slope * s for s in range(0, STEPS + 1, EVERY)}


def _write(root: Path, arms=ARMS) -> None:
    runs = []
    for seed, a in SLOPES.items():
        for selector, factor, etr in arms:
            curve = _linear(factor * a)
            runs.append({"selector": selector, "seed": seed, "steps": STEPS, "accuracy": curve})
            line = {ROLLOUTS_METRIC: 128.0, ETR_METRIC: etr, STEP_TIME_METRIC: 2.0}
            evals = {step: {TOY_EXACT_METRIC: acc} for step, acc in curve.items()}
            write_benchmark_run(root, selector, seed, [line] * STEPS, evals)
    (root / "summary.json").write_text(json.dumps({"profile": {"steps": STEPS}, "runs": runs}))


def test_share_of_the_oracle_saving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path)
    comparisons = paired_stats.compare_all(paired_inputs.load_benchmark(tmp_path))
    shares = {s.selector: s for s in paired_relative.ceiling_shares(comparisons, "oracle")}
    assert set(shares) == {"fast", "flat"}
    fast = shares["fast"]
    # TTB 0.5 against the oracle's 0.25: (1 - 0.5) / (1 - 0.25) of its saving, in every seed
    assert all(v == pytest.approx(2 / 3) for v in fast.values.values()) and fast.t.n == len(SLOPES)
    assert fast.t.mean == pytest.approx(2 / 3) and fast.of_means == pytest.approx(2 / 3)
    assert fast.etr == pytest.approx(0.5) and fast.ceiling_etr == pytest.approx(0.9)
    flat = shares["flat"]
    assert flat.t.n == 0 and math.isnan(flat.of_means)
    assert all(why == "flat: never reached" for why in flat.reasons.values())
    with pytest.raises(ValueError, match="ceiling"):
        paired_relative.ceiling_shares(comparisons, "nobody")

    assert paired.main([str(tmp_path), "--ceiling", "oracle", "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "Share of oracle's step saving over random" in text and "0.67" in text
    data = json.loads((tmp_path / "out" / "paired.json").read_text())["ceiling"]
    assert data[0]["selector"] == "fast" and data[0]["mean"] == pytest.approx(2 / 3)
    assert data[0]["ceiling_etr"] == pytest.approx(0.9) and data[1]["mean"] is None
    json.dumps(data, allow_nan=False)
    assert paired.main([str(tmp_path), "--ceiling", "nobody"]) == 2


def test_an_oracle_that_saved_nothing_leaves_the_share_undefined(tmp_path: Path) -> None:
    _write(tmp_path, (("random", 1, 0.25), ("oracle", 1, 0.9), ("fast", 2, 0.5)))
    (share,) = paired_relative.ceiling_shares(
        paired_stats.compare_all(paired_inputs.load_benchmark(tmp_path)), "oracle"
    )
    assert share.t.n == 0 and all("oracle saved no steps" in why for why in share.reasons.values())
