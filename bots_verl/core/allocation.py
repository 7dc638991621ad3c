"""Rollouts allocated by the posterior: the step's budget ``B * n`` split among the selected tasks.

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

Where it runs. The trainer asks for an allocation when verl fetches the selected prompts and passes the sizes to
verl's agent loop as each prompt's ``__rollout_n__`` (``bots.rollout_allocation``,
:mod:`bots_verl.integration.hooks.trainer`); the simulator splits its step the same way (``alloc=posterior``,
:mod:`bots_verl.sim.loop`). Unequal groups in training: verl's GRPO advantage normalises within each prompt's group
(by ``uid``) whatever its size, and its loss averages over all rollouts of the batch (``token-mean`` /
``seq-mean``), so a group's share of the gradient is proportional to its rollouts; the simulator's policy weighs
groups by ``n_k / n`` for that reason. The posterior counts the rollouts each task really got (the trainer
aggregates the step's outcomes per task).

Rules by name are in :data:`ROLLOUT_ALLOCATIONS` (``python -m bots_verl.core --list``): ``uniform`` (the paper's and
GRPO's ``n`` per task) and ``posterior`` (the rule above).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from bots_verl.core.registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["ROLLOUT_ALLOCATIONS", "allocate_rollouts", "mixed_chance"]

#: rollout allocation rules by name: ``rule(alpha, beta, budget, *, min_n, max_factor) -> rollouts per task``
ROLLOUT_ALLOCATIONS: Registry = Registry("rollout allocation")


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
        cap: rollouts a task gets at most; clamped to what the budget can give one task (``budget - floor * (k - 1)``),
            so a huge cap costs no more memory or time than that.

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
    # no task can get more than the budget leaves once the others have their floor: a larger cap would only size the
    # (k, cap + 1) arrays below (a cap of 4e6 took about 1 GB per array, every step)
    cap = min(int(cap), budget - floor * (k - 1))
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


def _check_budget(alpha: np.ndarray, beta: np.ndarray, budget: int) -> int:
    """The number of tasks, after checking that ``alpha``/``beta`` are positive, finite and of one length."""
    a, b = np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"alpha and beta must be non-empty 1-d arrays of one length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all() and (a > 0).all() and (b > 0).all()):
        raise ValueError("alpha and beta must be positive and finite")
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget % a.size:
        raise ValueError(f"the budget ({budget!r} rollouts) must be an integer multiple of the {a.size} tasks")
    return a.size


@ROLLOUT_ALLOCATIONS.register("uniform")
def uniform(alpha: np.ndarray, beta: np.ndarray, budget: int, **unused: Any) -> np.ndarray:
    """Every selected task gets the same n = budget / tasks rollouts: GRPO's and the paper's (the default).

    ``unused`` takes the other rules' parameters (``min_n``, ``max_factor``), which mean nothing here.
    """
    k = _check_budget(alpha, beta, budget)
    return np.full(k, budget // k, dtype=np.int64)


@ROLLOUT_ALLOCATIONS.register("posterior")
def posterior(
    alpha: np.ndarray, beta: np.ndarray, budget: int, *, min_n: int = 2, max_factor: float = 4.0
) -> np.ndarray:
    """Ours: the budget split to maximise the expected number of mixed groups under each task's Beta posterior.

    Args:
        alpha, beta: the selected tasks' posterior parameters.
        budget: the step's rollouts for these tasks (``tasks * n``); a multiple of the number of tasks.
        min_n: rollouts every task gets at least (2: a single rollout is never a mixed group); at most ``n``.
        max_factor: a task gets at most ``max_factor * n`` rollouts (a finite number >= 1), and never more than the
            budget can give one task (:func:`allocate_rollouts`).

    Raises:
        ValueError: for a malformed posterior or budget, ``min_n`` outside ``[1, n]``, or ``max_factor`` below 1 or
            not finite.
    """
    k = _check_budget(alpha, beta, budget)
    n = budget // k
    if isinstance(min_n, bool) or not isinstance(min_n, int | np.integer) or not 1 <= min_n <= n:
        raise ValueError(f"min_n must be an integer in [1, n={n}], got {min_n!r}")
    if (
        isinstance(max_factor, bool)
        or not isinstance(max_factor, int | float | np.integer | np.floating)
        or not 1 <= max_factor < np.inf
    ):
        raise ValueError(f"max_factor must be a finite number >= 1, got {max_factor!r}")
    # the cap in rollouts, bounded by the budget before it becomes an int (max_factor * n may overflow a float)
    cap = max(n, int(min(np.floor(float(max_factor) * n), budget)))
    return allocate_rollouts(np.asarray(alpha, float), np.asarray(beta, float), budget, floor=int(min_n), cap=cap)
