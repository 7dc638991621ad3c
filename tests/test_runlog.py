"""The run-log layout: write with RunWriter, read back with read_meta / iter_metrics."""

import json
import math

import numpy as np
import pytest

from bots_verl.runlog import RunWriter, iter_metrics, metrics_files, read_meta, rotate_metrics, write_meta


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
