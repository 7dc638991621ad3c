"""Rollouts allocated by the posterior (simulator only): the step's budget ``B * n`` split among the selected tasks.

Beyond the paper (issue 24). BOTS gives every selected task the same ``n`` rollouts, but a task whose posterior says
``p`` is near 0 or 1 needs many rollouts for its group to hold a success *and* a failure (the only groups with a
GRPO signal), while a task near 0.5 is mixed already at a few. Knapsack RL (arXiv 2509.25849) and VIP (arXiv
2602.01601) allocate rollouts per prompt for this reason; here the allocation reads the selector's own Beta
posteriors, so it costs nothing extra.

The rule. Under ``p ~ Beta(a, b)`` a group of ``n`` rollouts is mixed with probability::

    P_mixed(n) = 1 - E[p^n] - E[(1 - p)^n],   E[p^n] = prod_{i < n} (a + i) / (a + b + i)

(the Beta-Binomial chance of neither all-0 nor all-1). Every selected task gets ``floor`` rollouts (2: a single
rollout is never mixed); each further rollout of the budget goes to the task whose ``P_mixed`` it raises most, up to
``cap`` per task. ``P_mixed`` is concave in ``n`` (``E[p^n]`` is a convex sequence: its second difference is
``E[p^n (1 - p)^2] >= 0``), so this greedy split maximises the expected number of mixed groups; it is computed at
once by taking the largest marginal gains over all tasks and sizes.

How the simulator's policy weighs unequal groups: GRPO's loss in verl averages over all rollouts of the batch
(``token-mean`` / ``seq-mean``), so a group's share of the gradient is proportional to its rollouts; the loop passes
``n_k / n`` as group weights to :meth:`bots_verl.sim.policy.Policy.train` (1 for every group with equal ``n``).
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["allocate_rollouts", "mixed_chance"]


def mixed_chance(alpha: np.ndarray, beta: np.ndarray, max_size: int) -> np.ndarray:
    """``P_mixed(n)`` for group sizes ``n = 0 .. max_size`` under ``Beta(alpha_k, beta_k)``; shape ``(k, max_size+1)``.

    Args:
        alpha, beta: the tasks' posterior parameters (positive).
        max_size: the largest group size.
    """
    a = np.asarray(alpha, dtype=np.float64)[:, None]
    b = np.asarray(beta, dtype=np.float64)[:, None]
    i = np.arange(max_size, dtype=np.float64)[None, :]
    ones = np.ones((a.shape[0], 1))
    # E[p^n] and E[(1 - p)^n] as running products of the Beta moments' ratios
    all_ones = np.concatenate([ones, np.cumprod((a + i) / (a + b + i), axis=1)], axis=1)
    all_zeros = np.concatenate([ones, np.cumprod((b + i) / (a + b + i), axis=1)], axis=1)
    return np.clip(1.0 - all_ones - all_zeros, 0.0, 1.0)


def allocate_rollouts(alpha: np.ndarray, beta: np.ndarray, budget: int, *, floor: int = 2, cap: int) -> np.ndarray:
    """Split ``budget`` rollouts among tasks to maximise the expected number of mixed groups (module docstring).

    Args:
        alpha, beta: the selected tasks' posterior parameters.
        budget: rollouts to hand out this step (``B * n``).
        floor: rollouts every task gets at least.
        cap: rollouts a task gets at most.

    Returns:
        int64 rollouts per task, summing to ``min(budget, cap * k)``.

    Raises:
        ValueError: if ``floor < 1``, ``cap < floor`` or the budget cannot give every task its floor.
    """
    k = len(alpha)
    if floor < 1 or cap < floor:
        raise ValueError(f"need 1 <= floor <= cap, got floor={floor}, cap={cap}")
    if budget < floor * k:
        raise ValueError(f"a budget of {budget} rollouts cannot give {k} tasks {floor} each")
    extra = min(budget, cap * k) - floor * k
    sizes = np.full(k, floor, dtype=np.int64)
    if extra == 0 or cap == floor:
        return sizes
    p = mixed_chance(alpha, beta, cap)
    gain = np.diff(p[:, floor:], axis=1)  # gain[t, j]: raising task t from floor + j to floor + j + 1 rollouts
    # Largest gains first; ties by size, then task, so each task's chosen gains are a prefix of its own (concavity)
    rows, cols = np.indices(gain.shape)
    order = np.lexsort((rows.ravel(), cols.ravel(), -gain.ravel()))[:extra]
    sizes += np.bincount(rows.ravel()[order], minlength=k)
    return sizes
