"""Benchmark: ms per step (select + update) of ``bots_plus`` next to the paper's ``bots``.

Run ``python -m bots_verl.speed.bots_plus_speed`` (options: ``--pools``, ``--batch``, ``--repeats``, ``--rounds``,
``--columns``). The two selectors are timed alternately, round by round, so that load from other processes hits both
alike; the table gives the median over rounds and the ratio ``bots_plus / bots`` (our budget: at most 2x).
"""

from __future__ import annotations

import argparse

import numpy as np

from bots_verl.core import build_selector
from bots_verl.speed.selector_speed import time_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", default="54400,1000000", help="comma-separated pool sizes")
    parser.add_argument("--batch", type=int, default=256, help="tasks per step")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per selector")
    parser.add_argument("--columns", type=int, default=2, help="reference columns (bots needs exactly 2)")
    args = parser.parse_args()
    print(f"{'pool':>9} | {'bots ms/step':>12} | {'bots_plus ms/step':>17} | {'ratio':>5}")
    for pool in (int(p) for p in args.pools.split(",")):
        rng = np.random.default_rng(0)
        ref = np.sort(rng.integers(0, 17, size=(pool, args.columns)) / 16, axis=1)
        sels = {
            "bots": build_selector("bots", pool, reference_pass_rates=ref[:, [0, -1]], seed=0),
            "bots_plus": build_selector("bots_plus", pool, reference_pass_rates=ref, seed=0),
        }
        times: dict[str, list[float]] = {k: [] for k in sels}
        for _ in range(args.rounds):
            for name, sel in sels.items():
                times[name].append(time_steps(sel, args.batch, args.repeats, rng))
        a, b = float(np.median(times["bots"])), float(np.median(times["bots_plus"]))
        print(f"{pool:>9} | {a:>12.1f} | {b:>17.1f} | {b / a:>5.2f}")


if __name__ == "__main__":
    main()
