"""One toy benchmark run as a child process: ``python -m bots_verl.main`` trains it, then its checkpoints are evaluated.

The children in flight are tracked so that a stopping benchmark terminates them (:func:`stop_children`), and a failed
run's error names the run and ends with its training log (:func:`run_failure`).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bots_verl import runlog
from bots_verl.fileio import write_json_atomic
from bots_verl.runlog import TOY_POOL_METRIC
from bots_verl.toy.arms import BenchmarkProfile, training_overrides
from bots_verl.toy.evaluate import checkpoint_steps, evaluate_checkpoints, heldout_metric
from bots_verl.toy.run_records import finished_record, median, read_done, run_dir_of, write_command
from bots_verl.verl_cpu.cluster import SharedRayCluster
from bots_verl.verl_cpu.smoke import ENV as TRAINING_ENV
from bots_verl.verl_cpu.verl_registrations import TRAIN_THREADS_ENV

__all__ = ["run_failure", "run_results", "stop_children", "train_one"]

logger = logging.getLogger(__name__)

STOPPING = threading.Event()
_CHILDREN: set[subprocess.Popen] = set()
_CHILDREN_LOCK = threading.Lock()


def stop_children() -> None:
    """Terminate the training processes in flight (SIGTERM, then SIGKILL after 30 s) and refuse new ones."""
    with _CHILDREN_LOCK:
        STOPPING.set()
        children = list(_CHILDREN)
    for proc in children:
        proc.terminate()
    for proc in children:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _threads_per_run(jobs: int) -> int:
    """Intra-op threads of each run's training worker: the usable cores shared among the runs at a time."""
    return max(1, len(os.sched_getaffinity(0)) // max(1, jobs))


def train_one(
    manifest: dict[str, Any],
    profile: BenchmarkProfile,
    selector: str,
    seed: int,
    root: Path,
    tasks: tuple[list, list],
    timeout: float,
    clusters: queue.Queue | None = None,
) -> dict[str, Any]:
    """Train, evaluate and finish one run; returns its ``done.json`` record (read back when it exists).

    With ``clusters`` (a queue of :class:`SharedRayCluster`), the run borrows one, attaches to it and returns it
    after training, instead of starting and stopping a Ray cluster of its own.
    """
    run_dir = run_dir_of(root, selector, seed)
    steps_wanted = profile.steps_of(selector)
    done_file = run_dir / "done.json"
    done = finished_record(run_dir, steps_wanted)
    if done is not None:
        logger.info("%s: finished earlier, skipped", run_dir.name)
        return done
    if done_file.is_file():
        # a longer horizon than the finished run's: it trains on from its final checkpoint (an exact resume); the
        # shorter run's record stays beside it as done_<steps>.json
        shorter = read_done(done_file)["steps"]
        logger.info("%s: finished at step %d, extending it to step %d", run_dir.name, shorter, steps_wanted)
        done_file.replace(run_dir / f"done_{shorter}.json")
    run_dir.mkdir(parents=True, exist_ok=True)
    resumed_from = max(checkpoint_steps(run_dir / "ckpt"), default=0)
    if not resumed_from and runlog.logged_metrics_files(run_dir / "run"):
        # An attempt stopped before its first checkpoint: this one starts from scratch, so those steps are obsolete,
        # and the entry point refuses a fresh run in a run log that holds steps.
        logger.info("%s: no checkpoint to resume from; removing the earlier attempt's run log", run_dir.name)
        shutil.rmtree(run_dir / "run")
    overrides = training_overrides(manifest, profile, selector, seed, run_dir)
    write_command(run_dir, overrides)
    env = {**os.environ, **{k: os.environ.get(k, v) for k, v in TRAINING_ENV.items()}}
    env.setdefault(TRAIN_THREADS_ENV, str(_threads_per_run(profile.jobs)))
    start = time.monotonic()
    logger.info(
        "%s: training %d steps%s", run_dir.name, steps_wanted, f" from step {resumed_from}" * bool(resumed_from)
    )
    with _borrowed(clusters) as cluster, (run_dir / "train.log").open("a") as log:
        if cluster is not None:
            cluster.wait_idle()
            env.update(cluster.env)
        with _CHILDREN_LOCK:
            if STOPPING.is_set():
                raise RuntimeError(f"{run_dir.name}: not started, the benchmark is stopping")
            proc = subprocess.Popen(
                [sys.executable, "-m", "bots_verl.main", *overrides], env=env, stdout=log, stderr=subprocess.STDOUT
            )
            _CHILDREN.add(proc)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            raise RuntimeError(
                f"{run_dir.name}: training timed out after {timeout:.0f} s ({run_dir / 'train.log'})"
            ) from exc
        finally:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)
    if proc.returncode != 0:
        tail = (run_dir / "train.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{run_dir.name}: training exited with {proc.returncode} ({run_dir / 'train.log'}):\n{tail}")
    train_s = time.monotonic() - start
    steps = checkpoint_steps(run_dir / "ckpt")
    if not steps or steps[-1] != steps_wanted:
        raise RuntimeError(f"{run_dir.name}: no checkpoint of step {steps_wanted} (found {steps})")
    model = manifest["artifacts"]["policy_models"][str(seed % len(manifest["artifacts"]["policy_models"]))]
    # the cores this run may use, as its training worker's threads: one evaluation at a time on each
    jobs = _threads_per_run(profile.jobs)
    accuracy = evaluate_checkpoints(run_dir / "run", run_dir / "ckpt", model, *tasks, jobs=jobs)
    metric = heldout_metric(model)
    step_times = [
        float(d[runlog.STEP_TIME_METRIC])
        for s, d in runlog.iter_metrics(run_dir / "run")
        if runlog.STEP_TIME_METRIC in d and s > 1
    ]
    record = {
        "selector": selector,
        "seed": seed,
        "steps": steps_wanted,
        "resumed_from": resumed_from,
        "process_wall_s": round(train_s, 1),
        "median_step_s": round(median(step_times), 3),
        "accuracy": {str(k): v[metric] for k, v in accuracy.items()},
        "pool_accuracy": {str(k): v[TOY_POOL_METRIC] for k, v in accuracy.items() if TOY_POOL_METRIC in v},
    }
    # the final checkpoint stays (a longer rerun resumes from it); the others were only needed for evaluation
    for step in steps[:-1]:
        shutil.rmtree(run_dir / "ckpt" / f"global_step_{step}", ignore_errors=True)
    # atomically: a torn done.json would stop every rerun of the benchmark
    write_json_atomic(done_file, record, indent=1)
    logger.info(
        "%s: done in %.0f s, median step %.2f s, held-out accuracy %.4f -> %.4f",
        run_dir.name,
        train_s,
        record["median_step_s"],
        accuracy[0][metric],
        accuracy[steps_wanted][metric],
    )
    return record


@contextmanager
def _borrowed(clusters: queue.Queue | None) -> Iterator[SharedRayCluster | None]:
    """Take a shared cluster from ``clusters`` for one run (None without a queue) and give it back afterwards."""
    if clusters is None:
        yield None
        return
    cluster = clusters.get()
    try:
        yield cluster
    finally:
        clusters.put(cluster)


def run_failure(run_dir: Path, exc: BaseException) -> BaseException:
    """``exc`` as an error that names the run and ends with the tail of its training log.

    :func:`train_one`'s message for a failed training process already does; a timeout, a missing checkpoint or an
    error of the evaluation gets the run's name and log tail added.
    """
    text = str(exc)
    if isinstance(exc, RuntimeError) and text.startswith(f"{run_dir.name}:") and "\n" in text:
        return exc
    log = run_dir / "train.log"
    tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no training log)"
    head = text if text.startswith(f"{run_dir.name}:") else f"{run_dir.name}: {type(exc).__name__}: {text}"
    return RuntimeError(f"{head}\n--- end of {log}:\n{tail}")


def run_results(futures: Sequence[Future], run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """The runs' records, in plan order; the first run to fail raises at once, through :func:`run_failure`.

    Waiting on the futures in order would report a failed run only after every run planned before it finished.
    """
    wait(futures, return_when=FIRST_EXCEPTION)
    for future, run_dir in zip(futures, run_dirs, strict=True):
        exc = future.exception() if future.done() else None
        if exc is not None:
            error = run_failure(run_dir, exc)
            if error is exc:
                raise exc
            raise error from exc
    return [f.result() for f in futures]
