"""Loading runs: our run logs (merged lines), TensorBoard events and wandb CSV exports with sidecars or --meta."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from analysis_fixtures import ACC, CURVES, write_run

from analysis import loader
from analysis.loader import LoadError


def test_runlog_merges_lines_of_one_step(tmp_path: Path) -> None:
    run = loader.load_run(write_run(tmp_path, "bots", 3, CURVES[("bots", 0)], hparams={"rho": 0.2}))
    assert (run.domain, run.method, run.seed, run.total_steps, run.last_step) == ("math", "bots", 3, 8, 8)
    assert run.hparams == {"rho": 0.2} and run.label == "bots" and run.input_format == "runlog"
    # step 2 was logged as a training line and a validation line: one row holds both
    assert run.metrics.loc[2, ACC] == pytest.approx(0.3) and run.metrics.loc[2, "bots/rollouts"] == 64.0
    assert math.isnan(run.metrics.loc[3, ACC])
    name, acc = loader.accuracy_metric(run)
    assert name == ACC and list(acc.index) == [0, 2, 4, 6, 8]


def test_several_eval_sources_are_averaged(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "bots", 0, (0.2, 0.4, 0.6, 0.8, 1.0))
    with (run_dir / "metrics.jsonl").open("a") as fh:
        for step, value in ((0, 0.0), (4, 0.2)):
            fh.write(json.dumps({"step": step, "data": {"val-core/aime24/acc/mean@16": value}}) + "\n")
            fh.write(json.dumps({"step": step, "data": {"val-core/aime24/acc/mean@1": 0.9}}) + "\n")
    name, acc = loader.accuracy_metric(loader.load_run(run_dir))
    assert name == f"mean(val-core/aime24/acc/mean@16, {ACC})"
    assert acc.to_dict() == pytest.approx({0: 0.1, 4: 0.4})


def test_a_metric_per_domain_reads_the_runs_own_and_defaults_for_a_domain_left_out(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "bots", 0, (0.2, 0.4, 0.6, 0.8, 1.0))
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"step": 4, "data": {"val-core/toy/acc/estimate": 0.7}}) + "\n")
    run = loader.load_run(run_dir)  # a math run
    name, acc = loader.accuracy_metric(run, {"math": "val-core/toy/acc/estimate", "code": ACC})
    assert name == "val-core/toy/acc/estimate" and acc.dropna().to_dict() == {4: 0.7}
    assert loader.accuracy_metric(run, {"code": "val-core/toy/acc/estimate"})[0] == ACC


def test_tensorboard_with_sidecar_and_meta_flags(tmp_path: Path) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    run_dir = tmp_path / "tb" / "bots_seed1"
    writer = EventFileWriter(str(run_dir))
    for step, (tag, value) in enumerate([(ACC, 0.1), ("bots/rollouts", 64.0), (ACC, 0.3)]):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(step=step // 2 * 2, wall_time=1.0 + step, summary=summary))
    writer.close()
    with pytest.raises(LoadError, match=r"bots_seed1: metadata lacks \['domain', 'method', 'seed'\]"):
        loader.load_run(run_dir)
    (run_dir / "meta.json").write_text(json.dumps({"method": "bots", "seed": 1, "total_steps": 2}))
    run = loader.load_run(run_dir, loader.parse_meta_args(["domain=math", "seed=7", "hparams.rho=0.5"]))
    assert (run.domain, run.method, run.seed, run.hparams, run.input_format) == (
        "math",
        "bots",
        1,
        {"rho": 0.5},
        "tensorboard",
    )
    assert run.metrics.loc[0, ACC] == pytest.approx(0.1) and run.metrics.loc[0, "bots/rollouts"] == 64.0
    assert run.metrics.loc[2, ACC] == pytest.approx(0.3)
    assert [r.path for r in loader.load_runs([tmp_path / "tb"], {"domain": "math"})] == [run_dir]


def test_wandb_csv_with_sidecar(tmp_path: Path) -> None:
    csv = tmp_path / "export" / "bots-0.csv"
    csv.parent.mkdir()
    csv.write_text(f"_step,_runtime,{ACC},bots/rollouts\n0,1.0,0.1,\n1,2.0,,64\n2,3.0,0.4,64\n2,3.5,,\n")
    (csv.parent / "bots-0.meta.json").write_text(json.dumps({"domain": "code", "method": "bots", "seed": 0}))
    run = loader.load_run(csv)
    assert (run.domain, run.total_steps, run.input_format) == ("code", 2, "wandb-csv")
    assert "_runtime" not in run.metrics.columns
    assert run.metrics.loc[2, ACC] == pytest.approx(0.4) and run.metrics.loc[2, "bots/rollouts"] == 64.0
    bad = tmp_path / "export" / "bad.csv"
    bad.write_text("Step,acc\n0,1\n")
    # found by walking, a CSV without _step is not a run; given explicitly, it is an error
    assert [r.path for r in loader.load_runs([tmp_path / "export"])] == [csv]
    with pytest.raises(LoadError, match=r"bad.csv: a wandb CSV export needs a '_step' column"):
        loader.load_run(bad, {"domain": "x", "method": "y", "seed": 0})


def test_unknown_layouts_and_empty_roots(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoadError, match="no runs found under"):
        loader.load_runs([tmp_path / "empty"])
    with pytest.raises(LoadError, match="no such file"):
        loader.load_runs([tmp_path / "missing"])
    with pytest.raises(LoadError, match="neither a run log"):
        loader.load_run(tmp_path / "empty")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        loader.parse_meta_args(["domain"])


def test_a_rotated_run_without_a_current_metrics_file_is_found(tmp_path):
    from analysis.loader import find_run_paths, load_run
    from bots_verl import runlog

    run_dir = tmp_path / "runs" / "r0"
    with runlog.RunWriter(run_dir, domain="math", method="bots", seed=0, total_steps=1) as writer:
        writer.log(1, {"val-core/x/acc/mean@1": 0.5})
    runlog.rotate_metrics(run_dir)  # resumed, crashed before verl reopened metrics.jsonl
    assert find_run_paths(tmp_path / "runs") == [run_dir]
    assert load_run(run_dir).metrics.loc[1, "val-core/x/acc/mean@1"] == 0.5


# ---- issue 34: seeds and steps are integers, or an error naming the file
@pytest.mark.parametrize(
    ("seed", "message"), [(0.7, "must be an integer, got 0.7"), ("zero", "must be an integer, got 'zero'")]
)
def test_a_seed_that_is_not_an_integer_names_the_file(tmp_path: Path, seed: object, message: str) -> None:
    run_dir = write_run(tmp_path, "bots", 0, CURVES[("bots", 0)])
    meta = json.loads((run_dir / "meta.json").read_text())
    (run_dir / "meta.json").write_text(json.dumps({**meta, "seed": seed}))
    with pytest.raises(LoadError, match=rf"run {run_dir}: metadata 'seed' {message}"):
        loader.load_run(run_dir)
    (run_dir / "meta.json").write_text(json.dumps({**meta, "seed": 3.0}))  # an integral float is that integer
    assert loader.load_run(run_dir).seed == 3


def test_a_step_that_is_not_an_integer_names_the_file_and_line(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "bots", 0, CURVES[("bots", 0)])
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"step": 9.5, "data": {ACC: 0.5}}) + "\n")
    lines = len((run_dir / "metrics.jsonl").read_text().splitlines())
    with pytest.raises(LoadError, match=rf"metrics.jsonl:{lines}: malformed metrics line \(step must be an integer"):
        loader.load_run(run_dir)


def test_a_csv_nan_cell_is_not_logged_but_inf_is_an_error(tmp_path: Path) -> None:
    csv = tmp_path / "run.csv"
    csv.write_text(f"_step,{ACC},x\n0,0.1,1\n1,,2\n2,NaN,3\n4,inf,4\n")
    (tmp_path / "run.meta.json").write_text(json.dumps({"domain": "math", "method": "bots", "seed": 0}))
    run = loader.load_run(csv)
    with pytest.raises(LoadError, match=rf"metric '{ACC}' at step 4: accuracy is inf"):
        loader.accuracy_metric(run)
