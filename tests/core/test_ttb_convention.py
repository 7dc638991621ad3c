"""TTB's two denominators on hand-made curves: the paper's (Random's own steps, so Random is 1.00) and the budget's."""

import math

import numpy as np
import pytest

from bots_verl.core.selection_metrics import TTB_DENOMINATORS, check_ttb_denominator, ttb

STEPS = np.arange(0, 101, 10)
# Random peaks early: its best within 50 steps is 0.5, first reached at step 20; its best overall is 0.6 at step 90.
RANDOM = np.array([0.1, 0.3, 0.5, 0.4, 0.45, 0.42, 0.48, 0.5, 0.55, 0.6, 0.58])
EARLY = np.array([0.2, 0.5, 0.5, 0.55, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6])  # 0.5 at step 10, 0.6 at step 40
LATE = np.array([0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.58, 0.59, 0.6])  # 0.5 at step 60, 0.6 at step 100


def test_default_is_the_baseline_denominator_and_random_is_one():
    assert TTB_DENOMINATORS[0] == "baseline"
    for fraction in (0.25, 0.5, 1.0):
        assert ttb(STEPS, RANDOM, STEPS, RANDOM, fraction, 100) == 1.0
        assert ttb(STEPS, RANDOM, STEPS, RANDOM, fraction, 100, denominator="budget") <= 1.0
    # the budget reading gives Random 20 / 50 at 50%: its best within the horizon came early
    assert ttb(STEPS, RANDOM, STEPS, RANDOM, 0.5, 100, denominator="budget") == pytest.approx(0.4)


def test_method_over_random_steps_by_hand():
    # target 0.5 (Random's best within 50 steps, reached by Random at step 20)
    assert ttb(STEPS, EARLY, STEPS, RANDOM, 0.5, 100) == pytest.approx(10 / 20)
    assert ttb(STEPS, EARLY, STEPS, RANDOM, 0.5, 100, denominator="budget") == pytest.approx(10 / 50)
    assert ttb(STEPS, LATE, STEPS, RANDOM, 0.5, 100) == pytest.approx(60 / 20)  # slower than Random: above 1
    # target 0.6 (Random's final best, reached at step 90)
    assert ttb(STEPS, EARLY, STEPS, RANDOM, 1.0, 100) == pytest.approx(40 / 90)
    assert ttb(STEPS, EARLY, STEPS, RANDOM, 1.0, 100, denominator="budget") == pytest.approx(40 / 100)
    assert ttb(STEPS, LATE, STEPS, RANDOM, 1.0, 100) == pytest.approx(100 / 90)


def test_random_is_one_on_any_eval_grid():
    """The baseline denominator does not depend on where Random's evaluations fall; the budget one does."""
    fine = np.arange(0, 101, 5)
    coarse = np.arange(0, 101, 25)
    curve = lambda s: np.minimum(s / 80, 1.0)  # noqa: E731 - rises to 1.0 at step 80, then flat
    for grid in (fine, coarse):
        assert ttb(grid, curve(grid), grid, curve(grid), 1.0, 100) == 1.0
    assert ttb(fine, curve(fine), fine, curve(fine), 1.0, 100, denominator="budget") == pytest.approx(0.8)
    assert ttb(coarse, curve(coarse), coarse, curve(coarse), 1.0, 100, denominator="budget") == pytest.approx(1.0)


def test_baseline_best_at_step_zero():
    """Random's best within 25 steps is its initial evaluation (training first hurt it)."""
    steps = np.array([0, 10, 20, 30])
    random = np.array([0.5, 0.3, 0.4, 0.6])
    assert ttb(steps, random, steps, random, 0.25, 30) == 1.0
    assert ttb(steps, np.array([0.5, 0.2, 0.2, 0.2]), steps, random, 0.25, 30) == 1.0  # parity at step 0
    assert ttb(steps, np.array([0.4, 0.6, 0.6, 0.6]), steps, random, 0.25, 30) == math.inf  # needed training


def test_never_reached_is_nan_for_both():
    for denominator in TTB_DENOMINATORS:
        assert math.isnan(ttb(STEPS, RANDOM * 0.5, STEPS, RANDOM, 1.0, 100, denominator=denominator))


def test_unknown_denominator_is_an_error():
    assert check_ttb_denominator("budget") == "budget"
    with pytest.raises(ValueError, match=r"TTB denominator must be one of \('baseline', 'budget'\), got 'steps'"):
        ttb(STEPS, EARLY, STEPS, RANDOM, 0.5, 100, denominator="steps")
