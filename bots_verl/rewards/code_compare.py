"""Comparing a program's outputs with the expected ones, in the scorer's process (never inside the sandbox).

Integers compare exactly; a float tolerance applies only where the expected value is a float, so ``1000001`` never
passes for ``1000000``. Both functions take plain data only (strings, or values decoded from the sandbox), so a
program cannot bring its own ``__eq__``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

__all__ = ["FLOAT_TOL", "outputs_match", "values_match"]

# Relative and absolute tolerance for expected floats (GURU's fuzzy_equal uses 1e-6 for stdout tokens).
FLOAT_TOL = 1e-6

_INT_TOKEN = re.compile(r"[+-]?\d+")
_FLOAT_TOKEN = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")


def _int_key(token: str) -> tuple[bool, str]:
    """(negative, digits without leading zeros) of an integer token; compares without int()'s 4300-digit limit."""
    negative = token.startswith("-")
    digits = token.lstrip("+-").lstrip("0") or "0"
    return negative and digits != "0", digits


def _token_equal(got: str, expected: str) -> bool:
    if got == expected:
        return True
    if expected.lower() in ("yes", "no"):
        return got.lower() == expected.lower()
    if _INT_TOKEN.fullmatch(expected):
        if _INT_TOKEN.fullmatch(got):
            return _int_key(got) == _int_key(expected)
        # "5.0" for 5 is the same number; "5.0000001" is not (Decimal compares exactly, at any size).
        return _FLOAT_TOKEN.fullmatch(got) is not None and Decimal(got) == Decimal(expected)
    if _FLOAT_TOKEN.fullmatch(expected):
        if _FLOAT_TOKEN.fullmatch(got) is None:
            return False
        a, b = float(got), float(expected)
        return math.isfinite(a) and math.isfinite(b) and math.isclose(a, b, rel_tol=FLOAT_TOL, abs_tol=FLOAT_TOL)
    return False


def outputs_match(got: str, expected: str) -> bool:
    """Compare a program's stdout with the expected stdout, line by line and token by token.

    Trailing whitespace and blank lines at the end are ignored; ``yes``/``no`` compare case-insensitively (GURU's
    ``fuzzy_equal``); an expected integer token needs exactly that number (``5.0`` passes for ``5``, ``1000001``
    never for ``1000000``); an expected float token (with a ``.`` or an exponent) a number within
    :data:`FLOAT_TOL`.

    Args:
        got: the program's stdout.
        expected: the reference stdout.

    Returns:
        Whether they match.
    """
    got_lines = got.rstrip().splitlines()
    expected_lines = expected.rstrip().splitlines()
    if len(got_lines) != len(expected_lines):
        return False
    for got_line, expected_line in zip(got_lines, expected_lines, strict=True):
        got_tokens, expected_tokens = got_line.split(), expected_line.split()
        if len(got_tokens) != len(expected_tokens):
            return False
        if not all(_token_equal(g, e) for g, e in zip(got_tokens, expected_tokens, strict=True)):
            return False
    return True


def _json_key(key: Any) -> Any:
    """The string ``json.dumps`` would make of a dict key (expected dicts come from JSON, so keys are strings)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, int):
        return str(key) if abs(key) < 10**4000 else None
    if isinstance(key, float):
        if math.isnan(key):
            return "NaN"
        return repr(key) if math.isfinite(key) else ("Infinity" if key > 0 else "-Infinity")
    return None


def values_match(got: Any, expected: Any, tol: float = FLOAT_TOL) -> bool:
    """Compare a returned value with the expected value (iteratively: any depth).

    Args:
        got: the decoded return value (plain data only: None, bool, int, float, str, list, tuple, dict, set, ...).
        expected: the expected value, parsed from the test's JSON or Python literals.
        tol: relative and absolute tolerance where the expected value is a float.

    Returns:
        Whether they match: bools, ``None`` and strings exactly; ints exactly (an equal float such as ``3.0`` is
        accepted); expected floats within ``tol`` (NaN matches NaN); lists and tuples against lists or tuples of the
        same length; sets as sets; dicts key by key (a JSON object's string keys also match the program's int keys).
    """
    stack = [(got, expected)]
    while stack:
        a, b = stack.pop()
        if b is None or isinstance(b, bool) or isinstance(b, str):
            if type(a) is not type(b) or a != b:
                return False
        elif isinstance(b, int):
            if isinstance(a, bool) or not isinstance(a, int | float) or a != b:
                return False
        elif isinstance(b, float):
            if isinstance(a, bool) or not isinstance(a, int | float):
                return False
            try:
                if math.isnan(b) or math.isnan(a):
                    if not (math.isnan(a) and math.isnan(b)):
                        return False
                elif not math.isclose(a, b, rel_tol=tol, abs_tol=tol):
                    return False
            except OverflowError:  # an int beyond float range is no float answer
                return False
        elif isinstance(b, list | tuple):
            if not isinstance(a, list | tuple) or len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif isinstance(b, set | frozenset):
            # Members are hashable plain data on both sides, so set equality runs no code of the program.
            if not isinstance(a, set | frozenset) or a != b:
                return False
        elif isinstance(b, dict):
            if not isinstance(a, dict) or len(a) != len(b):
                return False
            keyed = a if set(a) == set(b) else {_json_key(k): v for k, v in a.items()}
            if set(keyed) != set(b):
                return False
            stack.extend((keyed[k], b[k]) for k in b)
        else:
            return False
    return True
