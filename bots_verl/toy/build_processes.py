"""The toy build's worker processes: warm-ups in spawned processes and ``reference_eval`` command lines, ``jobs`` at a
time (:mod:`bots_verl.toy.build_stages`).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from bots_verl.toy.build_profiles import PrepareError
from bots_verl.toy.model import ModelSpec
from bots_verl.toy.warmup import WarmupSpec

__all__ = ["param_proxy", "reference_eval", "run_processes", "warmup_job"]

logger = logging.getLogger(__name__)


def warmup_job(spec: WarmupSpec, out_dir: str, exclude: list[str], probe: list[str]) -> None:
    """Run one warm-up in a worker process (module level so that it pickles); the result lands in its directory."""
    from bots_verl.toy.warmup import train_warmup

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    train_warmup(spec, out_dir, exclude=exclude, log_every=100, probe=probe)


def run_processes(names: list[str], jobs: int, args_of: Callable[[str], tuple]) -> Iterator[str]:
    """Run :func:`warmup_job` for each name in its own spawned process, ``jobs`` at a time; yield names as they finish.

    A worker that fails stops the stage; on any exit (an error, Ctrl-C, SIGTERM turned into SystemExit by
    :func:`main`) the workers still running are terminated, so an interrupted build leaves no orphans behind.

    Raises:
        PrepareError: when a worker exits with a non-zero code.
    """
    ctx = multiprocessing.get_context("spawn")
    waiting, running = list(names), {}
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                name = waiting.pop(0)
                running[name] = ctx.Process(target=warmup_job, args=args_of(name), name=f"warmup-{name}")
                running[name].start()
            multiprocessing.connection.wait([p.sentinel for p in running.values()])
            for name, proc in list(running.items()):
                if proc.exitcode is None:
                    continue
                proc.join()
                del running[name]
                if proc.exitcode != 0:
                    raise PrepareError(f"warm-up {name} failed with exit code {proc.exitcode} (traceback above)")
                yield name
    finally:
        for proc in running.values():
            proc.terminate()
        for proc in running.values():
            proc.join()


def param_proxy(spec: ModelSpec) -> int:
    """A model's weight count up to embeddings, to start the longest warm-ups first."""
    return spec.layers * (4 * spec.hidden**2 + 3 * spec.hidden * spec.intermediate)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    return env


def reference_eval(commands: Mapping[str, list[str]], cwd: Path, jobs: int) -> None:
    """Run ``python -m reference_eval <args>`` command lines in ``cwd``: concurrently in subprocesses (one thread each,
    logging to ``cwd/refs/<name>.log``) when ``jobs`` > 1, else one after another in this process (no interpreter
    start-up). The arguments use paths relative to ``cwd`` (the artifact directory): ``collect`` records the model path
    in its results' settings, and a relative one keeps the directory resumable after it is moved or copied.

    Raises:
        PrepareError: naming the commands that failed (with their log tails).
    """
    from reference_eval.cli import main as reference_eval_main

    logs = cwd / "refs"
    logs.mkdir(parents=True, exist_ok=True)
    failed = []
    if jobs == 1 or len(commands) == 1:
        import torch

        threads = torch.get_num_threads()
        # One thread, as in the subprocess path: float summation order, hence the samples, do not depend on --jobs.
        torch.set_num_threads(1)
        here = os.getcwd()
        os.chdir(cwd)
        try:
            for name, args in commands.items():
                logger.info("running in %s: python -m reference_eval %s", cwd, " ".join(args))
                if reference_eval_main(args) != 0:
                    failed.append(name)
        finally:
            os.chdir(here)
            torch.set_num_threads(threads)
    else:
        procs = {}
        try:
            for name, args in commands.items():
                cmd = [sys.executable, "-m", "reference_eval", *args]
                logger.info("running in %s: %s (log: %s)", cwd, " ".join(cmd), logs / f"{name}.log")
                log = open(logs / f"{name}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed below
                child = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=_child_env())
                procs[name] = (child, log)
            for name, (proc, _) in procs.items():
                if proc.wait() != 0:
                    failed.append(name)
        finally:
            for proc, log in procs.values():
                if proc.poll() is None:  # interrupted: collect resumes from its last durable batch on a rerun
                    proc.terminate()
                    proc.wait()
                log.close()
    if failed:
        logged = [n for n in failed if (logs / f"{n}.log").exists()]
        tails = {n: (logs / f"{n}.log").read_text(encoding="utf-8")[-2000:] for n in logged}
        raise PrepareError(f"reference_eval {failed} failed; see {logs}; log tails: {json.dumps(tails, indent=1)}")
