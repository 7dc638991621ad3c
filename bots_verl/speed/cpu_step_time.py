"""Step time and start-up of real BOTS training on the CPU backend (verl's trainer, the addition task).

Run as ``python -m bots_verl.speed.cpu_step_time [--prompts 8 --n 4 --response-length 16 --steps 12 --warmup 2]``.
It builds the toy model and data in a temporary directory, launches ``python -m bots_verl.main trainer.device=cpu ...``
(the command a user runs), watches the run's ``metrics.jsonl`` as lines arrive and prints:

- **start-up**: launch until the first training step starts (the arrival of step 1's line minus its
  ``timing_s/step``), i.e. Ray, TransferQueue, FSDP, the rollout server and the reward workers;
- **first step**: step 1's ``timing_s/step`` (it also starts the agent-loop worker, which verl creates lazily);
- **median step** over the steps after ``--warmup``, with the medians of verl's phases (``gen`` = rollout and
  reward, ``old_log_prob``, ``update_actor``, ``update_weights``) and the 1-minute load average before and after
  (other processes on the machine inflate every figure);
- **CPU time per step** of all the run's processes together (Ray's processes descend from the launched one): less
  sensitive to other load than wall time; a step cannot take less than this divided by the number of cores;
- **the floor**: a plain-torch GRPO step of the same model and shape on the same machine, timed right before and
  right after the run (:func:`bots_verl.verl_cpu.plain_grpo.time_plain_step`: batched sampling, old log-probs, one
  AdamW update, with the training worker's thread count), and the ratio of verl's median step to the faster of the
  two (a run's exiting Ray processes can slow the one after it: 0.62-1.01 s on one machine state).

Extra ``key=value`` arguments after ``--`` are passed to ``bots_verl.main`` (e.g. ``-- bots.selector=random``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bots_verl.runlog import STEP_TIME_METRIC, timing_key
from bots_verl.verl_cpu.cluster import SharedRayCluster
from bots_verl.verl_cpu.launch import MIN_RAY_CPUS

logger = logging.getLogger(__name__)

PHASES = ("gen", "old_log_prob", "update_actor", "update_weights", "adv")


def _load() -> float:
    return os.getloadavg()[0]


def _tree_cpu_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """User + system CPU seconds of a process and all its descendants, by pid with the process's title.

    Ray's processes descend from the driver (or from a shared cluster's head) and title themselves ``ray::Class``,
    so the titles name the run's parts: the training worker, the rollout server, the agent-loop worker, ...
    """
    import psutil

    used: dict[int, tuple[str, float]] = {}
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                title = (proc.cmdline() or [proc.name()])[0]
                used[proc.pid] = (_process_name(title), times.user + times.system)
            except psutil.Error:
                continue
    except psutil.Error:
        pass
    return used


def _process_name(title: str) -> str:
    """A process's part of the run from its title: ``ray::GroupedAgentLoopWorker`` and the like, else the program."""
    if title.startswith("ray::"):
        return title.split(".")[0].strip()
    return Path(title.split()[0]).name


def cpu_by_process(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds each part of the run used between two snapshots of :func:`_tree_cpu_seconds`, by process name.

    A process that appeared in between counts from zero; processes sharing a name (Ray's idle workers) are summed.
    """
    spent: dict[str, float] = {}
    for pid, (name, seconds) in after.items():
        start = before.get(pid, (name, 0.0))[1]
        spent[name] = spent.get(name, 0.0) + max(seconds - start, 0.0)
    return spent


def run_and_watch(
    command: list[str],
    metrics: Path,
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    cluster_pid: int | None = None,
) -> tuple[float, dict[int, float], dict[int, dict[int, tuple[str, float]]]]:
    """Run ``command``; return (launch time, arrival time and CPU seconds of each of the run's processes at each step
    line).

    With ``cluster_pid`` (the head of a shared cluster the run attached to), the CPU seconds also count that
    process tree: the run's Ray workers descend from the cluster's raylet, not from the run.
    """
    log_path = cwd / "train.log"
    arrivals: dict[int, float] = {}
    cpu: dict[int, dict[int, tuple[str, float]]] = {}
    start = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
        seen = 0
        while proc.poll() is None:
            if time.monotonic() - start > timeout:
                proc.kill()
                break
            if metrics.is_file():
                lines = metrics.read_text().splitlines()
                for line in lines[seen:]:
                    if line.strip():
                        step = int(json.loads(line)["step"])
                        arrivals.setdefault(step, time.monotonic())
                        used = _tree_cpu_seconds(proc.pid)
                        if cluster_pid is not None:
                            used.update(_tree_cpu_seconds(cluster_pid))
                        cpu.setdefault(step, used)
                seen = len(lines)
            time.sleep(0.05)
    if proc.returncode != 0:
        raise RuntimeError(f"training exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
    return start, arrivals, cpu


def main(argv: list[str] | None = None) -> None:
    """Benchmark entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step (data.train_batch_size)")
    parser.add_argument("--n", type=int, default=4, help="rollouts per prompt")
    parser.add_argument("--response-length", type=int, default=16)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the median")
    parser.add_argument("--tasks", type=int, default=100, help="pool size (at most 100)")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--floor-repeats", type=int, default=5, help="timed plain-torch steps (0: no floor)")
    parser.add_argument("--workdir", default=None, help="keep the run here (default: a temporary directory)")
    parser.add_argument(
        "--shared-cluster",
        action="store_true",
        help="start a Ray cluster first and let the run attach to it, as the toy benchmark's runs do (the "
        "cluster's own start is not counted in the start-up)",
    )
    parser.add_argument("extra", nargs="*", help="more bots_verl.main overrides (after --)")
    args = parser.parse_args(argv)
    if args.steps <= args.warmup:
        parser.error("--steps must exceed --warmup")

    from bots_verl.verl_cpu.addition_task import build_toy, toy_overrides

    with tempfile.TemporaryDirectory(prefix="bots_cpu_bench_") as tmp:
        work = Path(args.workdir or tmp).resolve()
        work.mkdir(parents=True, exist_ok=True)
        paths = build_toy(work / "toy", num_tasks=args.tasks, hidden_size=args.hidden_size, num_layers=args.layers)
        run_dir = work / "run"
        command = [
            sys.executable,
            "-m",
            "bots_verl.main",
            *toy_overrides(paths, args.prompts, args.n, args.response_length),
            f"trainer.total_training_steps={args.steps}",
            "trainer.save_freq=-1",
            f"trainer.default_local_dir={work / 'ckpt'}",
            f"bots.run_log.dir={run_dir}",
            *args.extra,
        ]
        with ExitStack() as stack:
            env, cluster_pid = None, None
            if args.shared_cluster:
                cluster = stack.enter_context(SharedRayCluster(num_cpus=MIN_RAY_CPUS, num_gpus=1))
                env, cluster_pid = {**os.environ, **cluster.env}, cluster.pid
                print(f"shared Ray cluster up in {cluster.startup_s:.1f} s (not part of the start-up below)")
            floor_before = _floor(paths["model"], args) if args.floor_repeats > 0 else None
            load_before = _load()
            start, arrivals, cpu = run_and_watch(
                command, run_dir / "metrics.jsonl", work, args.timeout, env=env, cluster_pid=cluster_pid
            )
            load_after = _load()
        records = {}
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                records[int(record["step"])] = record["data"]
        floor_after = _floor(paths["model"], args) if args.floor_repeats > 0 else None

    steps = sorted(s for s in records if s > args.warmup)
    step_s = [records[s][STEP_TIME_METRIC] for s in steps]
    first = records[1][STEP_TIME_METRIC]
    startup = arrivals[1] - start - first
    phases = {
        p: statistics.median(records[s].get(timing_key(p), 0.0) for s in steps)
        for p in PHASES
        if any(timing_key(p) in records[s] for s in steps)
    }
    model_params = args.hidden_size * args.hidden_size * 12 * args.layers  # rough, excluding embeddings
    print(
        f"CPU backend, toy Llama (hidden {args.hidden_size}, {args.layers} layers, ~{model_params / 1e6:.2f}M "
        f"non-embedding params), {args.prompts} prompts x {args.n} rollouts, {args.response_length} new tokens, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} cores"
    )
    print(f"start-up to first step: {startup:.1f} s; first step: {first:.1f} s")
    if 1 in cpu:
        spent = sorted(cpu_by_process({}, cpu[1]).items(), key=lambda item: -item[1])
        print(
            f"  CPU seconds to the end of step 1: {sum(s for _, s in spent):.1f}, by process: "
            + ", ".join(f"{name} {seconds:.1f}" for name, seconds in spent[:12])
        )
    print(
        f"median step after {args.warmup} warm-up steps ({len(step_s)} steps): {statistics.median(step_s):.3f} s "
        f"(min {min(step_s):.3f}, max {max(step_s):.3f})"
    )
    print("phase medians: " + ", ".join(f"{p} {v:.3f} s" for p, v in phases.items()))
    measured = [s for s in steps if s - 1 in cpu and s in cpu]
    if measured:
        spent = cpu_by_process(cpu[measured[0] - 1], cpu[measured[-1]])
        per_step = sum(spent.values()) / len(measured)
        print(f"CPU time of all the run's processes per step: {per_step:.2f} s (over {len(measured)} steps)")
        ranked = sorted(spent.items(), key=lambda item: -item[1])
        print("  by process: " + ", ".join(f"{name} {seconds / len(measured):.2f}" for name, seconds in ranked[:10]))
    if floor_before is not None and floor_after is not None:
        floor = min(floor_before, floor_after, key=lambda f: f.step_s)
        median = statistics.median(step_s)
        print(
            f"plain-torch GRPO step, same model and shape ({floor.threads} threads): {floor.step_s:.3f} s "
            f"(generation {floor.gen_s:.3f}, old log-probs {floor.old_log_prob_s:.3f}, update {floor.update_s:.3f}; "
            f"{floor_before.step_s:.3f} s before the run, {floor_after.step_s:.3f} s after); "
            f"verl's median step / plain: {median / floor.step_s:.1f}x"
        )
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")


@dataclasses.dataclass
class _Floor:
    threads: int
    step_s: float
    gen_s: float
    old_log_prob_s: float
    update_s: float


def _floor(model_dir: str, args: argparse.Namespace) -> _Floor:
    """The plain-torch step of the run's model and shape, with the training worker's intra-op threads."""
    import torch

    from bots_verl.verl_cpu.addition_task import prompt_length
    from bots_verl.verl_cpu.launch import env_vars
    from bots_verl.verl_cpu.plain_grpo import time_plain_step
    from bots_verl.verl_cpu.verl_registrations import training_threads

    threads = training_threads() or int(env_vars()["BOTS_TRAIN_THREADS"])
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        step = time_plain_step(
            model_dir,
            prompts=args.prompts,
            n=args.n,
            response_length=args.response_length,
            prompt_length=prompt_length(),
            repeats=args.floor_repeats,
        )
    finally:
        torch.set_num_threads(previous)
    return _Floor(threads, step.step_s, step.gen_s, step.old_log_prob_s, step.update_s)


if __name__ == "__main__":
    main()
