"""Simulator prediction for issue 36: BOTS with references on part of the pool, and without references at all.

Run ``python -m bots_verl.sim.noref_ablation --seeds 10 --out recipes/results/sim/noref_results.md``. Every row runs on
the same seeds (paired worlds) through :func:`bots_verl.sim.experiment.run_experiment`. Cells are ``mean [95% t-interval
over seeds]``; the share of paper BOTS's step saving, ``(1 - TTB_x) / (1 - TTB_bots)`` at TTB(100%), is a ratio of means
with a paired bootstrap interval over seeds (seeds resampled together for both arms). It is also measured here which
space the reference imputation averages in (probability or logit).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bots_verl.core.task_graph import TaskGraph, choose_labelled, impute_reference
from bots_verl.fileio import markdown_table
from bots_verl.sim.experiment import run_experiment
from bots_verl.sim.loop import stream
from bots_verl.sim.methods import parse_method
from bots_verl.sim.pool_embeddings import pool_embeddings
from bots_verl.sim.saving_share import format_share, share_table
from bots_verl.sim.scenario import get_scenario
from bots_verl.sim.world import build_world

logger = logging.getLogger(__name__)

# (method spec, what it is). ``ref_fraction`` / ``ref_labels`` are simulator loop keys (bots_verl/sim/methods.py).
ARMS: list[tuple[str, str]] = [
    ("random", "uniform sampling (the TTB baseline)"),
    ("mopps", "explicit evidence only (no references, no graph)"),
    ("bots", "the paper: references on every task"),
    ("bots_noref:ref_fraction=0", "no references: `neighbours` evidence over the task graph, rho = 0.3"),
    ("noref_rho0.1=bots_noref:ref_fraction=0,rho=0.1", "the same with the paper's rho = 0.1"),
    ("ref10_uniform=bots_partial_ref:ref_fraction=0.1", "references on 10% (uniform), the rest imputed over the graph"),
    ("ref10_spread=bots_partial_ref:ref_fraction=0.1,ref_labels=spread", "references on 10% (spread), imputed"),
    ("ref5_uniform=bots_partial_ref:ref_fraction=0.05", "references on 5% (uniform), imputed"),
    ("ref5_spread=bots_partial_ref:ref_fraction=0.05,ref_labels=spread", "references on 5% (spread), imputed"),
    ("ref10_colmean=bots:ref_fraction=0.1", "control: references on 10%, the rest the column mean (no graph)"),
]

# (preset, steps, batch, rollouts): the toy testbed's v2 headline shape, and the math preset's calibration shape.
SHAPES = [("toy", 90, 16, 8), ("math", 300, 32, 16)]
NOISE_SWEEP = (0.5, 1.0, 2.0)


def imputation_error(preset: str, seeds: Sequence[int], fraction: float = 0.1, eps: float = 1 / 32) -> list[list[str]]:
    """Mean absolute error and Pearson r of the imputed reference values against the withheld ones, per space."""
    rows = []
    errors: dict[str, list[tuple[float, float]]] = {"probability": [], "logit": [], "column mean": []}
    for seed in seeds:
        world = build_world(get_scenario(preset), stream(seed, 0))
        emb = pool_embeddings(world, stream(seed, 3))
        ref = world.pool.reference
        keep = choose_labelled(emb, fraction, "uniform", seed)
        hidden = np.ones(len(ref), dtype=bool)
        hidden[keep] = False
        partial = ref.copy()
        partial[hidden] = np.nan
        graph = TaskGraph.from_embeddings(emb, 16)
        clipped = np.clip(partial, eps, 1 - eps)
        logits = np.log(clipped) - np.log1p(-clipped)
        # impute_reference takes values in [0, 1]: map the logits affinely into it and back (a weighted mean, and
        # the labelled-mean fallback, commute with affine maps)
        lo, span = float(logits[~hidden].min()), float(np.ptp(logits[~hidden]))
        z = impute_reference((logits - lo) / span, graph) * span + lo
        guesses = {
            "probability": impute_reference(partial, graph),
            "logit": 1 / (1 + np.exp(-z)),
            "column mean": np.where(hidden[:, None], np.nanmean(partial, axis=0), partial),
        }
        for name, guess in guesses.items():
            mae = float(np.abs(guess[hidden] - ref[hidden]).mean())
            r = float("nan")
            if name != "column mean":
                r = float(np.mean([np.corrcoef(guess[hidden, c], ref[hidden, c])[0, 1] for c in range(ref.shape[1])]))
            errors[name].append((mae, r))
    for name, vals in errors.items():
        arr = np.array(vals)
        corr = "—" if name == "column mean" else f"{arr[:, 1].mean():.2f}"  # a constant guess has no correlation
        rows.append([f"`{preset}`", name, f"{arr[:, 0].mean():.3f}", corr])
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Run the comparison and write the results file (``--help`` for the options)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default="recipes/results/sim/noref_results.md")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    specs = [spec for spec, _ in ARMS]
    labels = [parse_method(spec).label for spec in specs]
    lines = [
        "# BOTS without the reference bill: simulator prediction (issue 36)",
        "",
        "**A prediction for the toy testbed from the simulator, not a measurement**: `bots_verl/sim` (2PL",
        "item-response world, GRPO-like learning), with task embeddings made by `bots_verl/sim/pool_embeddings.py`",
        "(random Fourier features of the latent difficulty and skills, plus a shared-style distractor and noise;",
        "scenario fields",
        "`embedding_noise` = 1.0, `embedding_style` = 0.5, `embedding_dims` = 64). Real prompt embeddings may carry",
        "less (or more) of what makes a task hard than this; the noise sweep below shows how much the result depends",
        "on it.",
        "",
        f"Generated by `python -m bots_verl.sim.noref_ablation --seeds {args.seeds}`: {args.seeds} paired seeds "
        "(0 ..), the same worlds for every arm. Cells: mean [95% t-interval over seeds]. Share of BOTS's saving = "
        "(1 - TTB_x) / (1 - TTB_bots) at TTB(100%), ratio of the means, 95% paired bootstrap interval over seeds. "
        "The neighbours plug-in's `forget` / `shrink` and `bots_noref`'s rho were chosen on other seeds (100-103).",
        "",
        *[f"- `{parse_method(spec).label}`: {desc}" for spec, desc in ARMS],
        "",
    ]
    for preset, steps, batch, rollouts in SHAPES:
        res = run_experiment(
            preset, specs, seeds=args.seeds, steps=steps, batch_size=batch, rollouts_per_task=rollouts, plots=False
        )
        lines += [
            f"## `{preset}`: {steps} steps, {batch} tasks x {rollouts} rollouts",
            "",
            share_table(res, labels, "bots", "share of BOTS's saving"),
            "",
        ]
        logger.warning("%s done (%.0f s)", preset, time.perf_counter() - t0)
    lines += [
        "## Embedding quality (`toy`, 90 steps, 16 x 8): `embedding_noise`",
        "",
        "The noise's norm against a signal of norm about 1 (0.5: power signal-to-noise 4; 2: 0.25).",
        "",
    ]
    sweep_specs = ["random", "bots", specs[3], specs[6]]
    rows = []
    for noise in NOISE_SWEEP:
        res = run_experiment(
            "toy",
            sweep_specs,
            seeds=args.seeds,
            steps=90,
            batch_size=16,
            rollouts_per_task=8,
            plots=False,
            scenario_overrides={"embedding_noise": noise},
        )
        for spec in sweep_specs[2:]:
            label = parse_method(spec).label
            share = format_share(res, label, "bots")
            rows.append([f"{noise:g}", label, res.summary[label]["ttb100"].format(2), share])
        logger.warning("noise %g done (%.0f s)", noise, time.perf_counter() - t0)
    lines += [markdown_table(["embedding_noise", "arm", "TTB(100%) vs Random", "share of BOTS's saving"], rows), ""]
    lines += [
        "## Imputation space (10% labelled uniformly, 5 seeds)",
        "",
        "Error of the imputed reference values against the withheld ones (the similarity-weighted mean of labelled "
        "neighbours, then two hops, then the labelled mean), averaged in probability space or in logit space "
        "(rates clipped to [1/32, 31/32]), and the column mean for scale:",
        "",
    ]
    imp = imputation_error("toy", range(5)) + imputation_error("math", range(5))
    lines += [markdown_table(["preset", "space", "MAE", "Pearson r"], imp), ""]
    lines.append(f"Wall-clock {time.perf_counter() - t0:.0f} s (2 shared CPU cores).")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
