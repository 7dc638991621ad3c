"""The one reward -> success rule, shared by the trainer (bots.success.*) and reference_eval."""

import math

import numpy as np
import pytest

from bots_verl.rewards.success import SuccessRule


def test_success_rule_mappings():
    auto = SuccessRule()
    assert auto(1.0, {"acc": True}) == 1.0 and auto(-1.0, {"acc": False}) == 0.0  # math_dapo
    assert auto(-1.0, {"acc": -1.0}) == 0.0 and auto(1.0, {"acc": 1.0}) == 1.0  # naive manager echoes a float score
    assert auto(0.7, {}) == 1.0 and auto(0.0, None) == 0.0
    assert SuccessRule("score")(0.25, {"acc": True}) == 0.25
    assert SuccessRule("threshold", 0.5)(0.4, {"acc": True}) == 0.0
    with pytest.raises(ValueError, match="not finite"):
        auto(math.nan, {"acc": True})
    with pytest.raises(ValueError, match="gave no 'acc'"):
        SuccessRule("acc")(1.0, {})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        SuccessRule("score")(-1.0, {})
    with pytest.raises(ValueError, match="acc"):
        SuccessRule("acc")(1.0, {"acc": 3.0})


def test_numpy_acc_and_unknown_rule():
    assert SuccessRule()(0.0, {"acc": np.bool_(True)}) == 1.0
    with pytest.raises(ValueError, match="success rule must be one of"):
        SuccessRule("majority")
