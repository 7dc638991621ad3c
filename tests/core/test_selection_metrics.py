"""The shared metric functions on hand-made curves."""

import math

import numpy as np
import pytest

from bots_verl.core.selection_metrics import (
    best_so_far,
    bsf,
    effective_task_ratio,
    interval,
    paired_interval,
    pearson,
    roc_auc,
    steps_to_reach,
    t_quantile,
    ttb,
)

STEPS = np.arange(0, 101, 10)
RANDOM = np.array([0.1, 0.2, 0.25, 0.3, 0.28, 0.35, 0.33, 0.4, 0.38, 0.42, 0.45])
FAST = np.array([0.1, 0.3, 0.4, 0.45, 0.5, 0.5, 0.52, 0.55, 0.55, 0.56, 0.57])


def test_effective_task_ratio():
    assert effective_task_ratio([0, 16, 3, 8], [16, 16, 16, 16]) == 0.5
    assert effective_task_ratio([0.5, 1.0], [1, 1]) == 0.5
    assert math.isnan(effective_task_ratio([], []))


def test_best_so_far_skips_nan():
    np.testing.assert_array_equal(best_so_far([np.nan, 0.2, 0.1, np.nan, 0.3]), [np.nan, 0.2, 0.2, 0.2, 0.3])


def test_ttb_by_hand():
    # random's best within 50 steps is 0.35 (step 50); FAST first reaches >= 0.35 at step 20
    assert ttb(STEPS, FAST, STEPS, RANDOM, 0.5, 100) == pytest.approx(20 / 50)
    # random's final best 0.45 is reached by FAST at step 30
    assert ttb(STEPS, FAST, STEPS, RANDOM, 1.0, 100) == pytest.approx(30 / 100)
    assert ttb(STEPS, RANDOM, STEPS, RANDOM, 1.0, 100) == pytest.approx(1.0)


def test_ttb_never_reached_is_nan():
    assert math.isnan(ttb(STEPS, RANDOM * 0.5, STEPS, RANDOM, 1.0, 100))
    assert math.isnan(steps_to_reach(STEPS, RANDOM, 0.9))


def test_bsf_by_hand():
    assert bsf(STEPS, FAST, STEPS, RANDOM, 0.25, 100) == pytest.approx(0.4 / 0.25)
    assert bsf(STEPS, FAST, STEPS, RANDOM, 1.0, 100) == pytest.approx(0.57 / 0.45)


def test_sparse_and_unequal_eval_grids():
    steps = np.array([0, 40, 100])
    assert ttb(steps, [0.1, 0.5, 0.6], STEPS, RANDOM, 1.0, 100) == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062),
        (0.975, 2, 4.3027),
        (0.975, 4, 2.7764),
        (0.975, 9, 2.2622),
        (0.95, 30, 1.6973),
        (0.995, 5, 4.0321),
    ],
)
def test_t_quantile_matches_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, rel=2e-3)


def test_interval_and_missing():
    iv = interval([1.0, 2.0, 3.0, np.nan])
    assert iv.mean == 2.0 and iv.n == 3 and iv.n_missing == 1
    assert iv.lo == pytest.approx(2 - 4.3027 * 1 / math.sqrt(3), rel=1e-3)
    assert iv.format() == "2.00 [-0.48, 4.48] (1/4 —)"
    assert interval([np.nan]).format() == "—"
    diff = paired_interval([2.0, 3.0, 4.0], [1.0, 2.0, 3.0])
    assert diff.mean == 1.0 and diff.lo == pytest.approx(1.0) and diff.hi == pytest.approx(1.0)


def test_bad_curves():
    with pytest.raises(ValueError, match="increasing"):
        ttb([0, 0], [0.1, 0.2], STEPS, RANDOM, 1.0, 100)
    with pytest.raises(ValueError, match="fraction"):
        bsf(STEPS, FAST, STEPS, RANDOM, 0, 100)


def test_roc_auc_is_the_pairwise_win_rate_with_ties_as_half():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, 40) / 5  # many ties
    labels = rng.random(40) < 0.4
    pos, neg = scores[labels], scores[~labels]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert roc_auc(scores, labels) == pytest.approx(wins / (pos.size * neg.size))
    assert roc_auc([0.1, 0.9], [False, True]) == 1.0
    assert roc_auc([0.9, 0.1], [False, True]) == 0.0
    assert np.isnan(roc_auc([0.1, 0.9], [True, True]))


def test_pearson():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert pearson(x, -x) == pytest.approx(-1.0)
    assert pearson(x, np.array([1.0, 3.0, 2.0, 4.0])) == pytest.approx(np.corrcoef(x, [1, 3, 2, 4])[0, 1])
    assert np.isnan(pearson(x, np.ones(4))) and np.isnan(pearson([1.0], [2.0]))
