"""Rollout allocation (``bots_verl.core.allocation``): the Beta-Binomial chance of a mixed group, the greedy split
that maximises the expected number of mixed groups, and the registered rules the trainer calls."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bots_verl.core import ROLLOUT_ALLOCATIONS
from bots_verl.core.__main__ import listing
from bots_verl.core.allocation import allocate_rollouts, mixed_chance


def _beta_binomial_mixed(a: float, b: float, n: int) -> float:
    """1 - P(S = 0) - P(S = n) for S ~ BetaBinomial(n, a, b), from log-gamma (an independent formula)."""

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    if n == 0:
        return 0.0
    p0 = math.exp(log_beta(a, b + n) - log_beta(a, b))
    pn = math.exp(log_beta(a + n, b) - log_beta(a, b))
    return 1.0 - p0 - pn


def test_mixed_chance_is_the_beta_binomial_chance_of_a_mixed_group():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.2, 30, 12), rng.uniform(0.2, 30, 12)
    got = mixed_chance(a, b, 20)
    want = np.array([[_beta_binomial_mixed(x, y, n) for n in range(21)] for x, y in zip(a, b, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[:, :2], 0.0, atol=1e-15)  # no group of 0 or 1 rollouts is mixed


def _greedy_one_by_one(a, b, budget, floor, cap):
    sizes = np.full(len(a), floor)
    table = mixed_chance(a, b, cap)
    for _ in range(budget - floor * len(a)):
        gain = np.where(
            sizes < cap, table[np.arange(len(a)), np.minimum(sizes + 1, cap)] - table[np.arange(len(a)), sizes], -1
        )
        sizes[np.argmax(gain)] += 1
    return sizes


@pytest.mark.parametrize("seed", range(5))
def test_allocation_is_the_greedy_split_of_the_budget(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.3, 40, 16), rng.uniform(0.3, 40, 16)
    sizes = allocate_rollouts(a, b, 16 * 8, floor=2, cap=32)
    assert sizes.sum() == 128 and sizes.min() >= 2 and sizes.max() <= 32
    want = _greedy_one_by_one(a, b, 128, 2, 32)
    # the same split, or one of equal value where gains tie
    table = mixed_chance(a, b, 32)
    rows = np.arange(16)
    assert table[rows, sizes].sum() == pytest.approx(table[rows, want].sum(), abs=1e-12)


def test_allocation_gives_sharp_extreme_tasks_more_and_respects_floor_and_cap():
    # a sharp p = 0.5 task, a sharp p = 0.05 task, a flat one
    a, b = np.array([500.0, 50.0, 1.0]), np.array([500.0, 950.0, 1.0])
    sizes = allocate_rollouts(a, b, 24, floor=2, cap=16)
    assert sizes.sum() == 24 and sizes[1] > sizes[0]  # 11 rollouts for p = 0.05, 6 for p = 0.5
    assert allocate_rollouts(a, b, 6, floor=2, cap=16).tolist() == [2, 2, 2]
    assert allocate_rollouts(a, b, 100, floor=2, cap=16).tolist() == [16, 16, 16]  # the cap binds
    with pytest.raises(ValueError, match="cannot give"):
        allocate_rollouts(a, b, 5, floor=2, cap=16)
    with pytest.raises(ValueError, match="floor"):
        allocate_rollouts(a, b, 24, floor=3, cap=2)


def test_the_rules_keep_the_budget_and_uniform_is_grpo():
    a, b = np.array([1.0, 5.0, 1.0, 20.0]), np.array([20.0, 5.0, 1.0, 1.0])
    assert ROLLOUT_ALLOCATIONS["uniform"](a, b, 32).tolist() == [8, 8, 8, 8]
    sizes = ROLLOUT_ALLOCATIONS["posterior"](a, b, 32, min_n=2, max_factor=4.0)
    assert sizes.sum() == 32 and sizes.min() >= 2 and sizes.max() <= 32
    # the same tasks at the floor's budget: nothing to split
    assert ROLLOUT_ALLOCATIONS["posterior"](a, b, 8).tolist() == [2, 2, 2, 2]
    # max_factor 1: no task may exceed n, so every task gets n
    assert ROLLOUT_ALLOCATIONS["posterior"](a, b, 32, max_factor=1.0).tolist() == [8, 8, 8, 8]
    # the largest chance of mixing goes with the sizes chosen: no other split of 32 does better
    table = mixed_chance(a, b, 32)
    best = table[np.arange(4), sizes].sum()
    assert best >= table[np.arange(4), [8, 8, 8, 8]].sum()


def test_the_posterior_near_0_or_1_gets_more_rollouts_than_the_one_near_half():
    a, b = np.array([400.0, 30.0]), np.array([400.0, 770.0])  # sharp at 0.5 and at ~0.04
    sizes = ROLLOUT_ALLOCATIONS["posterior"](a, b, 16)
    assert sizes[1] > sizes[0] and sizes.sum() == 16


@pytest.mark.parametrize(
    "alpha, beta, budget, kw, message",
    [
        ([1.0, 1.0], [1.0], 8, {}, "one length"),
        ([1.0, 0.0], [1.0, 1.0], 8, {}, "positive and finite"),
        ([1.0, np.nan], [1.0, 1.0], 8, {}, "positive and finite"),
        ([1.0, 1.0], [1.0, 1.0], 7, {}, "multiple"),
        ([1.0, 1.0], [1.0, 1.0], 8.0, {}, "multiple"),
        ([1.0, 1.0], [1.0, 1.0], 8, {"min_n": 5}, "min_n"),
        ([1.0, 1.0], [1.0, 1.0], 8, {"min_n": 0}, "min_n"),
        ([1.0, 1.0], [1.0, 1.0], 8, {"max_factor": 0.5}, "max_factor"),
        ([1.0, 1.0], [1.0, 1.0], 8, {"max_factor": "2"}, "max_factor"),
    ],
)
def test_bad_input_is_refused(alpha, beta, budget, kw, message):
    with pytest.raises(ValueError, match=message):
        ROLLOUT_ALLOCATIONS["posterior"](np.array(alpha), np.array(beta), budget, **kw)


def test_the_rules_are_listed_with_their_parameters():
    text = listing()
    assert "rollout allocations" in text and "posterior" in text and "min_n=2, max_factor=4.0" in text


# ---- issue 34: max_factor is validated and the cap is clamped to what the budget can give one task
@pytest.mark.parametrize("max_factor", [math.inf, -math.inf, math.nan])
def test_a_max_factor_that_is_not_finite_is_refused(max_factor):
    """``inf`` used to raise OverflowError (and crash the dry run) instead of a ValueError naming the parameter."""
    with pytest.raises(ValueError, match=r"max_factor must be a finite number >= 1, got"):
        ROLLOUT_ALLOCATIONS["posterior"](np.ones(2), np.ones(2), 8, max_factor=max_factor)


@pytest.mark.parametrize("max_factor", [1e6, 1e18, 10**30, np.float64(1e300)])
def test_a_huge_max_factor_is_clamped_to_what_the_budget_can_give_a_task(max_factor):
    """1e18 used to raise "array is too big"; 1e6 allocated about 1 GB per array at every step."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.2, 5.0, 16), rng.uniform(0.2, 5.0, 16)
    budget = 16 * 8
    most = budget - 2 * 15  # every other task keeps its floor of 2
    expected = ROLLOUT_ALLOCATIONS["posterior"](a, b, budget, max_factor=most / 8)
    sizes = ROLLOUT_ALLOCATIONS["posterior"](a, b, budget, max_factor=max_factor)
    assert sizes.tolist() == expected.tolist() and sizes.sum() == budget
    assert allocate_rollouts(a, b, budget, floor=2, cap=10**18).tolist() == expected.tolist()
