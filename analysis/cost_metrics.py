"""Cost-to-target metrics (rollouts, wall-clock) on top of :mod:`bots_verl.core.selection_metrics`.

TTB counts *steps*; a selector that spends more rollouts or seconds per step (oversampling, filtering, slow
selection) can look fast in steps and still cost more. The reviewers asked for wall-clock and rollout counts, so the
tables also report the cost, in rollouts or seconds, a method spends until it first reaches Random's best within
``fraction`` of the budget, over Random's cost, with the same two denominators as TTB
(:func:`bots_verl.core.selection_metrics.ttb`): ``"baseline"`` (default) divides by what Random spent until it first
reached that score itself (so Random scores exactly 1), ``"budget"`` by what Random spent in the whole ``fraction`` of
the budget. ``< 1`` is cheaper. Target and first-reach step come from the core functions, so these numbers agree with
TTB by construction.

A cost curve is the per-step cost (``bots/rollouts`` or ``timing_s/step``) keyed by training step; the cost "until step
s" is the sum over logged steps ``<= s``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bots_verl.core import selection_metrics as core

__all__ = ["Curve", "best_within", "cost_to_baseline", "cost_to_reach", "cost_within"]


class Curve(NamedTuple):
    """A metric against training steps (strictly increasing steps)."""

    steps: np.ndarray
    values: np.ndarray


def best_within(curve: Curve, horizon: float) -> float:
    """The curve's best value at steps ``<= horizon`` (NaN if none);
    :func:`bots_verl.core.selection_metrics.best_within`."""
    return core.best_within(curve.steps, curve.values, horizon)


def cost_within(cost: Curve, horizon: float) -> float:
    """Total cost logged at steps ``<= horizon`` (NaN entries count as missing, not zero: they make the sum NaN)."""
    steps = np.asarray(cost.steps, dtype=np.float64)
    values = np.asarray(cost.values, dtype=np.float64)
    # A NaN cost must not silently count as free; the caller checks coverage and names the run.
    return float(values[steps <= horizon + 1e-9].sum())


def cost_to_reach(acc: Curve, cost: Curve, target: float) -> float:
    """Cost spent until the accuracy curve first reaches ``target``; NaN if it never does."""
    step = core.steps_to_reach(acc.steps, acc.values, target)
    if not np.isfinite(step):
        return float("nan")
    return cost_within(cost, step)


def cost_to_baseline(
    acc: Curve,
    cost: Curve,
    base_acc: Curve,
    base_cost: Curve,
    fraction: float,
    total_steps: float,
    denominator: str = "baseline",
) -> float:
    """Cost ratio to reach the baseline's best within ``fraction`` of the budget (the cost analogue of TTB).

    Args:
        acc, cost: the method's accuracy curve and per-step cost.
        base_acc, base_cost: the baseline's (Random's, same seed).
        fraction: budget fraction in (0, 1].
        total_steps: the training budget in steps.
        denominator: ``"baseline"``: Random's cost until it first reached the target; ``"budget"``: Random's cost
            within ``fraction * total_steps``.

    Returns:
        ``cost_to_reach(method, target) / denominator``; NaN if the method never reaches the target or the
        denominator is not positive (Random spent nothing: it reached the target at its initial evaluation).
    """
    core.check_ttb_denominator(denominator)
    horizon = core.budget_horizon(fraction, total_steps)
    target = best_within(base_acc, horizon)
    spent = cost_to_reach(acc, cost, target) if np.isfinite(target) else float("nan")
    if denominator == "budget":
        base = cost_within(base_cost, horizon)
    else:
        base = cost_to_reach(base_acc, base_cost, target) if np.isfinite(target) else float("nan")
    if not np.isfinite(base) or base <= 0:
        return float("nan")
    return spent / base
