"""The share of a reference arm's step saving (bots_verl.sim.saving_share), on hand-made TTBs."""

import math

import numpy as np

from bots_verl.sim.saving_share import share_of_saving


def test_share_is_the_ratio_of_mean_savings() -> None:
    x = np.array([0.6, 0.8, 0.7])  # saves 0.3 on the mean
    ref = np.array([0.4, 0.5, 0.5])  # saves 0.533...
    point, lo, hi = share_of_saving(x, ref)
    assert math.isclose(point, 0.3 / (1 - 1.4 / 3))
    assert lo <= point <= hi


def test_equal_arms_share_everything_and_nan_seeds_leave_both_arms() -> None:
    ref = np.array([0.5, 0.6, np.nan, 0.7])
    x = np.array([0.5, 0.6, 0.1, 0.7])  # seed 2 is dropped from both, or the share would exceed 1
    assert share_of_saving(x, ref) == (1.0, 1.0, 1.0)


def test_fewer_than_two_paired_seeds_gives_no_share() -> None:
    assert all(math.isnan(v) for v in share_of_saving(np.array([0.5, np.nan]), np.array([0.4, 0.3])))
