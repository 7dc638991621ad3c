"""Comparing a program's outputs with the expected ones, in the scorer's process (never inside the sandbox).

Integers compare exactly; a float tolerance applies only where the expected value is a float, so ``1000001`` never
passes for ``1000000``. Both functions take plain data only (strings, or values decoded from the sandbox), so a
program cannot bring its own ``__eq__``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

__all__ = ["FLOAT_TOL", "outputs_match", "values_match"]

# Relative and absolute tolerance for expected floats (GURU's fuzzy_equal uses 1e-6 for stdout tokens).
FLOAT_TOL = 1e-6

_INT_TOKEN = re.compile(r"[+-]?\d+")
_FLOAT_TOKEN = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
# Exactly the boundaries of str.splitlines and the separators of str.split() (``\s`` is str.isspace for str patterns).
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_TOKEN = re.compile(r"\S+")


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
    # The program's output (up to the 16 MiB cap) is walked by position, never split: as lists of lines or tokens,
    # two-character lines would cost ~20 times the output's size (an object per line). The expected side is data.
    got_lines = _line_spans(got)
    for expected_line in expected.rstrip().splitlines():
        span = next(got_lines, None)
        if span is None:
            return False
        got_tokens = _TOKEN.finditer(got, *span)
        for expected_token in expected_line.split():
            token = next(got_tokens, None)
            if token is None or not _token_equal(token.group(), expected_token):
                return False
        if next(got_tokens, None) is not None:
            return False
    return next(got_lines, None) is None


def _rstripped_end(text: str) -> int:
    """``len(text.rstrip())``, without copying ``text``."""
    end = len(text)
    while end:
        start = max(0, end - 4096)
        kept = len(text[start:end].rstrip())
        if kept:
            return start + kept
        end = start
    return 0


def _line_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``text.rstrip().splitlines()``, one at a time."""
    end = _rstripped_end(text)
    start = 0
    for brk in _LINE_BREAK.finditer(text, 0, end):
        yield start, brk.start()
        start = brk.end()
    if start < end:
        yield start, end


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
