"""Fit the ``toy`` scenario's starting world to the toy testbed's calibration (``runs/toy/data/calibration.parquet``).

The toy testbed (:mod:`bots_verl.toy`, issue 16) trains a 1.05M-parameter Llama with real GRPO on integer
arithmetic. Its calibration measures the starting policy's exact pass rate on every pool task and the two reference
columns. This module turns those into target statistics (:func:`targets_from_calibration`) and fits the simulator's
world parameters to them (:func:`fit_toy`): a deterministic coordinate search on common random numbers, minimising
the squared misfit in units of each statistic's tolerance (:data:`TOLERANCES`). Only the starting world is fitted;
the learning dynamics (learning rate, capacity, ...) are not, since the calibration says nothing about them.

``python -m bots_verl.toy.sim_fit --calibration runs/toy/data/calibration.parquet`` prints the targets, the fitted
fields and the misfit; the ``toy`` preset in :mod:`bots_verl.sim.scenario` holds its output (rounded), and
``tests/toy/test_sim_fit.py`` checks the preset still reproduces :data:`TOY_TARGETS`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.sim.loop import stream
from bots_verl.sim.scenario import ScenarioConfig
from bots_verl.sim.world import World, build_world, sigmoid

logger = logging.getLogger(__name__)

__all__ = [
    "FIT_FIELDS",
    "TOLERANCES",
    "TOY_TARGETS",
    "fit_toy",
    "targets_from_calibration",
    "world_stats",
]

#: The toy testbed's starting statistics, measured by ``make toy`` (``bots_verl.toy.calibrate``, data seed 0) and
#: recorded in ``runs/toy/data/calibration.json``; :func:`targets_from_calibration` recomputes them from the parquet.
#: Shares "at 0" / "at 1" are ``p < 0.01`` / ``p > 0.99`` (the calibration's definition); ``mixed_n8`` the expected
#: share of 8-rollout groups with 0 < successes < 8; ``eval_*`` are the 600 held-out prompts (8 moderate cells).
TOY_TARGETS: dict[str, float] = {
    "pool_mean": 0.155,
    "share_at_0": 0.462,
    "share_at_1": 0.016,
    "mixed_n8": 0.267,
    "weak_mean": 0.154,
    "strong_mean": 0.375,
    "weak_corr": 0.801,
    "strong_corr": 0.640,
    "eval_acc0": 0.215,
    "eval_weak_mean": 0.311,
    "eval_strong_mean": 0.808,
}

#: How close the simulated world must come to each target (the fit's unit of misfit; the test's tolerance).
TOLERANCES: dict[str, float] = {
    "pool_mean": 0.02,
    "share_at_0": 0.05,  # a normal logit spread cannot match the measured skew exactly: the fit lands ~0.04 high
    "share_at_1": 0.02,
    "mixed_n8": 0.04,
    "weak_mean": 0.03,
    "strong_mean": 0.04,
    "weak_corr": 0.06,
    "strong_corr": 0.08,
    "eval_acc0": 0.03,
    "eval_weak_mean": 0.06,
    "eval_strong_mean": 0.06,
}

#: Fields the fit moves (the reference offsets as two scalars), with their search bounds.
FIT_FIELDS: dict[str, tuple[float, float]] = {
    "difficulty_mean": (-2.0, 6.0),
    "difficulty_sd": (0.3, 6.0),
    "policy_task_noise": (0.1, 5.0),
    "ref_weak_offset": (-3.0, 3.0),
    "ref_strong_offset": (-1.0, 8.0),
    "ref_task_noise": (0.1, 5.0),
    "eval_difficulty_shift": (-4.0, 2.0),
    "eval_difficulty_scale": (0.1, 1.5),
}


def world_stats(world: World, rollouts: int = 8) -> dict[str, float]:
    """The starting statistics of a simulated world, named as in :data:`TOY_TARGETS`.

    Args:
        world: the world (its policy at ``theta0``; the references are its sampled columns, weak first, strong last).
        rollouts: group size of the mixed-group share.
    """
    p = sigmoid(world.pool.logits(world.theta0))
    ref = world.pool.reference
    return {
        "pool_mean": float(p.mean()),
        "share_at_0": float(np.mean(p < 0.01)),
        "share_at_1": float(np.mean(p > 0.99)),
        "mixed_n8": float(np.mean(1.0 - p**rollouts - (1.0 - p) ** rollouts)),
        "weak_mean": float(ref[:, 0].mean()),
        "strong_mean": float(ref[:, -1].mean()),
        "weak_corr": float(np.corrcoef(ref[:, 0], p)[0, 1]),
        "strong_corr": float(np.corrcoef(ref[:, -1], p)[0, 1]),
        "eval_acc0": float(sigmoid(world.eval.logits(world.theta0)).mean()),
        "eval_weak_mean": float(world.eval.reference[:, 0].mean()),
        "eval_strong_mean": float(world.eval.reference[:, -1].mean()),
    }


def targets_from_calibration(calibration: str | Path, rollouts: int = 8) -> dict[str, float]:
    """Target statistics from the testbed's calibration files.

    Args:
        calibration: ``calibration.parquet`` (columns ``policy_exact_pass_rate``, ``toy_weak_pass_rate``,
            ``toy_strong_pass_rate``); the held-out figures come from the ``calibration.json`` beside it (its
            ``heldout.<model>.accuracy``) when that file exists, else they are left out.
        rollouts: group size of the mixed-group share.

    Raises:
        ValueError: when a column is missing.
    """
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    path = Path(calibration)
    table = pq.read_table(path)
    need = ("policy_exact_pass_rate", "toy_weak_pass_rate", "toy_strong_pass_rate")
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    p, weak, strong = (np.asarray(table.column(c).to_pylist(), dtype=np.float64) for c in need)
    out = {
        "pool_mean": float(p.mean()),
        "share_at_0": float(np.mean(p < 0.01)),
        "share_at_1": float(np.mean(p > 0.99)),
        "mixed_n8": float(np.mean(1.0 - p**rollouts - (1.0 - p) ** rollouts)),
        "weak_mean": float(weak.mean()),
        "strong_mean": float(strong.mean()),
        "weak_corr": float(np.corrcoef(weak, p)[0, 1]),
        "strong_corr": float(np.corrcoef(strong, p)[0, 1]),
    }
    summary = path.with_suffix(".json")
    if summary.is_file():
        heldout = json.loads(summary.read_text()).get("heldout", {})
        for key, model in (("eval_acc0", "policy"), ("eval_weak_mean", "weak"), ("eval_strong_mean", "strong")):
            if model in heldout:
                out[key] = float(heldout[model]["accuracy"])
    return out


def _config(base: ScenarioConfig, x: Mapping[str, float]) -> ScenarioConfig:
    fields = {k: v for k, v in x.items() if not k.startswith("ref_")}
    return base.replace(ref_offsets=(x["ref_weak_offset"], x["ref_strong_offset"]), **fields)


def misfit(cfg: ScenarioConfig, targets: Mapping[str, float], seeds: Sequence[int] = (0, 1)) -> float:
    """Sum over targets of ``((seed-mean statistic - target) / tolerance)^2`` for the worlds of ``seeds``."""
    stats = [world_stats(build_world(cfg, stream(s, 0))) for s in seeds]
    return float(
        sum(((np.mean([st[k] for st in stats]) - v) / TOLERANCES[k]) ** 2 for k, v in targets.items() if k in stats[0])
    )


def fit_toy(
    base: ScenarioConfig,
    targets: Mapping[str, float] = TOY_TARGETS,
    *,
    seeds: Sequence[int] = (0, 1),
    rounds: int = 6,
) -> tuple[dict[str, float], float]:
    """Coordinate search over :data:`FIT_FIELDS`, starting from ``base``.

    Each round tries ``x +- step`` on every field in turn (common random numbers: the same world seeds every
    time, so the misfit is a deterministic function of the fields) and halves the steps after the round.

    Args:
        base: the scenario whose other fields stay fixed (skills, discrimination, learning dynamics, filters).
        targets: the statistics to reproduce.
        seeds: world seeds averaged per evaluation.
        rounds: step-halving rounds.

    Returns:
        The fitted fields (as in :data:`FIT_FIELDS`) and their misfit.
    """
    x = {
        "difficulty_mean": base.difficulty_mean,
        "difficulty_sd": base.difficulty_sd,
        "policy_task_noise": base.policy_task_noise,
        "ref_weak_offset": base.ref_offsets[0],
        "ref_strong_offset": base.ref_offsets[-1],
        "ref_task_noise": base.ref_task_noise,
        "eval_difficulty_shift": base.eval_difficulty_shift,
        "eval_difficulty_scale": base.eval_difficulty_scale,
    }
    step = {k: (hi - lo) / 8 for k, (lo, hi) in FIT_FIELDS.items()}
    best = misfit(_config(base, x), targets, seeds)
    for r in range(rounds):
        improved = True
        while improved:
            improved = False
            for key, (lo, hi) in FIT_FIELDS.items():
                for sign in (1.0, -1.0):
                    trial = {**x, key: float(np.clip(x[key] + sign * step[key], lo, hi))}
                    loss = misfit(_config(base, trial), targets, seeds)
                    if loss < best - 1e-9:
                        x, best, improved = trial, loss, True
                        break
        logger.info("round %d: misfit %.3f %s", r, best, {k: round(v, 3) for k, v in x.items()})
        step = {k: v / 2 for k, v in step.items()}
    return x, best


def main(argv: list[str] | None = None) -> int:
    """Print the targets, the fitted fields and each statistic of the fitted world."""
    from bots_verl.sim.scenario import PRESETS

    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.sim_fit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibration", help="calibration.parquet (default: the recorded TOY_TARGETS)")
    parser.add_argument("--rounds", type=int, default=6, help="step-halving rounds of the coordinate search")
    parser.add_argument("--from-preset", action="store_true", help="start from the toy preset (default: math)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    targets = {**TOY_TARGETS, **(targets_from_calibration(args.calibration) if args.calibration else {})}
    base = PRESETS["toy"] if args.from_preset else PRESETS["toy"].replace(**_math_start())
    fitted, loss = fit_toy(base, targets, rounds=args.rounds)
    cfg = _config(base, fitted)
    stats = [world_stats(build_world(cfg, stream(s, 0))) for s in range(5)]
    print(json.dumps({k: round(v, 3) for k, v in fitted.items()}, indent=1))
    print(f"misfit {loss:.3f} (sum of squared misfits in tolerance units, seeds 0-1)")
    print("| statistic | target | fitted world (mean of seeds 0-4) | tolerance |\n|---|---|---|---|")
    for k, v in targets.items():
        print(f"| {k} | {v:.3f} | {np.mean([s[k] for s in stats]):.3f} | {TOLERANCES[k]:.2f} |")
    return 0


def _math_start() -> dict[str, Any]:
    """The math preset's values of the fitted fields (a neutral starting point for a fit from scratch)."""
    m = ScenarioConfig()
    return {
        "difficulty_mean": m.difficulty_mean,
        "difficulty_sd": m.difficulty_sd,
        "policy_task_noise": m.policy_task_noise,
        "ref_offsets": m.ref_offsets,
        "ref_task_noise": m.ref_task_noise,
        "eval_difficulty_shift": 0.0,
        "eval_difficulty_scale": 1.0,
    }


if __name__ == "__main__":
    sys.exit(main())
