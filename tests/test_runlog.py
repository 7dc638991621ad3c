"""The run-log layout: write with RunWriter, read back with read_meta / iter_metrics / metrics_by_step."""

import json
import math

import numpy as np
import pytest

from bots_verl.runlog import (
    RunWriter,
    check_accuracy,
    iter_metrics,
    metrics_by_step,
    metrics_files,
    parse_int,
    read_meta,
    rotate_metrics,
    write_meta,
)


def test_round_trip(tmp_path):
    with RunWriter(
        tmp_path / "r", run_id="r", source="sim", method="bots", seed=np.int64(3), hparams={"rho": 0.1}
    ) as w:
        w.log(1, {"val-core/sim-math/acc/mean@1": np.float32(0.5), "bots/x": float("nan")})
        w.log(2, {"bots/x": 1})
    meta = read_meta(tmp_path / "r")
    assert meta["seed"] == 3 and meta["hparams"] == {"rho": 0.1} and meta["version"] == 1
    rows = list(iter_metrics(tmp_path / "r"))
    assert rows[0][0] == 1 and rows[0][1]["val-core/sim-math/acc/mean@1"] == pytest.approx(0.5)
    assert math.isnan(rows[0][1]["bots/x"]) and rows[1] == (2, {"bots/x": 1})


def test_reads_verl_file_logger_lines(tmp_path):
    # verl's FileLogger writes {"step": N, "data": {...}} per tracker.log call
    write_meta(tmp_path, run_id="v", source="verl")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 5, "data": {"timing_s/step": 60.0}}) + "\n\n")
    assert list(iter_metrics(tmp_path)) == [(5, {"timing_s/step": 60.0})]


def test_the_lines_of_a_step_merge_in_file_order(tmp_path):
    # a benchmark run: verl's training line of a step, then the evaluation line of the same step
    write_meta(tmp_path, run_id="b", source="verl")
    lines = [(0, {"eval": 0.1}), (1, {"etr": 0.5, "eval": None}), (1, {"eval": 0.2}), (2, {"etr": 0.25})]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in lines))
    assert metrics_by_step(tmp_path) == {0: {"eval": 0.1}, 1: {"etr": 0.5, "eval": 0.2}, 2: {"etr": 0.25}}
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ValueError, match=":1: malformed"):
        metrics_by_step(tmp_path)


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown meta keys"):
        write_meta(tmp_path, method="bots", sed=1)
    with pytest.raises(ValueError, match="no meta.json"):
        read_meta(tmp_path)
    (tmp_path / "meta.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a bots-verl-run"):
        read_meta(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ValueError, match=":1: malformed"):
        list(iter_metrics(tmp_path))


def test_resume_keeps_earlier_metrics(tmp_path):
    """verl's file logger truncates metrics.jsonl on open: a resumed run rotates it first and readers join the parts."""
    write_meta(tmp_path, run_id="r", source="verl")
    metrics = tmp_path / "metrics.jsonl"
    assert rotate_metrics(tmp_path) is None  # nothing to keep yet
    metrics.write_text("".join(json.dumps({"step": s, "data": {"acc": s / 10}}) + "\n" for s in (1, 2, 3)))
    assert rotate_metrics(tmp_path).name == "metrics.part0.jsonl"
    # the resumed run restarts from its step-2 checkpoint and logs step 3 again, then step 4
    metrics.write_text("".join(json.dumps({"step": s, "data": {"acc": s}}) + "\n" for s in (3, 4)))
    assert rotate_metrics(tmp_path).name == "metrics.part1.jsonl"
    metrics.write_text(json.dumps({"step": 5, "data": {"acc": 5}}) + "\n")
    assert [p.name for p in metrics_files(tmp_path)] == ["metrics.part0.jsonl", "metrics.part1.jsonl", "metrics.jsonl"]
    assert [step for step, _ in iter_metrics(tmp_path)] == [1, 2, 3, 3, 4, 5]
    assert dict(iter_metrics(tmp_path))[3] == {"acc": 3}  # the later value of a repeated step wins


def test_method_labels():
    from bots_verl.runlog import METHODS, PAPER_METHODS, method_display, method_spec

    assert [m.display for m in PAPER_METHODS] == ["Random", "Offline (easy→hard)", "BOTS-MoPPS", "BOTS-DOTS", "BOTS"]
    mopps, dots, bots = (METHODS[k] for k in ("bots_mopps", "bots_dots", "bots"))
    assert (mopps.selector, mopps.hparams["lam"], mopps.hparams["rho"], mopps.hparams["selection"]) == (
        "bots",
        0.0,
        0.0,
        "thompson",
    )
    assert (dots.hparams["lam"], dots.hparams["rho"], dots.hparams["selection"]) == (1.0, 1.0, "greedy")
    # the sweep endpoints are other configs than the baselines
    assert dict(method_spec("bots_rho0").hparams) == {**bots.hparams, "rho": 0.0} != dict(mopps.hparams)
    assert dict(method_spec("bots_lambda1.0").hparams) == {**bots.hparams, "lam": 1.0}
    assert method_spec("my_run") is None and method_display("my_run") == "my_run"
    assert method_display("bots_rho0.05") == "BOTS (ρ=0.05)" and method_display("bots_greedy") == "BOTS (greedy)"
    for bad in ("bots_rho", "bots_rhoX", "bots_lambda1.5"):
        with pytest.raises(ValueError, match="sweep label"):
            method_spec(bad)
    assert method_display("bots_rhoX") == "bots_rhoX"


def test_parse_int_and_check_accuracy_refuse_what_int_and_float_would_bend() -> None:
    """Issue 34: ``int(0.7)`` is 0, ``int(True)`` is 1; an accuracy of 7.5 or NaN is not one."""
    assert [parse_int(v, "x") for v in (3, 3.0, "3", " -2 ")] == [3, 3, 3, -2]
    for bad in (0.7, True, "zero", "10.0", None, [1], math.inf):
        with pytest.raises(ValueError, match=r"^f\.json: seed must be an integer, got "):
            parse_int(bad, "f.json: seed")
    assert check_accuracy(0, "a") == 0.0 and check_accuracy("0.5", "a") == 0.5
    for bad, why in ((7.5, "outside"), (math.nan, "not a finite"), (None, "is null"), ("x", "not a number")):
        with pytest.raises(ValueError, match=rf"^run r: metric m at step 3: accuracy .*{why}"):
            check_accuracy(bad, "run r: metric m at step 3")
