"""The toy benchmark without training: a failed run is reported at once, by name, with its log's tail, on stderr;
the paired statistics are wired into the summary. The training command is replaced by ``python -c``."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bots_verl.toy import benchmark, benchmark_lock, benchmark_summary, run_records, training_runs
from bots_verl.toy.arms import PROFILES

RESULTS = Path(__file__).resolve().parents[2] / "recipes" / "toy" / "results"


def _fake_manifest(root: Path) -> dict:
    """Just what ``run_benchmark`` reads before training: two one-prompt parquet files and the artifact paths."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("train", "val"):
        pq.write_table(pa.table({"prompt": [[{"role": "user", "content": "12+34"}]]}), root / f"{name}.parquet")
    return {
        "profile": "ci",
        "seed": 0,
        "artifacts": {
            "train_files": str(root / "train.parquet"),
            "val_files": str(root / "val.parquet"),
            "policy_models": {"0": str(root / "policy")},
            "reference_columns": ["weak", "strong"],
            "task_id_field": "task_id",
            "max_response_length": 8,
        },
        "data": {"heldout_tasks": 1},
    }


def test_a_failed_run_is_reported_at_once_with_its_name_and_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _fake_manifest(tmp_path / "data")
    monkeypatch.setattr("bots_verl.toy.prepare.prepare", lambda *args, **kwargs: manifest)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # main's SIGTERM handler would outlive the test
    real_popen = subprocess.Popen

    def popen(cmd: list[str], **kwargs: object) -> subprocess.Popen:
        # bots fails at once; random, planned first, would train for two minutes
        fails = "bots.selector=bots" in cmd
        code = "import sys; print('boom'); sys.exit(3)" if fails else "import time; time.sleep(120)"
        return real_popen([sys.executable, "-c", code], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    start = time.monotonic()
    # training is faked, so no Ray cluster to share
    argv = ["--profile", "ci", "--selectors", "random", "bots", "--jobs", "2", "--own-clusters", "--out", str(tmp_path)]
    status = benchmark.main(argv)
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert status == 1
    assert "bots_s0: training exited with 3" in err and "boom" in err
    assert str(tmp_path / "runs" / "bots_s0" / "train.log") in err
    # not after the run planned before it: that one was stopped (a rerun resumes it)
    assert elapsed < 60, f"the failure was reported after {elapsed:.0f} s"


def test_other_failures_get_the_run_name_and_log_tail(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "mopps_s2"
    run_dir.mkdir(parents=True)
    (run_dir / "train.log").write_text("step 1\nTraceback: the last line\n")
    error = training_runs.run_failure(run_dir, KeyError("val-core"))
    assert isinstance(error, RuntimeError)
    text = str(error)
    assert text.startswith("mopps_s2: KeyError: 'val-core'") and text.endswith("the last line\n")
    timeout = training_runs.run_failure(run_dir, RuntimeError("mopps_s2: training timed out after 9 s (x)"))
    assert str(timeout).startswith("mopps_s2: training timed out") and "the last line" in str(timeout)
    exited = RuntimeError("mopps_s2: training exited with 1 (log):\nits tail")
    assert training_runs.run_failure(run_dir, exited) is exited


def test_a_summary_of_finished_runs_says_whether_any_planned_run_is_missing() -> None:
    summary = {"profile": {}, "finished_runs": 3, "planned_runs": 4, "median_step_s": 1.234}
    assert benchmark_summary.wall_clock(summary).startswith("**Partial: 3 of 4 planned runs finished**")
    summary["finished_runs"] = 4
    assert benchmark_summary.wall_clock(summary) == "All 4 planned runs finished; median step 1.23 s."


def test_paired_statistics_join_the_summary(tmp_path: Path) -> None:
    shutil.copy(RESULTS / "summary.json", tmp_path / "summary.json")
    summary = json.loads((tmp_path / "summary.json").read_text())
    tables = {"main": "MAIN", "pool": "POOL", "overhead": "OVERHEAD"}
    benchmark_summary.add_paired(tmp_path, summary, tables)
    assert summary["paired"]["baseline"] == "random"
    assert set(summary["paired"]["comparisons"]) == {r["selector"] for r in summary["runs"]} - {"random"}
    assert json.loads((tmp_path / "summary.json").read_text())["paired"] == summary["paired"]
    assert (tmp_path / "figures" / "toy_paired.png").stat().st_size > 0
    text = benchmark_summary.summary_markdown(summary, tables, {"data": {"heldout_tasks": 600}}, tmp_path / "data")
    section = text.split("## Paired against random, seed by seed")[1]
    assert "| bots |" in section and section.index("| bots |") < section.index("## Selection overhead")
    assert "figures/toy_paired.png" in text


def test_no_paired_statistics_without_random(tmp_path: Path) -> None:
    summary = json.loads((RESULTS / "summary.json").read_text())
    summary["runs"] = [r for r in summary["runs"] if r["selector"] != "random"]
    summary.pop("paired", None)  # the committed summary carries its own
    tables: dict[str, str] = {}
    benchmark_summary.add_paired(tmp_path, summary, tables)
    assert "paired" not in summary and not tables and not (tmp_path / "paired.json").exists()


def test_a_separate_async_arm_gets_a_shared_cluster_with_a_logical_gpu_for_its_rollout() -> None:
    from bots_verl.toy.arms import arm_settings, cluster_gpus

    assert arm_settings("bots_separate") == (
        "bots",
        ("trainer.v1.trainer_mode=separate_async", "trainer.v1.separate_async.parameter_sync_step=1"),
    )
    assert cluster_gpus([("bots", 0), ("bots_separate", 0)]) == 2
    assert cluster_gpus([("bots", 0), ("bots_async", 1)]) == 1


def test_an_unknown_arm_is_refused_by_the_dry_run(capsys) -> None:
    from bots_verl.toy.arms import arm_settings
    from bots_verl.toy.benchmark import main

    assert arm_settings("dapo_ds")[0] == "random" and arm_settings("bots") == ("bots", ())
    with pytest.raises(ValueError, match="nope"):
        arm_settings("nope")
    assert main(["--profile", "beyond", "--dry-run", "--selectors", "dapo_ds", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_the_tables_take_finished_runs_only(tmp_path: Path) -> None:
    """A stopped run that logged nothing (no ``done.json``) does not stop the summary of the finished ones."""
    from bots_verl.toy.run_records import finished_runs

    with pytest.raises(RuntimeError, match="no finished run"):
        finished_runs(tmp_path)
    for name, done in (("random_s1", True), ("bots_s0", True), ("bots_warm_s7", False), ("random_s0", True)):
        (tmp_path / "runs" / name / "run").mkdir(parents=True)
        if done:
            (tmp_path / "runs" / name / "done.json").write_text("{}")
    assert [d.name for d in finished_runs(tmp_path)] == ["bots_s0", "random_s0", "random_s1"]


# ---- issue 34 -------------------------------------------------------------------------------------------------------
def _fake_prepare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = _fake_manifest(tmp_path / "data")
    (tmp_path / "data" / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr("bots_verl.toy.prepare.prepare", lambda *args, **kwargs: manifest)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # main's SIGTERM handler would outlive the test


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"selector": "random", "seed": 0, "ste', "Unterminated string"),  # cut while written
        ('{"selector": "random", "seed": 0, "steps": "two", "accuracy": {}}', "steps must be an integer"),
        ('{"selector": "random", "seed": 0, "steps": 2, "accuracy": {"2": 7.5}}', r"accuracy 7\.5 is outside"),
        ("[1, 2]", "it holds a list"),
    ],
)
def test_a_torn_or_edited_done_json_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str, why: str
) -> None:
    _fake_prepare(tmp_path, monkeypatch)
    done = tmp_path / "runs" / "random_s0" / "done.json"
    done.parent.mkdir(parents=True)
    done.write_text(text)
    argv = ["--profile", "ci", "--selectors", "random", "--own-clusters", "--out", str(tmp_path)]
    assert benchmark.main(argv) == 1
    err = capsys.readouterr().err
    assert f"toy benchmark failed: {done}: not a readable run record (" in err
    assert why.replace("\\", "") in err and "Traceback" not in err
    assert benchmark.main([*argv, "--summarize-finished"]) == 1  # the same message, not a traceback
    assert f"{done}: not a readable run record" in capsys.readouterr().err


def test_done_and_summary_files_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer killed in the middle leaves the old record whole (and a tagged temp file), never a torn one."""
    from bots_verl import fileio

    done = tmp_path / "done.json"
    fileio.write_text_atomic(done, '{"steps": 1}\n')
    assert done.read_text() == '{"steps": 1}\n' and [p.name for p in tmp_path.iterdir()] == ["done.json"]

    def killed(path: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio, "fsync_file", killed)
    with pytest.raises(KeyboardInterrupt):
        fileio.write_text_atomic(done, '{"steps": 2, "accuracy": {}}\n')
    assert done.read_text() == '{"steps": 1}\n' and [p.name for p in tmp_path.iterdir()] == ["done.json"]
    for module in (benchmark, benchmark_summary, run_records, training_runs):
        source = Path(module.__file__).read_text()
        assert "done_file.write_text" not in source and '"summary.json").write_text' not in source


_HOLDER = """
import sys, time
from pathlib import Path
from bots_verl.toy.benchmark_lock import directory_lock
with directory_lock(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(120)
"""


def test_a_second_benchmark_on_one_out_is_refused_and_a_dead_holder_is_stale(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _fake_prepare(tmp_path, monkeypatch)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        argv = ["--profile", "ci", "--selectors", "random", "--own-clusters", "--out", str(tmp_path)]
        assert benchmark.main(argv) == 1
        err = capsys.readouterr().err
        assert f"toy benchmark failed: {tmp_path} is in use by another toy benchmark: pid {holder.pid} on host" in err
        assert not (tmp_path / "runs").exists()  # refused before anything was written
    finally:
        holder.kill()  # SIGKILL: no finally runs, the lock file stays behind
        holder.wait()
    assert (tmp_path / ".benchmark.lock").is_file()
    with caplog.at_level("INFO"), benchmark_lock.directory_lock(tmp_path):
        assert json.loads((tmp_path / ".benchmark.lock").read_text())["pid"] != holder.pid
    assert f"took over a stale lock of pid {holder.pid}" in caplog.text
    assert not (tmp_path / ".benchmark.lock").exists()  # released


def test_a_repeated_arm_or_seed_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Two copies of one run would train in the same run directory at once."""
    assert benchmark.main(["--profile", "ci", "--dry-run", "--seeds", "0", "1", "0"]) == 2
    assert "--seeds names 0 more than once" in capsys.readouterr().err
    assert benchmark.main(["--profile", "ci", "--dry-run", "--selectors", "bots", "random", "bots"]) == 2
    assert "--selectors names bots more than once" in capsys.readouterr().err


def test_arms_without_random_are_refused_before_anything_trains(tmp_path: Path, capsys) -> None:
    """The tables pair every arm with Random's run of the same seed: without it a benchmark would train every run and
    then fail in the main table, so it is refused up front, by the dry run and by the real run alike."""
    assert benchmark.main(["--profile", "claims", "--dry-run", "--selectors", "bots_warm", "bots_noref"]) == 2
    assert "--selectors bots_warm bots_noref leaves out random" in capsys.readouterr().err
    out = tmp_path / "bench"
    assert benchmark.main(["--profile", "ci", "--selectors", "bots", "--out", str(out)]) == 1
    assert "leaves out random" in capsys.readouterr().err
    assert not out.exists()  # refused before the data, the lock or a run folder was written


def test_a_failed_analysis_says_why(tmp_path: Path) -> None:
    """The analysis' own message (run, metric, step), not only "returned non-zero exit status 2"."""
    from bots_verl.runlog import TOY_EXACT_METRIC, RunWriter

    run_dir = tmp_path / "runs" / "random_s0"
    with RunWriter(run_dir / "run", domain="toy", method="random", seed=0, total_steps=2) as writer:
        for step in (1, 2):
            writer.log(step, {"bots/rollouts": 16.0, "bots/batch/effective_task_ratio": 0.5})
        for step, acc in ((0, 0.25), (2, 7.5)):
            writer.log(step, {TOY_EXACT_METRIC: acc})
    with pytest.raises(RuntimeError) as info:
        benchmark_summary.analyse(tmp_path, [run_dir / "run"])
    text = str(info.value)
    assert text.startswith("the main table (analysis.tables) failed with exit status 2: error: run toy/random/seed0")
    assert f"metric '{TOY_EXACT_METRIC}' at step 2: accuracy 7.5 is outside [0, 1]" in text


# ---- issue 59, item 3: a resume under other settings --------------------------------------------------------------
def _interrupted(root: Path, lr: float) -> Path:
    """A ci run stopped after its first checkpoint, its command recorded by the benchmark's own run start."""
    run_dir = root / "runs" / "random_s0"
    (run_dir / "ckpt" / "global_step_1").mkdir(parents=True)
    profile = dataclasses.replace(PROFILES["ci"], lr=lr)
    training_runs.STOPPING.set()  # the run records its command, then finds the benchmark stopping
    try:
        with pytest.raises(RuntimeError, match="not started"):
            training_runs.train_one(_fake_manifest(root / "data"), profile, "random", 0, root, ([], []), 10.0)
    finally:
        training_runs.STOPPING.clear()
    return run_dir


def test_an_interrupted_run_resumes_only_under_its_settings(tmp_path: Path, monkeypatch, capsys) -> None:
    """The sweep of item 3: a run with a checkpoint and no done.json resumes; with other settings it is refused before
    any run trains (the entry point's own check would come only when the run's turn came). The folder's name has a
    space: the recorded command is shell-quoted and reads back."""
    root = tmp_path / "my runs"
    _fake_prepare(root, monkeypatch)
    run_dir = _interrupted(root, lr=PROFILES["ci"].lr)
    started: list[list[str]] = []

    def popen(cmd: list[str], **kwargs: object) -> None:
        started.append(cmd)
        raise OSError("no training in this test")

    monkeypatch.setattr(subprocess, "Popen", popen)
    argv = ["--profile", "ci", "--selectors", "random", "--own-clusters", "--out", str(root)]
    assert benchmark.main([*argv, "--lr", "0.5"]) == 1
    err = capsys.readouterr().err
    assert f"{run_dir} holds a run of other settings than asked (actor_rollout_ref.actor.optim.lr: recorded " in err
    assert "asked 0.5)" in err and not started
    assert benchmark.main(argv) == 1  # its own settings: it resumes (and the stand-in training fails)
    assert len(started) == 1 and "no training in this test" in capsys.readouterr().err
