"""Benchmark: milliseconds per training step (select + update) of the BOTS selector at large pools.

Run ``python -m bots_verl.core.bench`` (options: ``--pools``, ``--batch``, ``--repeats``). It prints, per pool size, our
selector's time next to a straightforward numpy implementation of the same rules (the paper's pseudo-code written
array by array, as the upstream port does: full-pool explicit-count arrays, a full-pool prediction overwritten on the
batch, then Thompson draws and ``argpartition``), and the share of a typical one-minute RL step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bots_verl.core import build_selector


class StraightforwardBOTS:
    """The same rules, written the obvious way; the yardstick for :mod:`bots_verl.core`."""

    def __init__(self, ref: np.ndarray, seed: int, lam=0.1, rho=0.1, target=0.5, gamma=0.9, m=16.0):
        self.w, self.s = ref[:, 0], ref[:, 1]
        self.alpha = np.ones(len(ref))
        self.beta = np.ones(len(ref))
        self.mu = None
        self.rng = np.random.default_rng(seed)
        self.lam, self.rho, self.target, self.gamma, self.m = lam, rho, target, gamma, m

    def select(self, batch: int) -> np.ndarray:
        score = -np.abs(self.rng.beta(self.alpha, self.beta) - self.target)
        return np.argpartition(-score, batch)[:batch]

    def update(self, idx: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        rates = successes / attempts
        raw = (rates.mean() - self.w[idx].mean()) / (self.s[idx].mean() - self.w[idx].mean())
        self.mu = raw if self.mu is None else self.gamma * self.mu + (1 - self.gamma) * raw
        p_tilde = np.clip(self.w + self.mu * (self.s - self.w), 0, 1)
        p_tilde[idx] = rates
        s_bar = np.zeros_like(self.alpha)
        f_bar = np.zeros_like(self.alpha)
        s_bar[idx] = successes
        f_bar[idx] = attempts - successes
        lam, rho, m = self.lam, self.rho, self.m
        self.alpha = (1 - lam) * self.alpha + lam + (1 - rho) * s_bar + rho * m * p_tilde
        self.beta = (1 - lam) * self.beta + lam + (1 - rho) * f_bar + rho * m * (1 - p_tilde)


def time_steps(sel, batch: int, repeats: int, rng: np.random.Generator) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", default="54400,1000000", help="comma-separated pool sizes")
    parser.add_argument("--batch", type=int, default=256, help="tasks per step")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--step-seconds", type=float, default=60.0, help="a typical RL step, for the overhead share")
    args = parser.parse_args()
    print(f"{'pool':>9} | {'bots_verl ms/step':>17} | {'straightforward ms/step':>23} | {'share of RL step':>16}")
    for pool in (int(p) for p in args.pools.split(",")):
        rng = np.random.default_rng(0)
        ref = np.sort(rng.integers(0, 17, size=(pool, 2)) / 16, axis=1)
        ours = time_steps(build_selector("bots", pool, reference_pass_rates=ref, seed=0), args.batch, args.repeats, rng)
        base = time_steps(StraightforwardBOTS(ref, seed=0), args.batch, args.repeats, rng)
        share = ours / 1e3 / args.step_seconds
        print(f"{pool:>9} | {ours:>17.1f} | {base:>23.1f} | {share:>15.3%}")


if __name__ == "__main__":
    main()
