"""The toy code family's reward cost per training step: 128 sandboxed programs like its rollouts, scored as verl does.

Usage::

    python -m bots_verl.speed.toy_code_reward [--rollouts 128] [--threads 8] [--rounds 3] [--seed 0]

One step of the toy benchmark generates 16 tasks x 8 rollouts = 128 responses. They are drawn from every cell of the
code family (:mod:`bots_verl.toy.code_tasks`) in the mix a learning policy writes: half the canonical program (passes
all 8 tests), a quarter another task's program (runs, fails a test), a quarter the warm-up's format slip (no code
block: never reaches the sandbox). Each batch is scored through ``bots_verl.rewards.compute_score`` (bubblewrap
sandbox, as in verl's reward workers) from ``--threads`` threads; one warm-up batch (the sandbox probe) is not timed.
Printed per batch: wall-clock seconds (median over ``--rounds``) and CPU seconds of the process and every sandbox it
started (a cgroup; root only), whose half is the wall time two idle cores need at best. Figures:
``recipes/results/speed/toy_code_reward.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["main", "responses"]


def responses(n: int, seed: int) -> list[tuple[str, str, bool]]:
    """``n`` (response, ground truth, expected success) triples in the mix described above."""
    from bots_verl.toy.code_tasks import ALL_CELLS
    from bots_verl.toy.families import FAMILIES

    rng = np.random.default_rng(seed)
    slip = FAMILIES["code"].slip
    out = []
    for i in range(n):
        problem = ALL_CELLS[i % len(ALL_CELLS)].sample(rng)
        kind = i % 4
        if kind in (0, 1):
            out.append((problem.answer, problem.ground_truth, True))
        elif kind == 2:
            other = ALL_CELLS[(i + 1) % len(ALL_CELLS)].sample(rng)
            out.append((other.answer, problem.ground_truth, other.ground_truth == problem.ground_truth))
        else:
            out.append((slip(problem.answer), problem.ground_truth, False))
    return out


def main(argv: list[str] | None = None) -> None:
    """Print the reward's wall-clock and CPU seconds per batch."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=128, help="responses per step (16 tasks x 8)")
    parser.add_argument("--threads", type=int, default=8, help="scoring threads (verl's reward.num_workers is 8)")
    parser.add_argument("--rounds", type=int, default=3, help="timed batches (the median is printed)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from bots_verl.speed.reward_throughput import _CpuMeter

    meter = _CpuMeter()  # before any thread or child exists, so that all of them are counted
    from bots_verl.rewards import compute_score

    def score(case: tuple[str, str, bool]) -> None:
        result = compute_score("codegen__toy", case[0], case[1])
        if result["acc"] != case[2]:
            raise SystemExit(f"bench: {case[0]!r} scored {result}, expected acc={case[2]}")

    walls, cpus = [], []
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(score, responses(args.threads, args.seed + 1000)))  # warm-up: the sandbox probe
        for r in range(args.rounds):
            batch = responses(args.rollouts, args.seed + r)
            cpu0, wall0 = meter.seconds(), time.perf_counter()
            list(pool.map(score, batch))
            walls.append(time.perf_counter() - wall0)
            cpu1 = meter.seconds()
            if cpu0 is not None and cpu1 is not None:
                cpus.append(cpu1 - cpu0)
    cpu = f"{statistics.median(cpus):.2f} s CPU" if cpus else "CPU n/a (needs root for the cgroup)"
    print(
        f"toy code reward: {args.rollouts} responses ({args.rollouts // 4 * 3} sandboxed programs), {args.threads} "
        f"threads: {statistics.median(walls):.2f} s wall (rounds {', '.join(f'{w:.2f}' for w in walls)}), {cpu} "
        "per batch"
    )


if __name__ == "__main__":
    main()
