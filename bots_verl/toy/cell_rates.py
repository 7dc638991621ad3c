"""Where a policy learns: each cell's pass rate on fresh tasks, for a build's starting policy and trained checkpoints.

``python -m bots_verl.toy.cell_rates --data runs/toy_table1/logic/data [--per-cell 200] [NAME=CKPT ...]``

For every cell of the build's family, up to ``--per-cell`` distinct tasks that are neither in the pool nor held out
(a cell with fewer free tasks gives what it has; under 20 it is reported, not measured), and for each model (the
build's policy as ``step0``, then each ``NAME=<run>/ckpt/global_step_<k>``) the mean canonical-answer likelihood at
temperature 1 (:func:`bots_verl.toy.likelihood.answer_stats`: exact for arithmetic, a lower bound for code and logic).
It is how the held-out cells are chosen: the held-out measures learning only where Random's policy learns within a
run (``BuildProfile.heldout_cells``; the logic recalibration in ``recipes/toy/results/families.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cell_rates", "main"]

#: a cell with fewer free tasks than this is reported, not measured
MIN_TASKS = 20


def cell_rates(data: Path, checkpoints: dict[str, Path], per_cell: int = 200, seed: int = 0) -> dict[str, Any]:
    """``{"tasks": {cell: [prompt, ...]}, "rates": {cell: {model: mean pass rate}}}`` on fresh tasks (module
    docstring); ``checkpoints`` maps a name to a run's ``ckpt/global_step_<k>``, the build's policy is ``step0``.

    Raises:
        ValueError: a checkpoint that is not one of this build's policy (:func:`bots_verl.toy.evaluate.load_actor`).
    """
    from bots_verl.toy.build_stages import split_prompts
    from bots_verl.toy.evaluate import load_actor
    from bots_verl.toy.families import family_of
    from bots_verl.toy.likelihood import answer_stats, load_model
    from bots_verl.toy.tokenizer import vocab_of

    manifest = json.loads((data / "manifest.json").read_text())
    family = family_of(manifest.get("family", "arith"))
    taken = {q for split in ("train_files", "val_files") for q in split_prompts(Path(manifest["artifacts"][split]))}
    rng = np.random.default_rng(seed)
    fresh: dict[str, list] = {}
    for cell in family.cells:
        found: dict[str, Any] = {}
        # 15 draws per task asked: a cell smaller than that (a three-object logic cell) gives what is left of it
        for _ in range(15 * per_cell):
            problem = cell.sample(rng)
            if problem.prompt not in taken:
                found.setdefault(problem.prompt, problem)
                if len(found) == per_cell:
                    break
        fresh[cell.name] = list(found.values())
    policy_dir = manifest["artifacts"]["policy_models"]["0"]
    models = {"step0": load_model(policy_dir)}
    models.update({name: load_actor(path, policy_dir) for name, path in checkpoints.items()})
    vocab = vocab_of(family.name)
    rates = {
        name: {m: float(answer_stats(model, problems, vocab=vocab)[0].mean()) for m, model in models.items()}
        for name, problems in fresh.items()
        if len(problems) >= MIN_TASKS
    }
    return {"tasks": {name: [p.prompt for p in problems] for name, problems in fresh.items()}, "rates": rates}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: prints one markdown row per cell; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.cell_rates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a toy build (prepare's --out)")
    parser.add_argument("--per-cell", type=int, default=200, help="fresh tasks per cell (default: 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fresh tasks' draw (default: 0)")
    parser.add_argument("checkpoints", nargs="*", help="NAME=<run>/ckpt/global_step_<k>: trained policies to compare")
    args = parser.parse_args(argv)
    checkpoints = {}
    for item in args.checkpoints:
        name, sep, path = item.partition("=")
        if not sep or not name or not path or name == "step0":
            print(f"cell rates: {item!r} is not NAME=CHECKPOINT (NAME other than step0)", file=sys.stderr)
            return 2
        checkpoints[name] = Path(path)
    if args.per_cell < MIN_TASKS:
        print(f"cell rates: --per-cell must be at least {MIN_TASKS}, got {args.per_cell}", file=sys.stderr)
        return 2
    try:
        result = cell_rates(Path(args.data), checkpoints, args.per_cell, args.seed)
    except (OSError, ValueError, KeyError) as err:
        print(f"cell rates failed: {err}", file=sys.stderr)
        return 1
    names = ["step0", *checkpoints]
    print("| cell | fresh tasks | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for cell, prompts in result["tasks"].items():
        rates, n = result["rates"].get(cell), len(prompts)
        shown = [f"{rates[m]:.3f}" for m in names] if rates else ["too few free tasks"] + [""] * (len(names) - 1)
        print(f"| {cell} | {n} | " + " | ".join(shown) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
