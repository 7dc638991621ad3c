"""Round trip of the posterior actor per training step: select + update through Ray.

Run as ``python -m bots_verl.speed.actor_roundtrip [--tasks 100000 --batch 32 --rollouts 16 --steps 50]``. Starts
a local Ray (``num_cpus=2``), creates the actor as the trainer does and times, per step, ``select`` of one batch and
``update`` with that batch's outcomes, both through the sampler (``ray.get`` on the actor), i.e. what the trainer adds
to a step. Prints the median and p90 in milliseconds, plus the actor-side compute share.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    """Benchmark entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--selector", default="bots")
    args = parser.parse_args(argv)

    import ray

    from bots_verl.core.settings import SelectorSettings
    from bots_verl.integration.transport.sampler import BOTSSampler
    from bots_verl.integration.transport.selector_client import SelectorClient
    from bots_verl.integration.transport.selector_service import create_selector_service

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rng = np.random.default_rng(0)
    weak = rng.uniform(0, 1, args.tasks)
    ref = np.column_stack([weak, np.minimum(1.0, weak + 0.2)])
    actor = create_selector_service(
        "bench_posterior",
        "bots_bench",
        settings=SelectorSettings(args.selector),
        num_tasks=args.tasks,
        reference_pass_rates=ref,
    )
    sampler = BOTSSampler(SelectorClient(actor), args.tasks, args.batch, range(args.tasks))
    it = iter(sampler)
    total, inner = [], []
    for _ in range(args.steps + 3):
        t0 = time.perf_counter()
        idx = np.sort(np.array([next(it) for _ in range(args.batch)], dtype=np.int64))
        succ = rng.binomial(args.rollouts, weak[idx]).astype(float)
        _, update_ms = sampler.forward_update(idx, succ, np.full(idx.size, float(args.rollouts)))
        total.append((time.perf_counter() - t0) * 1e3)
        inner.append(sampler.client.pop_timing()[0] + update_ms)
    total, inner = np.array(total[3:]), np.array(inner[3:])  # drop warm-up
    print(
        f"actor round trip (select + update via Ray), {args.selector}, {args.tasks} tasks, batch {args.batch} x "
        f"{args.rollouts} rollouts, {args.steps} steps: median {np.median(total):.2f} ms/step, "
        f"p90 {np.percentile(total, 90):.2f} ms/step (actor compute median {np.median(inner):.2f} ms)"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
