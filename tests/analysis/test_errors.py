"""Logs a table cannot use give errors that name the run and the metric, the lengths, or the missing baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fixtures import CURVES, write_run

from analysis import paper_tables, tables
from analysis.loader import LoadError, load_runs


def _pair(root: Path, **bots_kwargs: object) -> None:
    for seed in (0, 1):
        write_run(root, "random", seed, CURVES[("random", seed)])
        write_run(root, "bots", seed, CURVES[("bots", seed)], **bots_kwargs)


@pytest.mark.parametrize(
    ("kwargs", "metric"),
    [({"etr": None}, "bots/batch/effective_task_ratio"), ({"rollouts": None}, "bots/rollouts")],
)
def test_missing_metric_names_run_and_metric(tmp_path: Path, kwargs: dict, metric: str) -> None:
    _pair(tmp_path, **kwargs)
    with pytest.raises(LoadError, match=rf"run math/bots/seed0 \(.*seed0\): metric '{metric}' is missing"):
        paper_tables.main_table(load_runs([tmp_path]))


def test_missing_accuracy_names_the_run(tmp_path: Path) -> None:
    _pair(tmp_path, acc_metric="val/other")
    with pytest.raises(LoadError, match=r"run math/bots/seed0 .*no eval accuracy metric \(val-core/"):
        paper_tables.main_table(load_runs([tmp_path]))
    with pytest.raises(LoadError, match=r"run math/random/seed0 .*metric 'val/other' is missing"):
        paper_tables.main_table(load_runs([tmp_path]), acc_metric="val/other")


def test_different_lengths_say_which(tmp_path: Path) -> None:
    _pair(tmp_path)
    write_run(
        tmp_path / "long", "offline", 0, (0.1, 0.2, 0.3, 0.4, 0.5, 0.6), total_steps=10, eval_steps=(0, 2, 4, 6, 8, 10)
    )
    with pytest.raises(LoadError, match=r"domain math: runs longer than the random budget \(8 steps\): .*seed0"):
        paper_tables.main_table(load_runs([tmp_path]))
    write_run(tmp_path / "long", "offline", 1, (0.1, 0.2, 0.3), total_steps=4, eval_steps=(0, 2, 4))
    with pytest.raises(LoadError, match=r"runs of different lengths .*total_steps=4: .*total_steps=10"):
        paper_tables.main_table(load_runs([tmp_path]))


def test_a_shorter_row_is_censored_against_the_baseline_budget(tmp_path: Path) -> None:
    """An arm stopped early (dynamic sampling) keeps Random's target and budget: reached = a ratio, not = —."""
    _pair(tmp_path)
    # Random's best over its 8 steps: 0.5 (seed 0), 0.8 (seed 1); the arm runs 4 steps and reaches 0.5 at step 2 in
    # seed 0 (Random needed 8) and never 0.8 in seed 1
    write_run(tmp_path, "dapo_ds", 0, (0.1, 0.5, 0.6), total_steps=4, eval_steps=(0, 2, 4))
    write_run(tmp_path, "dapo_ds", 1, (0.1, 0.3, 0.4), total_steps=4, eval_steps=(0, 2, 4))
    table = paper_tables.main_table(load_runs([tmp_path]))
    ttb, bsf100, bsf25 = (table.cell("dapo_ds", "math", key) for key in ("TTB100", "BSF100", "BSF25"))
    assert ttb.n == 1 and ttb.n_missing == 1 and ttb.mean == pytest.approx(2 / 8)
    assert bsf100.n == 0  # its horizon (8 steps) is past the arm's last step
    assert bsf25.n == 2  # 2 steps: both seeds cover it
    roll = table.cell("dapo_ds", "math", "Roll100")
    assert roll.n == 1 and roll.mean == pytest.approx(2 / 8)  # same rollouts per step here


def test_crashed_run_is_a_different_length(tmp_path: Path) -> None:
    _pair(tmp_path)
    write_run(tmp_path / "crash", "offline", 0, (0.1, 0.2, 0.3), total_steps=8, eval_steps=(0, 2, 4))
    lines = (tmp_path / "crash/math/offline/seed0/metrics.jsonl").read_text().splitlines()
    (tmp_path / "crash/math/offline/seed0/metrics.jsonl").write_text("\n".join(lines[:7]) + "\n")
    with pytest.raises(LoadError, match=r"last logged step=4: math/offline/seed0"):
        paper_tables.main_table(load_runs([tmp_path]))


def test_missing_baseline_is_per_domain(tmp_path: Path) -> None:
    _pair(tmp_path)
    write_run(tmp_path, "bots", 0, CURVES[("bots", 0)], domain="logic")
    with pytest.raises(LoadError, match=r"domain logic: no 'random' baseline runs .*methods: \['bots'\]"):
        paper_tables.main_table(load_runs([tmp_path]))


def test_unpaired_seed_and_duplicate_runs(tmp_path: Path) -> None:
    _pair(tmp_path)
    write_run(tmp_path, "bots", 5, CURVES[("bots", 0)])
    with pytest.raises(
        LoadError, match=r"domain math: bots seed 5 has no random run with the same seed .*seeds: \[0, 1\]"
    ):
        paper_tables.main_table(load_runs([tmp_path]))
    write_run(tmp_path / "again", "bots", 5, CURVES[("bots", 0)])
    with pytest.raises(LoadError, match=r"row 'bots', seed 5: two runs"):
        paper_tables.main_table(load_runs([tmp_path]))


def test_cli_reports_errors_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "bots", 0, CURVES[("bots", 0)])
    assert tables.main(["--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: domain math: no 'random' baseline runs") and err.count("\n") == 1


# ---- issue 34: accuracies outside [0, 1] or not finite are errors naming the run, the metric and the step (one rule)
ACC_NAME = "val-core/math500/acc/mean@4"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (7.5, r"accuracy 7\.5 is outside \[0, 1\]"),
        (-0.25, r"accuracy -0\.25 is outside \[0, 1\]"),
        (float("nan"), r"accuracy is nan, not a finite number"),  # RunWriter writes null, read back as NaN
        (float("inf"), r"accuracy is nan, not a finite number"),
    ],
)
def test_an_accuracy_outside_0_1_or_not_finite_names_run_metric_and_step(
    tmp_path: Path, value: float, message: str
) -> None:
    _pair(tmp_path)
    # Random's last evaluation (step 8): a NaN there used to be dropped silently, 7.5 used as given
    write_run(tmp_path, "random", 0, (0.1, 0.2, 0.3, 0.4, value))
    with pytest.raises(LoadError, match=rf"run math/random/seed0 \(.*\): metric '{ACC_NAME}' at step 8: {message}"):
        paper_tables.main_table(load_runs([tmp_path]))


def test_a_literal_nan_accuracy_from_verl_is_an_error_and_the_cli_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verl's file logger writes NaN as a bare ``NaN``: the same error, one line, exit 2."""
    _pair(tmp_path)
    metrics = tmp_path / "math/bots/seed1/metrics.jsonl"
    good = metrics.read_text()
    nan = json.dumps({"step": 7, "data": {ACC_NAME: float("nan")}}) + "\n"  # json writes NaN, as verl's logger
    # a finite value of the same step logged too (a resumed run re-logs it) wins: not an error
    metrics.write_text(good + nan + json.dumps({"step": 7, "data": {ACC_NAME: 0.65}}) + "\n")
    assert tables.main(["--runs", str(tmp_path)]) == 0
    capsys.readouterr()
    metrics.write_text(good + nan)
    assert tables.main(["--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"run math/bots/seed1 ({tmp_path}/math/bots/seed1): metric '{ACC_NAME}' at step 7: accuracy is nan" in err


def test_an_explicit_metric_is_checked_too(tmp_path: Path) -> None:
    _pair(tmp_path, acc_metric="val/acc")
    write_run(tmp_path, "random", 0, (0.1, 0.2, 30.0, 0.4, 0.5), acc_metric="val/acc")
    with pytest.raises(LoadError, match=r"run math/random/seed0 .*: metric 'val/acc' at step 4: accuracy 30 is"):
        paper_tables.main_table(load_runs([tmp_path]), acc_metric="val/acc")
