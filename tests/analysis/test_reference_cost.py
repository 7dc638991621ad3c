"""Reference generations beside each arm's steps (``analysis.reference_cost``, issue 36 item 3), on small fabricated
toy benchmarks: a summary.json and real run logs written by ``bots_verl.runlog.RunWriter``, with the ``meta.json``
fields ``bots_verl.main`` writes (``extra.selector``, ``extra.reference_columns``, ``extra.reference_coverage``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_benchmark import write_benchmark_run

from analysis import paired, paired_inputs, paired_stats, reference_cost
from analysis.loader import LoadError
from bots_verl.runlog import ETR_METRIC, ROLLOUTS_METRIC

STEPS = 12
POOL = 200
SEEDS = (0, 1)
COLUMNS = ["weak", "strong"]
# the toy's data profile "full": 16 samples per task (bots_verl.toy.build_profiles.BUILD_PROFILES["full"].reference_n),
# 2 models
SAMPLES, MODELS = 16, 2
ROLLOUTS = {"random": 128.0, "bots": 128.0, "bots_ref10": 128.0, "bots_noref": 128.0, "mopps": 96.0}
# arm -> (selector, its hyperparameters, reference columns given, reference_coverage written by bots_verl.main)
ARMS: dict[str, tuple[str, dict[str, Any], list[str], dict[str, int] | None]] = {
    "random": ("random", {}, COLUMNS, {"tasks": POOL, "labelled": POOL}),  # given both columns, reads neither
    "bots": ("bots", {}, COLUMNS, {"tasks": POOL, "labelled": POOL}),
    "bots_ref10": ("bots_partial_ref", {}, ["weak_ref10", "strong_ref10"], {"tasks": POOL, "labelled": 20}),
    "bots_noref": ("bots_noref", {}, [], None),  # no columns: bots_verl.main records no coverage
    "mopps": ("mopps", {"rho": 0.0, "evidence": "none"}, COLUMNS, {"tasks": POOL, "labelled": POOL}),
}
SLOPE = {"random": 1.0, "bots": 2.0, "bots_ref10": 2.0, "bots_noref": 1.0, "mopps": 1.0}


def _curve(arm: str) -> dict[str, float]:
    return {str(s): 0.25 + SLOPE[arm] * s / 1024 for s in range(0, STEPS + 1, 2)}


def _benchmark(root: Path, arms: dict = ARMS, profile: dict | None = None) -> Path:
    """A toy benchmark directory: summary.json and one run log per arm and seed."""
    records = []
    for arm, (selector, hparams, columns, coverage) in arms.items():
        for seed in SEEDS:
            records.append({"selector": arm, "seed": seed, "steps": STEPS, "accuracy": _curve(arm)})
            extra = {"selector": selector, "reference_columns": columns, "reference_coverage": coverage}
            line = {ROLLOUTS_METRIC: ROLLOUTS[arm], ETR_METRIC: 0.5}
            write_benchmark_run(root, arm, seed, [line] * STEPS, hparams=hparams, extra=extra)
    summary = {"profile": {"steps": STEPS, "data_profile": "full"} if profile is None else profile, "runs": records}
    (root / "summary.json").write_text(json.dumps(summary))
    return root


def _costs(root: Path) -> dict[str, reference_cost.ReferenceCost]:
    records = paired_inputs.load_benchmark(root)
    costs = paired.benchmark_reference_costs(root, records, paired_stats.compare_all(records))
    return {c.selector: c for c in costs}


def test_generations_used_and_saved_per_arm(tmp_path: Path) -> None:
    costs = _costs(_benchmark(tmp_path))
    assert list(costs) == ["random", "bots", "bots_ref10", "bots_noref", "mopps"]  # the baseline first
    full = POOL * SAMPLES * MODELS
    expected = {  # arm -> (used, saved)
        "random": (0, full),  # given both columns, but random reads none
        "bots": (full, 0),
        "bots_ref10": (20 * SAMPLES * MODELS, (POOL - 20) * SAMPLES * MODELS),
        "bots_noref": (0, full),  # its pool size comes from the other runs of the benchmark
        "mopps": (0, full),  # evidence "none": the columns it is given are never read
    }
    for arm, (used, saved) in expected.items():
        cost = costs[arm]
        assert cost.seeds == list(SEEDS)
        for seed in SEEDS:
            assert (cost.used(seed), cost.saved(seed), cost.full(seed)) == (used, saved, full), arm
            assert cost.rollouts[seed] == ROLLOUTS[arm] * STEPS
    assert costs["bots_ref10"].runs[0] == reference_cost.RunReference(True, 2, 20, POOL)
    assert costs["bots_noref"].runs[0] == reference_cost.RunReference(False, 0, None, None)
    assert costs["bots"].settings == reference_cost.ReferenceSettings(SAMPLES, MODELS, costs["bots"].settings.source)


def test_cli_prints_and_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _benchmark(tmp_path)
    assert paired.main([str(root), "--out", str(root / "out")]) == 0
    printed = capsys.readouterr().out
    table = printed[printed.index("**Reference generations") :]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    # selector | seeds | labelled | used | saved | TTB | Roll | training rollouts
    ref10 = "| bots_ref10 | 2 | 20 of 200 tasks | 640 | 5,760 (90.0%) | 0.50 [0.50, 0.50] |"
    assert rows["bots_ref10"].startswith(ref10)
    assert rows["bots"].startswith("| bots | 2 | 200 of 200 tasks | 6,400 | 0 (0.0%) | 0.50 [0.50, 0.50] |")
    assert rows["bots_noref"].startswith("| bots_noref | 2 | reads none | 0 | 6,400 (100.0%) | 1.00 [1.00, 1.00] |")
    assert rows["random"].startswith("| random | 2 | reads none | 0 | 6,400 (100.0%) | 1 (baseline) |")
    assert rows["mopps"].endswith("| 1,152 |")  # 96 rollouts x 12 steps
    assert "pass rate over 16 of them per task" in table and "6,400 generations" in table
    data = json.loads((root / "out" / "paired.json").read_text())["reference_cost"]
    ref10 = next(d for d in data if d["selector"] == "bots_ref10")
    assert ref10["samples"] == SAMPLES and ref10["full_models"] == MODELS
    assert ref10["per_seed"]["1"] == {
        "reads_reference": True,
        "reference_columns": 2,
        "labelled": 20,
        "tasks": POOL,
        "generations": 640,
        "full_labelling": 6400,
        "saved_generations": 5760,
        "training_rollouts": 128.0 * STEPS,
    }


def test_reference_samples_override_and_unknown_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _benchmark(tmp_path, profile={"steps": STEPS})  # no data profile: samples per task unknown
    assert paired.main([str(root)]) == 0
    table = capsys.readouterr().out.split("**Reference generations")[1]
    assert "| bots_ref10 | 2 | 20 of 200 tasks | — | — |" in table and "pass --reference-samples" in table
    assert paired.main([str(root), "--reference-samples", "4", "--reference-models", "3"]) == 0
    table = capsys.readouterr().out.split("**Reference generations")[1]
    # 20 labelled x 4 samples x its 2 columns; a full labelling is 200 x 4 x 3 models
    assert "| bots_ref10 | 2 | 20 of 200 tasks | 160 | 2,240 (93.3%) |" in table
    with pytest.raises(SystemExit):
        paired.main([str(root), "--reference-samples", "4"])
    with pytest.raises(SystemExit):
        paired.main([str(root), "--reference-samples", "0", "--reference-models", "2"])


def test_pool_size_from_the_prepare_manifest(tmp_path: Path) -> None:
    """With no run recording a coverage, the pool size is the benchmark's data/manifest.json ``pool_tasks``."""
    arms = {a: ARMS[a] for a in ("random", "bots_noref")}
    arms["random"] = ("random", {}, [], None)
    root = _benchmark(tmp_path, arms)
    assert _costs(root)["bots_noref"].full(0) is None  # unknown, not guessed
    (root / "data").mkdir()
    (root / "data" / "manifest.json").write_text(json.dumps({"data": {"pool_tasks": 50, "heldout_tasks": 9}}))
    noref = _costs(root)["bots_noref"]
    assert (noref.used(0), noref.saved(0)) == (0, 50 * SAMPLES * MODELS)


def test_no_run_logs_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _benchmark(tmp_path)
    for arm in ARMS:
        for seed in SEEDS:
            for name in ("meta.json", "metrics.jsonl"):
                (root / "runs" / f"{arm}_s{seed}" / "run" / name).unlink()
    assert paired.main([str(root)]) == 0
    assert "Reference generations" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("coverage", "message"),
    [({"tasks": 10, "labelled": 11}, "not within"), ({"tasks": "ten", "labelled": 1}, "tasks must be an integer")],
)
def test_a_bad_coverage_is_an_error_naming_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], coverage: dict, message: str
) -> None:
    root = _benchmark(tmp_path)
    meta = root / "runs" / "bots_s1" / "run" / "meta.json"
    data = json.loads(meta.read_text())
    data["extra"]["reference_coverage"] = coverage
    meta.write_text(json.dumps(data))
    records = paired_inputs.load_benchmark(root)
    with pytest.raises(LoadError, match=f"bots_s1.*reference_coverage.*{message}"):
        paired.benchmark_reference_costs(root, records, paired_stats.compare_all(records))
    assert paired.main([str(root)]) == 2
    assert "reference_coverage" in capsys.readouterr().err
