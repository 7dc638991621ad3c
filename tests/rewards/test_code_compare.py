"""Output comparison in the scorer's process: exact integers, tolerant floats, plain data only."""

from __future__ import annotations

import math
import random
import re
import tracemalloc

import pytest

from bots_verl.rewards.code_compare import _token_equal, outputs_match, values_match


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


def _eager_outputs_match(got: str, expected: str) -> bool:
    """The comparison as lists of lines and tokens (what outputs_match does without building them)."""
    got_lines, expected_lines = got.rstrip().splitlines(), expected.rstrip().splitlines()
    if len(got_lines) != len(expected_lines):
        return False
    for got_line, expected_line in zip(got_lines, expected_lines, strict=True):
        got_tokens, expected_tokens = got_line.split(), expected_line.split()
        if len(got_tokens) != len(expected_tokens):
            return False
        if not all(_token_equal(g, e) for g, e in zip(got_tokens, expected_tokens, strict=True)):
            return False
    return True


def test_outputs_match_walks_lines_and_tokens_like_split() -> None:
    """Every line break of str.splitlines and every separator of str.split(), in random outputs."""
    rng = random.Random(0)
    alphabet = ["1", "2", "x", "é", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1f", "\x85", "\u2028", "\xa0"]
    alphabet += ["\u3000", "\u200b"]
    for _ in range(3000):
        expected = "".join(rng.choices(alphabet, k=rng.randrange(8)))
        got = expected if rng.random() < 0.3 else "".join(rng.choices(alphabet, k=rng.randrange(8)))
        if rng.random() < 0.3:  # the same tokens with other separators
            got = re.sub(r"\s+", lambda m: rng.choice([" ", "\t", "  ", m.group()]), expected)
        assert outputs_match(got, expected) == _eager_outputs_match(got, expected), (got, expected)
    padded = "5" + " " * 10_000 + "\n" * 10_000
    assert outputs_match(padded, "5") and not outputs_match(padded + "6", "5")


def test_outputs_match_holds_no_list_of_the_output() -> None:
    """Millions of short lines cost the comparison next to nothing (as lists: ~20 times the output's size)."""
    got, one_line = "12\n" * 2_000_000, "12 " * 2_000_000
    tracemalloc.start()
    try:
        assert not outputs_match(got, "12\n" * 3)
        assert not outputs_match(one_line, "12 12")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(got) // 4, f"peak {peak} bytes"
