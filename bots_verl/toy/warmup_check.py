"""How a build's warm-ups come out on a seed, in minutes: the check of a seed before a whole build.

``python -m bots_verl.toy.warmup_check --family code --seed 7 --out /tmp/code_s7 [--profile full]``

Runs ``prepare``'s first two stages (the data, the warm-ups: :func:`~bots_verl.toy.build_stages.stage_data`,
:func:`~bots_verl.toy.build_stages.stage_warmups`) in ``--out``, then prints each model's exact pass rates as
``calibration.md`` reports them: held-out (the canonical answer's likelihood, a lower bound for code and logic), the
pool's mean, its share at 0, the share of mixed groups at n = 8 and the pool mean by level, with the step each warm-up
stopped at. Nothing else of a build (the reference columns take hours of sandboxed programs for code). A rerun on the
same folder reuses what it finds, checked against the profile's specs as ``prepare`` checks them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["check_warmups", "main"]

#: the models of a build, in the order of the table
MODELS = ("policy", "weak", "strong")


def check_warmups(out: Path, family: str, seed: int, profile: str = "full") -> dict[str, dict[str, Any]]:
    """The data and warm-ups of a build in ``out``, and each model's pass rates (module docstring).

    Raises:
        PrepareError: an unknown family or profile; a folder holding another build.
    """
    import pyarrow.parquet as pq
    import torch

    from bots_verl.toy.build_profiles import build_profile, seeded
    from bots_verl.toy.build_stages import StageTimer, stage_data, stage_warmups
    from bots_verl.toy.calibrate import mixed_share
    from bots_verl.toy.families import family_of
    from bots_verl.toy.likelihood import answer_stats, load_model
    from bots_verl.toy.tokenizer import vocab_of

    prof, fam = build_profile(family, profile), family_of(family)
    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {}  # stage timings, as prepare's manifest keeps them
    with StageTimer(record, "data") as stage:
        stage_data(out, prof, seed, stage)
    specs = {role: seeded(getattr(prof, role), seed, role) for role in MODELS}
    with StageTimer(record, "warmups") as stage:
        stage_warmups(out, specs, 1, stage)

    def tasks(name: str) -> list:
        return [fam.parse_prompt(m[0]["content"]) for m in pq.read_table(out / name).column("prompt").to_pylist()]

    heldout, pool = tasks("val.parquet"), tasks("pool.parquet")
    torch.set_num_threads(1)
    found = {}
    for role in MODELS:
        model = load_model(out / "models" / role)
        p_heldout = answer_stats(model, heldout, vocab=vocab_of(family))[0]
        p_pool = answer_stats(model, pool, vocab=vocab_of(family))[0]
        levels = np.array([fam.level(task.cell) for task in pool])
        result = json.loads((out / "models" / role / "warmup.json").read_text(encoding="utf-8"))
        found[role] = {
            "stopped_at": result.get("stopped_at", specs[role].steps),
            "schedule": specs[role].steps,
            "heldout": float(np.mean(p_heldout)),
            "pool_mean": float(np.mean(p_pool)),
            "pool_under_0_001": float(np.mean(p_pool < 1e-3)),
            "mixed_n8": mixed_share(p_pool, 8),
            "by_level": {int(k): float(np.mean(p_pool[levels == k])) for k in sorted(set(levels))},
        }
    return found


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: the table; 1 with one ``warmup check failed:`` line."""
    from bots_verl.toy.build_profiles import PrepareError

    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.warmup_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", required=True, help="task family (bots_verl.toy.families)")
    parser.add_argument("--seed", type=int, required=True, help="the build seed")
    parser.add_argument("--out", type=Path, required=True, help="the build folder (data and models/ are written)")
    parser.add_argument("--profile", default="full", help="the family's build profile (default: full)")
    args = parser.parse_args(argv)
    try:
        found = check_warmups(args.out, args.family, args.seed, args.profile)
    except (PrepareError, ValueError) as exc:
        print(f"warmup check failed: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.family} {args.profile} build, seed {args.seed} ({args.out}): exact pass rates (held-out: lower bound)"
    )
    print(
        "| model | stopped at (schedule) | held-out | pool mean | pool share under 0.001 | mixed groups n = 8 "
        "| pool mean by level |"
    )
    print("|---|---|---|---|---|---|---|")
    for role, f in found.items():
        levels = " / ".join(f"{v:.3f}" for v in f["by_level"].values())
        print(
            f"| {role} | {f['stopped_at']} ({f['schedule']}) | {f['heldout']:.3f} | {f['pool_mean']:.3f} | "
            f"{f['pool_under_0_001']:.3f} | {f['mixed_n8']:.3f} | {levels} |"
        )
    order = found["policy"]["heldout"] < found["weak"]["heldout"] < found["strong"]["heldout"]
    print(f"held-out order policy < weak < strong: {'yes' if order else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
