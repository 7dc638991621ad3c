"""The cost and noise of one sampled held-out evaluation of a toy code or logic build's policy (bots_verl.toy.heldout).

Usage::

    python -m bots_verl.toy.prepare --profile ci --family code --out /tmp/toy_code_ci
    python -m bots_verl.speed.toy_heldout_cost --build /tmp/toy_code_ci [--prompts 600] [--rounds 2] [--seeds 0 ...]
        [--max-tokens N]

The benchmark evaluates every ``eval_every`` = 3 steps on 600 held-out prompts. A build whose held-out set is smaller
(the ``ci`` builds have 16) is topped up to ``--prompts`` distinct prompts drawn from its held-out cells, then from
all of the family's cells where those run out (none of its pool's prompts), so the evaluation has the benchmark's
size. One torch thread, as the benchmark's evaluation; the
scoring threads are verl's 8. Printed per round (round r evaluates as checkpoint step r would, other samples): wall
seconds of the canonical likelihood, the 4 x prompts samples (one ``generate_batch``), decoding and scoring the
distinct non-canonical responses (code: in the sandbox), and the total; CPU seconds of the process and every sandbox
(a cgroup; root only). Then the estimate, its parts and its standard error, beside the SE the design's formula gives
at the measured non-canonical share q, sqrt(q (1 - q) / (prompts x k)), and plain sampling's at the estimate. With
several evaluations (``--seeds`` x ``--rounds``: other samples of one model), their spread beside the reported SEs: the
check that the SE describes the sampling noise. Figures: ``recipes/results/speed/toy_heldout_cost.md``,
``recipes/toy/results/families.md`` (the spread).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

__all__ = ["heldout_problems", "main"]


def heldout_problems(build: Path, prompts: int, seed: int) -> list:
    """The build's held-out problems, topped up to ``prompts`` from its held-out cells (avoiding its pool)."""
    import pyarrow.parquet as pq

    from bots_verl.toy.evaluate import model_family
    from bots_verl.toy.families import family_of

    settings = json.loads((build / "data.json").read_text(encoding="utf-8"))["settings"]
    fam = family_of(model_family(build / "models" / "policy"))

    def read(name: str) -> list:
        return [fam.parse_prompt(m[0]["content"]) for m in pq.read_table(build / name).column("prompt").to_pylist()]

    problems = read("val.parquet")[:prompts]
    rng = np.random.default_rng([seed, 60])
    # the held-out cells first; where they run out of distinct prompts (small logic cells), every cell of the family
    for cells in ([fam.cell_from_name(name) for name in settings["heldout_cells"]], list(fam.cells)):
        missing = prompts - len(problems)
        if missing <= 0:
            break
        counts = {cell: missing // len(cells) + (i < missing % len(cells)) for i, cell in enumerate(cells)}
        taken = [p.prompt for p in problems + read("pool.parquet")]
        problems += fam.sample_unique(counts, rng, taken)
    return problems[:prompts]


def main(argv: list[str] | None = None) -> None:
    """Print the evaluation's cost per phase and its noise."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, required=True, help="a code or logic build (toy.prepare)")
    parser.add_argument("--prompts", type=int, default=600, help="held-out prompts (the benchmark's 600)")
    parser.add_argument("--rounds", type=int, default=2, help="evaluations, as of checkpoint steps 1..rounds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the run seeds the samples are drawn for")
    parser.add_argument(
        "--max-tokens", type=int, help="response budget (default: the build's; a build in progress records none yet)"
    )
    args = parser.parse_args(argv)
    from bots_verl.speed.reward_throughput import _CpuMeter

    meter = _CpuMeter()  # before any thread or child exists, so that all of them are counted
    import torch

    from bots_verl.toy.evaluate import model_family
    from bots_verl.toy.heldout import SAMPLES, estimate_accuracy
    from bots_verl.toy.likelihood import load_model

    torch.set_num_threads(1)
    model_dir = args.build / "models" / "policy"
    family = model_family(model_dir)
    budget = args.max_tokens
    if budget is None:
        manifest = json.loads((args.build / "manifest.json").read_text(encoding="utf-8"))
        budget = manifest["artifacts"]["max_response_length"]
    problems = heldout_problems(args.build, args.prompts, args.seeds[0])
    model = load_model(model_dir)
    k = SAMPLES[family]
    print(
        f"toy held-out evaluation: {family} build {args.build}, {len(problems)} prompts x {k} samples, budget {budget}"
    )
    estimates, ses = [], []
    for seed, step in [(seed, step) for seed in args.seeds for step in range(1, args.rounds + 1)]:
        cpu0, wall0 = meter.seconds(), time.perf_counter()
        found = estimate_accuracy(model, problems, family, max_tokens=budget, run_seed=seed, step=step)
        estimates.append(found.estimate)
        ses.append(found.se)
        wall = time.perf_counter() - wall0
        cpu1 = meter.seconds()
        cpu = f"{cpu1 - cpu0:.1f} s CPU" if cpu0 is not None and cpu1 is not None else "CPU n/a (needs root)"
        parts = ", ".join(f"{name} {s:.2f} s" for name, s in found.seconds.items())
        q, n = found.noncanonical, found.prompts * found.samples
        print(
            f"  seed {seed} step {step}: {wall:.2f} s wall ({parts}), {cpu}; {found.scored} distinct non-canonical "
            f"responses scored ({found.programs} programs run in the sandbox); estimate {found.estimate:.4f} = "
            f"canonical {found.canonical:.4f} + non-canonical {q:.4f}, "
            f"SE {found.se:.4f} (formula at q: {math.sqrt(q * (1 - q) / n):.4f}; plain sampling at the estimate: "
            f"{math.sqrt(found.estimate * (1 - found.estimate) / n):.4f})"
        )
    if len(estimates) > 1 and max(ses) > 0:  # every SE 0: nothing passed off the canonical answer, nothing varies
        # over evaluations of one model, the estimates' variance is the sampling's: the reported SEs should match it
        var, se2 = float(np.var(estimates, ddof=1)), float(np.mean(np.square(ses)))
        print(
            f"  spread over {len(estimates)} evaluations: mean {np.mean(estimates):.4f}, SD {math.sqrt(var):.4f}, "
            f"mean reported SE {math.sqrt(se2):.4f}; variance ratio {var / se2:.2f} "
            f"(chi-square {(len(estimates) - 1) * var / se2:.1f} on {len(estimates) - 1} df)"
        )


if __name__ == "__main__":
    main()
