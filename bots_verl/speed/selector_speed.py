"""Benchmark: time per training step and memory per task of the selectors at large pools.

``python -m bots_verl.speed.selector_speed`` prints, per pool size, milliseconds per step (select + update) of the
``bots`` selector next to the paper's rules written plainly (:class:`bots_verl.core.paper.paper_rules.PaperBOTS`:
full-pool arrays, no validation, a full sort), and the share of a typical one-minute RL step.

``python -m bots_verl.speed.selector_speed --memory --pools 1000000`` prints, per selector, the peak bytes per task
that ``tracemalloc`` measures while building, selecting and updating (the caller's reference array included), the figure
the selector states (``bytes_per_task``, used to refuse pools that cannot fit), and the median select and update times.
"""

from __future__ import annotations

import argparse
import logging
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np

from bots_verl.core import build_selector
from bots_verl.core.paper.paper_rules import PaperBOTS

logger = logging.getLogger(__name__)

__all__ = ["main", "time_steps"]


def time_steps(sel: Any, batch: int, repeats: int, rng: np.random.Generator) -> float:
    """Median milliseconds of one select + update over ``repeats`` steps (after one warm-up step)."""
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        idx = sel.select(batch)
        successes = rng.binomial(16, 0.5, size=batch).astype(np.float64)
        sel.update(idx, successes, np.full(batch, 16.0))
        if i:
            times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def _reference(pool: int, columns: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.sort(rng.integers(0, 17, size=(pool, columns)) / 16, axis=1)


def _speed(pools: list[int], batch: int, repeats: int, step_seconds: float) -> None:
    print(f"{'pool':>10} | {'bots ms/step':>12} | {'paper_rules ms/step':>19} | {'share of RL step':>16}")
    for pool in pools:
        rng = np.random.default_rng(0)
        ref = _reference(pool, 2)
        ours = time_steps(build_selector("bots", pool, reference_pass_rates=ref, seed=0), batch, repeats, rng)
        plain = time_steps(PaperBOTS(ref, seed=0), batch, repeats, rng)
        print(f"{pool:>10,} | {ours:>12.1f} | {plain:>19.1f} | {ours / 1e3 / step_seconds:>15.3%}")


def _memory(pools: list[int], batch: int, repeats: int) -> None:
    cases = [("bots", 2), ("mopps", 0), ("implicit_only", 2), ("random", 0)]
    print(f"{'pool':>11} | {'selector':<13} | K | {'peak B/task':>11} | {'stated':>6} | {'select ms':>9} | update ms")
    for pool in pools:
        for name, columns in cases:
            ref = _reference(pool, columns) if columns else None
            tracemalloc.start()
            sel = build_selector(name, pool, reference_pass_rates=ref, seed=0)
            idx = sel.select(batch)
            sel.update(idx, np.full(batch, 8.0), np.full(batch, 16.0))
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            measured = peak / pool + 8 * columns  # the reference array is the caller's, allocated before tracing
            select_ms, update_ms = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                idx = sel.select(batch)
                t1 = time.perf_counter()
                sel.update(idx, np.full(batch, 8.0), np.full(batch, 16.0))
                select_ms.append(1e3 * (t1 - t0))
                update_ms.append(1e3 * (time.perf_counter() - t1))
            print(
                f"{pool:>11,} | {name:<13} | {columns} | {measured:>11.1f} | {type(sel).bytes_per_task(columns):>6} | "
                f"{np.median(select_ms):>9.1f} | {np.median(update_ms):.1f}"
            )
            del sel, ref


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark (``--help`` for the options)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", default="54400,1000000", help="comma-separated pool sizes")
    parser.add_argument("--batch", type=int, default=256, help="tasks per step")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--step-seconds", type=float, default=60.0, help="a typical RL step, for the overhead share")
    parser.add_argument("--memory", action="store_true", help="measure bytes per task and select/update times")
    args = parser.parse_args(argv)
    pools = [int(float(p)) for p in args.pools.split(",")]
    if args.memory:
        _memory(pools, args.batch, args.repeats)
    else:
        _speed(pools, args.batch, args.repeats, args.step_seconds)


if __name__ == "__main__":
    main()
