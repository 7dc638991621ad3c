"""``python -m analysis.gap``: the gap to the oracle from fabricated toy run logs (a toy benchmark's layout)."""

import json

import numpy as np
import pytest
from fake_benchmark import write_benchmark_run

from analysis.gap import degenerate_split, gap_report, load_series, main

STEPS, BATCH = 30, 16


def _write(root, arm, seed, first_visit, d_first, d_revisit, logged=False, extra=None):
    """A run whose share of first visits per step and degenerate shares among them are known."""
    rng = np.random.default_rng(seed)
    ever = 0
    lines = []
    for step in range(1, STEPS + 1):
        f = 1.0 if step == 1 else float(np.clip(first_visit + rng.normal(0, 0.15), 0, 1))
        f = round(f * BATCH) / BATCH
        ever += f * BATCH
        data = {
            "bots/batch/effective_task_ratio": 1 - (d_first * f + d_revisit * (1 - f)),
            "bots/batch/success_rate": 0.4,
            "bots/tasks_ever_selected": ever,
            **(extra or {}),
        }
        if logged:
            data |= {"bots/batch/degenerate_first_frac": d_first, "bots/batch/first_visit_frac": f}
            if f < 1:
                data["bots/batch/degenerate_revisit_frac"] = d_revisit
        lines.append(data)
    # the evaluation's line of a step is logged separately, after its training line
    evals = {step: {"train-pool/toy__arith/acc/exact": 0.1 + 0.001 * step} for step in range(3, STEPS + 1, 3)}
    return write_benchmark_run(
        root, arm, seed, lines, evals, run_id=f"{arm}_s{seed}", source="verl", model="m", hparams={}
    )


@pytest.fixture
def bench(tmp_path):
    for seed in range(3):
        _write(
            tmp_path,
            "bots",
            seed,
            0.45,
            0.5,
            0.3,
            extra={"bots/posterior/mean_avg": 0.2, "bots/selection/sampled_p_mean": 0.5},
        )
        _write(tmp_path, "oracle", seed, 0.3, 0.02, 0.01, logged=True, extra={"bots/oracle/selected_pass_rate": 0.51})
    _write(tmp_path, "random", 0, 0.75, 0.7, 0.7)  # one seed only: left out of the comparison
    return tmp_path


def test_regression_recovers_the_degenerate_shares_and_logged_ones_are_read(bench):
    d_first, d_revisit = degenerate_split(load_series(bench / "runs" / "bots_s0" / "run", "bots", 0))
    assert d_first == pytest.approx(0.5, abs=1e-9) and d_revisit == pytest.approx(0.3, abs=1e-9)
    logged = load_series(bench / "runs" / "oracle_s1" / "run", "oracle", 1)
    assert degenerate_split(logged) == pytest.approx((0.02, 0.01))


def test_report_pairs_seeds_and_answers_the_three_questions(bench, tmp_path, capsys):
    report = gap_report(bench)
    assert report.seeds == [0, 1, 2] and report.arms == ["bots", "oracle"]  # random lacks seeds 1, 2
    rows = {label: cells for _, label, cells in report.rows}
    assert rows["degenerate share among first visits"]["bots"][0].mean == pytest.approx(0.5)
    assert rows["oracle: true pass rate of its picks"].keys() == {"oracle"}
    # the posterior's pool mean against the run's own exact pool pass rate, at the evaluated steps only
    truth = np.mean([0.1 + 0.001 * s for s in range(3, STEPS + 1, 3)])
    assert rows["|posterior pool mean - own exact pool pass rate|"]["bots"][0].mean == pytest.approx(0.2 - truth)
    assert report.split_source == {"bots": "regression", "oracle": "logged"}
    out = tmp_path / "gap.md"
    assert main([str(bench / "runs"), "--out", str(out)]) == 0
    text = out.read_text()
    assert "## (c) Where BOTS's all-wrong and all-right groups come from" in text and "0.50 [" in text


def test_missing_arm_and_unpaired_seeds_are_refused(bench, tmp_path, capsys):
    assert main([str(bench), "--arm", "mopps"]) == 2
    assert "no run logs of 'mopps'" in capsys.readouterr().err
    lone = tmp_path / "lone"
    _write(lone, "bots", 0, 0.4, 0.5, 0.3)
    _write(lone, "oracle", 1, 0.3, 0.0, 0.0)
    with pytest.raises(ValueError, match="share no seed"):
        gap_report(lone)
    bad = _write(tmp_path / "bad", "bots", 0, 0.4, 0.5, 0.3)
    (bad / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": {"x": 1}}) + "\n")
    with pytest.raises(ValueError, match="no step logged"):
        load_series(bad, "bots", 0)
