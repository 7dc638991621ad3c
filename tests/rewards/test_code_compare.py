"""Output comparison in the scorer's process: exact integers, tolerant floats, plain data only."""

from __future__ import annotations

import math

import pytest

from bots_verl.rewards.code_compare import outputs_match, values_match


@pytest.mark.parametrize(
    ("got", "expected", "match"),
    [
        ("5\n", "5", True),
        ("1 2\n3\n\n", "1 2\n3", True),
        ("1000001", "1000000", False),  # no float tolerance for integers
        ("1000000.0", "1000000", True),  # the same number
        ("1e6", "1000000", True),
        ("1000000.0000001", "1000000", False),
        ("-0", "0", True),
        ("+7", "7", True),
        ("007", "7", True),
        ("9" * 5000, "9" * 5000, True),
        ("9" * 5000 + "8", "9" * 5001, False),  # beyond int()'s digit limit, still exact
        ("0.30000000000000004", "0.3", True),
        ("0.3001", "0.3", False),
        ("nan", "0.5", False),
        ("inf", "1e308", False),
        ("YES", "yes", True),
        ("Yes", "no", False),
        ("abc", "abc", True),
        ("abc", "ABC", False),
        ("1 2", "1 2 3", False),
        ("1\n2", "1 2", False),
        ("", "", True),
    ],
)
def test_outputs_match(got: str, expected: str, match: bool) -> None:
    assert outputs_match(got, expected) is match


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True


@pytest.mark.parametrize(
    ("got", "expected", "match"),
    [
        (3, 3, True),
        (3.0, 3, True),
        (1000001, 1000000, False),
        (1000000.0000001, 1000000, False),
        (True, 1, False),  # a bool is not an int answer
        (1, True, False),
        (0.1 + 1e-9, 0.1, True),
        (0.2, 0.1, False),
        (math.nan, math.nan, True),
        (math.nan, 0.1, False),
        (10**400, 1.5, False),  # beyond float range: not a float answer, and no OverflowError
        ("a", "a", True),
        (None, None, True),
        ((1, 2), [1, 2], True),
        ([1, [2, 3]], [1, [2, 3]], True),
        ([1, [2, 4]], [1, [2, 3]], False),
        ({1: "a"}, {"1": "a"}, True),  # JSON object keys are strings
        ({"a": 1, "b": 2}, {"a": 1}, False),
        ({1, 2}, [1, 2], False),
        (AlwaysEqual(), 3, False),
        (AlwaysEqual(), [1], False),
    ],
)
def test_values_match(got: object, expected: object, match: bool) -> None:
    assert values_match(got, expected) is match


def test_values_match_is_iterative() -> None:
    deep_got, deep_expected = [], []
    for _ in range(100_000):
        deep_got, deep_expected = [deep_got], [deep_expected]
    assert values_match(deep_got, deep_expected)
