"""The toy benchmark: BOTS and the baselines trained with real GRPO in verl's trainer on CPU, then the paper's tables.

``python -m bots_verl.toy.benchmark --profile full|quick|ci|... [--family arith|code|logic] [--out DIR] [--jobs 2]``
(``make toy``, ``make toy-quick``):

1. **prepare** the artifacts (:mod:`bots_verl.toy.prepare`: data, warm-ups, reference columns, calibration);
2. **train** every (selector, seed) of the profile with ``python -m bots_verl.main trainer.device=cpu ...`` (the
   command a user runs; GRPO, ``n`` rollouts per task, no KL), saving the actor every ``eval_every`` steps;
3. **evaluate** each checkpoint's held-out accuracy exactly (:mod:`bots_verl.toy.evaluate`) into the run log;
4. **analyse** with ``python -m analysis.tables`` and ``python -m analysis.figures`` and write ``summary.md``.

Every stage resumes: a run with a ``done.json`` is skipped, an interrupted run resumes from its last checkpoint
(verl's ``resume_mode=auto``), evaluated steps are not evaluated again; a run finished at fewer steps than the profile
asks trains on from its final checkpoint; each only under the settings the run recorded (else nothing trains). Runs
pair by seed: the seed fixes verl's data order and rollout sampling and the selector's generator; every run starts
from the same warmed-up policy (the paper's setting: one pretrained checkpoint per model size).

The arms and profiles are in :mod:`bots_verl.toy.arms`, one run's training in :mod:`bots_verl.toy.training_runs`,
the records in :mod:`bots_verl.toy.run_records`, the directory's lock in :mod:`bots_verl.toy.benchmark_lock` and the
summary in :mod:`bots_verl.toy.benchmark_summary`.
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bots_verl.fileio import write_json_atomic
from bots_verl.toy.arms import PROFILES, BenchmarkProfile, check_profile, cluster_gpus, default_out, profile_of
from bots_verl.toy.benchmark_lock import directory_lock
from bots_verl.toy.benchmark_summary import add_paired, analyse, summarize_finished, summary_markdown
from bots_verl.toy.families import FAMILIES, family_of
from bots_verl.toy.run_records import (
    check_recorded_settings,
    finished_record,
    median,
    planned_runs,
    read_build,
    run_dir_of,
)
from bots_verl.toy.training_runs import STOPPING, run_results, stop_children, train_one
from bots_verl.verl_cpu.cluster import SharedRayCluster
from bots_verl.verl_cpu.launch import MIN_RAY_CPUS

__all__ = ["main", "run_benchmark"]

logger = logging.getLogger(__name__)


def run_benchmark(
    profile: BenchmarkProfile,
    root: Path,
    prepare_jobs: int = 2,
    timeout: float = 3600.0,
    shared_clusters: bool = True,
) -> dict[str, Any]:
    """Prepare, train, evaluate and analyse; returns the summary (also written to ``<root>/summary.json``).

    Args:
        profile: the benchmark's sizes.
        root: the benchmark directory; held for this process while it runs (:func:`directory_lock`).
        prepare_jobs: processes for preparing the artifacts.
        timeout: seconds per training process.
        shared_clusters: start one Ray cluster per concurrent run and let the runs attach to it, so each run skips
            Ray's start and stop (:mod:`bots_verl.verl_cpu.cluster`); False: every run starts its own.

    Raises:
        RuntimeError: another benchmark holds ``root``, or a run failed.
        ValueError: a profile with repeated arms or seeds, a finished run's unreadable ``done.json``, or a finished or
            interrupted run of other settings in ``root`` (:func:`~bots_verl.toy.run_records.check_recorded_settings`).
    """
    check_profile(profile)
    with directory_lock(root):
        return _run_benchmark(profile, root, prepare_jobs, timeout, shared_clusters)


def _run_benchmark(
    profile: BenchmarkProfile, root: Path, prepare_jobs: int, timeout: float, shared_clusters: bool
) -> dict[str, Any]:
    from bots_verl.toy.prepare import prepare

    start = time.monotonic()
    data_dir = root / "data"
    manifest = prepare(
        data_dir, seed=profile.build_seed, profile=profile.data_profile, jobs=prepare_jobs, family=profile.family
    )
    parse_prompt = family_of(profile.family).parse_prompt
    prepare_s = time.monotonic() - start
    import pyarrow.parquet as pq

    def problems(path: str) -> list:
        prompts = pq.read_table(path, columns=["prompt"]).column("prompt").to_pylist()
        return [parse_prompt(messages[0]["content"]) for messages in prompts]

    tasks = (problems(manifest["artifacts"]["val_files"]), problems(manifest["artifacts"]["train_files"]))
    plan = planned_runs(profile)
    # before anything trains: a finished run is reused, and an interrupted one resumed, only under its own settings
    check_recorded_settings(manifest, profile, root, plan)
    train_start = time.monotonic()
    STOPPING.clear()
    pending = [(s, seed) for s, seed in plan if finished_record(run_dir_of(root, s, seed), profile.steps_of(s)) is None]
    jobs = max(1, profile.jobs)
    with ExitStack() as stack:
        clusters: queue.Queue | None = None
        if shared_clusters and pending:
            # one cluster per run in flight: a cluster serves one run at a time (TransferQueue's fixed actor names)
            clusters = queue.Queue()
            for _ in range(min(jobs, len(pending))):
                clusters.put(stack.enter_context(SharedRayCluster(num_cpus=MIN_RAY_CPUS, num_gpus=cluster_gpus(plan))))
        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            futures = [
                pool.submit(train_one, manifest, profile, s, seed, root, tasks, timeout, clusters) for s, seed in plan
            ]
            records = run_results(futures, [run_dir_of(root, s, seed) for s, seed in plan])
        except BaseException:
            # Ctrl-C, SIGTERM or a failed run: start nothing more and stop the runs in flight (a rerun resumes them
            # from their last checkpoint), instead of letting the pool run every queued run to the end.
            stop_children()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    train_s = time.monotonic() - train_start
    # the profile's runs only: a folder can also hold another profile's runs, of other lengths or arms
    tables = analyse(root, [run_dir_of(root, s, seed) for s, seed in plan], profile.family)
    summary = {
        "profile": asdict(profile),
        "prepare_s": round(prepare_s, 1),
        "train_s": round(train_s, 1),
        "total_s": round(time.monotonic() - start, 1),
        "median_step_s": median([r["median_step_s"] for r in records]),
        "runs": records,
    }
    write_json_atomic(root / "summary.json", summary, indent=1)
    add_paired(root, summary, tables)
    (root / "summary.md").write_text(summary_markdown(summary, tables, manifest, data_dir))
    return summary


def _dry_run(profile: BenchmarkProfile, root: Path) -> int:
    """``--dry-run`` (``DRY_RUN=1 bash recipes/toy/run_benchmark.sh``): check the profile, print the plan (which runs
    are finished and reused, which would train); 0 if valid.

    With a build in ``<root>/data`` the build and the runs the folder holds are checked against the profile, as a real
    run checks them before anything trains. Each run's verl config is composed only by the real run (and the tests).
    """
    try:
        check_profile(profile)
        plan = planned_runs(profile)
        manifest = read_build(profile, root) if (root / "data" / "manifest.json").is_file() else None
        if manifest is not None:
            check_recorded_settings(manifest, profile, root, plan)
        finished = [(a, s) for a, s in plan if finished_record(run_dir_of(root, a, s), profile.steps_of(a)) is not None]
    except (RuntimeError, ValueError) as exc:
        print(f"toy benchmark dry run: {exc}", file=sys.stderr)
        return 2
    todo = [run for run in plan if run not in finished]
    print(f"toy benchmark dry run: {json.dumps(asdict(profile))}")
    print(f"{len(plan)} runs into {root / 'runs'}: {' '.join(f'{a}_s{s}' for a, s in plan)}")
    print(f"finished, reused ({len(finished)}): {' '.join(f'{a}_s{s}' for a, s in finished) or '-'}")
    print(f"to train ({len(todo)}): {' '.join(f'{a}_s{s}' for a, s in todo) or '-'}")
    checked = "build and runs checked" if manifest is not None else "no build yet: prepare makes it first"
    print(f"toy benchmark dry run: config OK (data: {root / 'data'}, {checked}; nothing created)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="headline")
    parser.add_argument(
        "--family",
        choices=sorted(FAMILIES),
        default="arith",
        help="task family (bots_verl.toy.families): what prepare builds; its runs record it (default: arith)",
    )
    parser.add_argument(
        "--out",
        help="benchmark directory (default: runs/toy, runs/toy/quick, runs/toy/ci, runs/toy_table1/<family>; another "
        "family than arith: <that>/<family>)",
    )
    parser.add_argument("--jobs", type=int, help="training runs at a time (default: the profile's)")
    parser.add_argument("--steps", type=int, help="GRPO steps per run (default: the profile's)")
    parser.add_argument("--seeds", type=int, nargs="+", help="training seeds (default: the profile's)")
    parser.add_argument(
        "--selectors", nargs="+", help="arms: selectors or VARIANTS such as dapo_ds (default: the profile's)"
    )
    parser.add_argument("--prompts", type=int, help="tasks per step (default: the profile's)")
    parser.add_argument("--n", type=int, help="rollouts per task (default: the profile's)")
    parser.add_argument("--lr", type=float, help="learning rate (default: the profile's)")
    parser.add_argument("--warmup-steps", type=int, help="learning-rate warm-up steps (default: the profile's)")
    parser.add_argument("--loss-agg-mode", help="verl's actor.loss_agg_mode (default: the profile's)")
    parser.add_argument("--eval-every", type=int, help="steps between evaluated checkpoints (default: the profile's)")
    parser.add_argument(
        "--build-seed", type=int, help="the testbed build (prepare's seed; shipped: 0 and 2; default: the profile's)"
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per training process")
    parser.add_argument(
        "--own-clusters",
        action="store_true",
        help="every run starts and stops its own Ray cluster (default: one shared cluster per concurrent run)",
    )
    parser.add_argument("--dry-run", action="store_true", help="check the settings, print the plan, create nothing")
    parser.add_argument(
        "--summarize-finished",
        action="store_true",
        help="train nothing: summarise the runs that have finished (a benchmark still under way or stopped)",
    )
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so run_benchmark stops the training processes in flight
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    profile = profile_of(args.profile, args.family)
    changes = {
        k: v
        for k, v in {
            "jobs": args.jobs,
            "steps": args.steps,
            "seeds": tuple(args.seeds) if args.seeds else None,
            "selectors": tuple(args.selectors) if args.selectors else None,
            "lr": args.lr,
            "warmup_steps": args.warmup_steps,
            "loss_agg_mode": args.loss_agg_mode,
            "prompts": args.prompts,
            "n": args.n,
            "eval_every": args.eval_every,
            "build_seed": args.build_seed,
        }.items()
        if v is not None
    }
    if changes:
        profile = BenchmarkProfile(**{**asdict(profile), **changes})
    root = Path(args.out or default_out(profile)).resolve()
    if args.dry_run:
        return _dry_run(profile, root)
    try:
        if args.summarize_finished:
            summary = summarize_finished(profile, root)
        else:
            summary = run_benchmark(profile, root, timeout=args.timeout, shared_clusters=not args.own_clusters)
    except (RuntimeError, ValueError, subprocess.CalledProcessError) as exc:
        # on stderr whatever the logging setup: a failed run's message names it and ends with its log's tail; a
        # failed analysis ends with the analysis' own message; a refused --out names the benchmark holding it
        print(f"toy benchmark failed: {exc}", file=sys.stderr)
        return 1
    if args.summarize_finished:
        print((root / "summary.md").read_text())
        print(f"toy benchmark: {summary['finished_runs']} of {summary['planned_runs']} runs finished")
        return 0
    print((root / "summary.md").read_text())
    print(f"toy benchmark ok: {len(summary['runs'])} runs, {summary['total_s']:.0f} s, summary: {root / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
