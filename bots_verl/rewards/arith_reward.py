"""Reward for the toy arithmetic family (``data_source`` ``toy__arith``): exact integer match after a strict format.

The toy testbed (:mod:`bots_verl.toy`) asks a small model for the value of ``a+b``, ``a-b`` or ``a*b``; the response
is the answer alone, the characters the model generates after the prompt's ``=`` (verl decodes with special tokens
skipped, so the end-of-sequence token is not part of it).

The rule is deliberately strict so that it cannot be gamed: after stripping surrounding ASCII whitespace the response
must be the ground truth's canonical decimal form, character for character: ASCII digits only (no Unicode digits),
no sign other than one leading ``-`` on a negative value, no leading zeros, no ``-0``, nothing before or after (so
several answers, an equation or a trailing guess all fail). Comparing canonical strings instead of calling ``int()``
keeps the check linear in the response length and free of Python's int-conversion limits; a response longer than any
answer can be is rejected before it is even scanned.

Standard library only, like the rest of :mod:`bots_verl.rewards`; the scorer never raises on model output. A
malformed ground truth is a data error and raises ``ValueError``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DATA_SOURCE", "canonical_answer", "compute_score"]

DATA_SOURCE = "toy__arith"

# ASCII only: ``\d`` would also match Arabic-Indic, Devanagari, fullwidth ... digits.
_CANONICAL = re.compile(r"-?(?:0|[1-9][0-9]*)", re.ASCII)
_WHITESPACE = " \t\r\n"
# Longer than any ground truth we would ever hold (4-digit x 4-digit products have 8 digits); anything above this
# cannot match and is rejected without scanning it.
_MAX_RESPONSE_CHARS = 256


def canonical_answer(ground_truth: Any) -> str:
    """The ground truth as its canonical decimal string.

    Args:
        ground_truth: an ``int`` or the canonical decimal string the data builder stores (``"-12"``, ``"0"``).

    Returns:
        The canonical string.

    Raises:
        ValueError: for anything else (floats, bools, ``"007"``, ``"-0"``, non-ASCII digits, overlong values).
    """
    if isinstance(ground_truth, int) and not isinstance(ground_truth, bool):
        text = str(ground_truth)
    elif isinstance(ground_truth, str):
        text = ground_truth
    else:
        raise ValueError(f"toy arithmetic ground truth must be an int or its decimal string, got {ground_truth!r}")
    if len(text) > _MAX_RESPONSE_CHARS or _CANONICAL.fullmatch(text) is None or text == "-0":
        raise ValueError(f"toy arithmetic ground truth {text[:40]!r} is not a canonical integer")
    return text


def compute_score(solution_str: Any, ground_truth: Any, **_: Any) -> dict[str, Any]:
    """Score one response.

    Args:
        solution_str: the decoded response (anything that is not a ``str`` is a failure).
        ground_truth: see :func:`canonical_answer`.
        **_: options of the router meant for other domains (``extra_info``, timeouts); ignored.

    Returns:
        ``{"score": 1.0 or 0.0, "acc": bool, "formatted": bool}``; ``formatted`` says whether the response was a
        canonical integer at all (wrong but well-formed answers have it true).

    Raises:
        ValueError: for a malformed ground truth (never for any response).
    """
    truth = canonical_answer(ground_truth)
    if not isinstance(solution_str, str) or len(solution_str) > _MAX_RESPONSE_CHARS:
        return {"score": 0.0, "acc": False, "formatted": False}
    answer = solution_str.strip(_WHITESPACE)
    formatted = _CANONICAL.fullmatch(answer) is not None and answer != "-0"
    correct = formatted and answer == truth
    return {"score": 1.0 if correct else 0.0, "acc": correct, "formatted": formatted}
