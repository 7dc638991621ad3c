"""The toy benchmark's whole pipeline at its smallest (``--profile ci``): prepare (on the session's ci build, so every
stage is found done), real GRPO training of ``random`` and ``bots`` through ``python -m bots_verl.main`` on the CPU
backend (verl's real trainer, two runs at a time), exact evaluation of the saved checkpoints, ``analysis.tables`` /
``analysis.figures`` and the summary; then the resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bots_verl import runlog
from bots_verl.runlog import TOY_EXACT_METRIC
from bots_verl.toy.arms import PROFILES, VARIANTS, arm_settings, training_overrides
from bots_verl.toy.benchmark import run_benchmark
from bots_verl.toy.evaluate import load_actor

pytestmark = pytest.mark.slow


def test_every_run_trains_and_is_evaluated(bench) -> None:
    root, summary = bench
    prof = PROFILES["ci"]
    assert {(r["selector"], r["seed"]) for r in summary["runs"]} == {(s, 0) for s in prof.selectors}
    for record in summary["runs"]:
        run_dir = root / "runs" / f"{record['selector']}_s0"
        meta = runlog.read_meta(run_dir / "run")
        assert meta["domain"] == "toy" and meta["method"] == record["selector"]
        metrics = runlog.metrics_by_step(run_dir / "run")  # training and evaluation lines of a step merge
        # the posterior saw every rollout verl generated: prompts x n per step
        rollouts = [metrics[s]["bots/rollouts"] for s in range(1, prof.steps + 1)]
        assert rollouts == [prof.prompts * prof.n] * prof.steps
        assert 0.0 <= metrics[1]["bots/batch/effective_task_ratio"] <= 1.0
        # evaluated at step 0 (the shared start) and at every saved step
        assert sorted(int(s) for s in record["accuracy"]) == list(range(0, prof.steps + 1, prof.eval_every))
        assert all(0.0 < v < 1.0 for v in record["accuracy"].values())
        assert record["accuracy"]["0"] == pytest.approx(metrics[0][TOY_EXACT_METRIC])
        # only the last checkpoint is kept
        assert sorted(p.name for p in (run_dir / "ckpt").glob("global_step_*")) == [f"global_step_{prof.steps}"]
        # the run attached to one of the benchmark's shared Ray clusters instead of starting its own
        assert "attaching to the Ray cluster at" in (run_dir / "train.log").read_text()
    starts = {r["accuracy"]["0"] for r in summary["runs"]}
    assert len(starts) == 1, "every run starts from the same policy"
    # the updates changed the policy (an evaluation that ignored the checkpoint would not move)
    assert any(r["accuracy"][str(prof.steps)] != r["accuracy"]["0"] for r in summary["runs"])


def test_tables_figures_and_summary(bench) -> None:
    root, _ = bench
    main_table = (root / "table_main.md").read_text()
    for selector in PROFILES["ci"].selectors:
        assert selector in main_table.lower()
    assert (root / "figures" / "toy_accuracy.png").stat().st_size > 0
    summary = (root / "summary.md").read_text()
    assert "Main table" in summary and "Starting point" in summary and "step 0" in summary
    # one row per seed with each run's start, end and gain, as the README's per-seed table
    records = json.loads((root / "summary.json").read_text())["runs"]
    by_seed = summary.split("## Held-out accuracy by seed, step 0 → last step\n\n")[1].split("\n\n")[0].splitlines()
    for run in records:
        start, end = run["accuracy"]["0"], run["accuracy"][str(PROFILES["ci"].steps)]
        assert f"{start:.4f} → {end:.4f} ({end - start:+.3f})" in by_seed[2]
    # paired statistics: with the run logs present, the log-based ones (ETR, rollouts, wall-clock) have values
    assert "Paired against random" in summary and (root / "figures" / "toy_paired.png").stat().st_size > 0
    stats = json.loads((root / "paired.json").read_text())["comparisons"]["bots"]["statistics"]
    assert stats["etr_diff"]["n"] == 1 and stats["roll100"]["n"] + stats["roll100"]["n_undefined"] == 1
    assert json.loads((root / "summary.json").read_text())["paired"]["comparisons"]["bots"]["statistics"] == stats


def test_the_build_seed_selects_the_build_and_is_recorded(bench, tmp_path) -> None:
    """The summary names the build its runs trained on; a benchmark asking for another build than its data directory
    holds is refused by prepare before anything trains (builds never mix in one benchmark directory)."""
    import dataclasses
    import shutil

    from bots_verl.toy.prepare import PrepareError

    root, _ = bench
    assert json.loads((root / "summary.json").read_text())["profile"]["build_seed"] == 0
    assert "Build `ci_s0`." in (root / "summary.md").read_text()
    other = tmp_path / "other"
    shutil.copytree(root / "data", other / "data")
    with pytest.raises(PrepareError, match=r"holds profile 'ci' seed 0"):
        run_benchmark(dataclasses.replace(PROFILES["ci"], build_seed=1), other, prepare_jobs=1, timeout=60)
    assert not (other / "runs").exists()


def test_rerun_skips_finished_runs(bench) -> None:
    root, summary = bench
    logs = {p: p.stat().st_mtime_ns for p in (root / "runs").glob("*/train.log")}
    again = run_benchmark(PROFILES["ci"], root, prepare_jobs=1, timeout=900)
    assert again["runs"] == summary["runs"]
    assert {p: p.stat().st_mtime_ns for p in logs} == logs
    assert json.loads((root / "summary.json").read_text())["runs"] == summary["runs"]


def test_full_and_beyond_profiles_compose(bench) -> None:
    """Every arm of the full and beyond benchmarks composes and passes every config check (dry run: no Ray, no
    training); a variant is its selector plus its verl settings, recorded under the variant's method label."""
    root, _ = bench
    manifest = json.loads((root / "data" / "manifest.json").read_text())
    arms = dict.fromkeys(
        PROFILES["full"].selectors + PROFILES["beyond"].selectors + PROFILES["claims"].selectors + tuple(VARIANTS)
    )
    assert set(VARIANTS) <= set(arms)
    argvs = {}
    for arm in arms:
        args = training_overrides(manifest, PROFILES["beyond"], arm, 1, root / "dry" / arm)
        selector, extra = arm_settings(arm)
        assert f"bots.selector={selector}" in args and set(extra) <= set(args)
        assert ("algorithm.filter_groups.enable=true" in args) == arm.endswith("_ds")
        assert (f"bots.run_log.method={arm}" in args) == (arm in VARIANTS)
        steps = PROFILES["beyond"].steps_of(arm)
        horizon = PROFILES["headline"].steps
        assert f"trainer.total_training_steps={steps}" in args
        assert steps == (horizon // 2 if arm.endswith("_ds") else horizon)
        argvs[arm] = [*args, "bots.dry_run=true"]
    # every arm's dry run in one process (as `python -m bots_verl.main <argv>` runs it; tests/toy/dry_run_arms.py)
    (root / "dry").mkdir(exist_ok=True)
    (root / "dry" / "argvs.json").write_text(json.dumps(argvs))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("dry_run_arms.py")), str(root / "dry" / "argvs.json")],
        cwd=root / "dry",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert [line.removeprefix("OK ") for line in proc.stdout.splitlines() if line.startswith("OK ")] == list(arms)
    assert proc.stdout.count("BOTS dry run: config OK") == len(arms)


def test_seeds_change_data_order_rollouts_and_selector(bench) -> None:
    """Runs pair by seed, and a seed changes every random stream: a deterministic selector (offline_easy2hard)
    would otherwise repeat one run in every seed."""
    root, _ = bench
    manifest = json.loads((root / "data" / "manifest.json").read_text())

    def streams(seed: int) -> set[str]:
        args = training_overrides(manifest, PROFILES["full"], "offline_easy2hard", seed, root / "x")
        return {a for a in args if a.split("=")[0] in ("data.seed", "actor_rollout_ref.rollout.seed", "bots.seed")}

    assert len(streams(0)) == 3 and not streams(0) & streams(1)
    assert "actor_rollout_ref.rollout.seed=42" in streams(0)  # verl's default: seed 0 is verl's own run


def test_a_checkpoint_of_another_model_is_refused(bench, tmp_path) -> None:
    root, _ = bench
    import torch

    step_dir = tmp_path / "global_step_1"
    (step_dir / "actor").mkdir(parents=True)
    torch.save({"model.embed_tokens.weight": torch.zeros(3, 3)}, step_dir / "actor" / "model_world_size_1_rank_0.pt")
    with pytest.raises((ValueError, RuntimeError)):
        load_actor(step_dir, root / "data" / "models" / "policy")
    (step_dir / "actor" / "model_world_size_2_rank_0.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="single-rank"):
        load_actor(step_dir, root / "data" / "models" / "policy")


def test_stopping_terminates_runs_in_flight_and_starts_no_more(tmp_path) -> None:
    """Ctrl-C / SIGTERM / a failed run: the runs in flight are terminated and queued ones never start (a thread pool
    would otherwise run every queued run to the end before the benchmark exits)."""
    from bots_verl.toy import training_runs

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with training_runs._CHILDREN_LOCK:
        training_runs._CHILDREN.add(child)
    try:
        training_runs.stop_children()
        assert child.wait(timeout=10) != 0
        manifest = {
            "artifacts": {
                "train_files": "t.parquet",
                "val_files": "v.parquet",
                "policy_models": {"0": "model"},
                "reference_columns": ["w", "s"],
                "task_id_field": "task_id",
                "max_response_length": 12,
            }
        }
        # an earlier attempt logged a step but was stopped before its first checkpoint: its run log goes (a fresh
        # run may not continue it); with a checkpoint the run resumes and keeps it
        for seed, with_checkpoint in ((0, False), (1, True)):
            run_dir = tmp_path / "runs" / f"random_s{seed}"
            (run_dir / "run").mkdir(parents=True)
            (run_dir / "run" / "metrics.jsonl").write_text('{"step": 1, "data": {"x": 1.0}}\n')
            if with_checkpoint:
                (run_dir / "ckpt" / "global_step_2").mkdir(parents=True)
            with pytest.raises(RuntimeError, match="not started"):
                training_runs.train_one(manifest, PROFILES["ci"], "random", seed, tmp_path, ([], []), 10.0)
            assert not (run_dir / "train.log").read_text()
            assert (run_dir / "run" / "metrics.jsonl").is_file() is with_checkpoint
    finally:
        training_runs.STOPPING.clear()
        training_runs._CHILDREN.discard(child)
        child.kill()


def test_summarize_finished_analyses_only_finished_runs(bench, tmp_path) -> None:
    import shutil

    from bots_verl.toy.benchmark_summary import summarize_finished

    root, summary = bench
    copy = tmp_path / "bench"
    shutil.copytree(root, copy, symlinks=True)
    # the bots run is still "training": no done.json, a run log with fewer steps
    (copy / "runs" / "bots_s0" / "done.json").unlink()
    partial = summarize_finished(PROFILES["ci"], copy)
    assert (partial["finished_runs"], partial["planned_runs"]) == (1, 2)
    assert [r["selector"] for r in partial["runs"]] == ["random"]
    assert "| BOTS |" not in (copy / "table_main.md").read_text()
    assert "Partial: 1 of 2 planned runs finished" in (copy / "summary.md").read_text()
    assert "paired" not in partial  # nothing to pair random with
    # once every run is done the same call summarises them all, paired statistics included
    shutil.copy(root / "runs" / "bots_s0" / "done.json", copy / "runs" / "bots_s0" / "done.json")
    full = summarize_finished(PROFILES["ci"], copy)
    assert full["finished_runs"] == 2 and "bots" in full["paired"]["comparisons"]


def test_a_longer_horizon_extends_the_finished_runs(bench, tmp_path) -> None:
    """A profile with more steps trains the finished runs on from their final checkpoint: the evaluated steps stay,
    the new ones are evaluated, and the shorter run's record stays beside the new one; a shorter profile is refused.
    One arm is extended: random, the baseline whose budget the main table measures the other arms against (an arm
    extended past it would be refused there); bots's run would resume the same way."""
    import dataclasses
    import shutil

    root, summary = bench
    copy = tmp_path / "bench"
    shutil.copytree(root, copy, symlinks=True)
    short = PROFILES["ci"]
    longer = dataclasses.replace(short, steps=short.steps + 1, selectors=("random",))
    extended = run_benchmark(longer, copy, prepare_jobs=1, timeout=900)
    assert [r["selector"] for r in extended["runs"]] == ["random"]
    before = {r["selector"]: r for r in summary["runs"]}
    for record in extended["runs"]:
        run_dir = copy / "runs" / f"{record['selector']}_s0"
        assert (record["steps"], record["resumed_from"]) == (longer.steps, short.steps)
        old = before[record["selector"]]["accuracy"]
        assert {k: record["accuracy"][k] for k in old} == old
        assert sorted(int(s) for s in record["accuracy"]) == [*map(int, old), longer.steps]
        assert json.loads((run_dir / f"done_{short.steps}.json").read_text()) == before[record["selector"]]
        rollouts = {s: d["bots/rollouts"] for s, d in runlog.iter_metrics(run_dir / "run") if "bots/rollouts" in d}
        assert sorted(rollouts) == list(range(1, longer.steps + 1))
        assert sorted(p.name for p in (run_dir / "ckpt").glob("global_step_*")) == [f"global_step_{longer.steps}"]
    with pytest.raises(ValueError, match="cannot be shortened"):
        run_benchmark(short, copy, prepare_jobs=1, timeout=900)
