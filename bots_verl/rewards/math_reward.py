r"""Math reward: the last ``\boxed{}`` answer, checked symbolically with math-verify.

GURU's math prompts end with "Please output the final answer within \boxed{}" and its reference pass rates count a
sample as solved when the reward is 1 (guru.md §3-§4), so the score here is binary: 1.0 when the boxed answer is
equivalent to the ground truth, else 0.0 (``acc`` is the same bit). A cheap normalised string comparison runs first so
that the common exact cases never reach sympy.

math-verify bounds its work with ``signal.alarm``, which only works in the main thread; off the main thread (verl's
reward workers may call us from a thread pool) the timeouts are disabled rather than letting math-verify raise.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

from bots_verl.rewards._extract import after_think, last_boxed

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

__all__ = ["compute_score", "normalize_answer"]

# Seconds math-verify may spend per parse / comparison (main thread only, see the module docstring).
_TIMEOUT_S = 5
# A boxed answer longer than this is not a final answer but a derivation; sympy on it can take very long.
_MAX_ANSWER_CHARS = 1000

_TEXT_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")


def normalize_answer(answer: str) -> str:
    """Normalise a LaTeX answer for a cheap exact comparison (spacing, ``\\left``/``\\right``, ``dfrac``, ``$``)."""
    text = _TEXT_WRAPPERS.sub(r"\1", answer)
    for old, new in (("\\left", ""), ("\\right", ""), ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("$", "")):
        text = text.replace(old, new)
    text = text.replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\ ", "")
    text = "".join(text.split())
    return text.rstrip(".").lower()


def _symbolic_equal(ground_truth: str, predicted: str) -> bool:
    """Whether math-verify finds ``predicted`` equivalent to ``ground_truth`` (errors count as not equal)."""
    # Imported here so that importing bots_verl.rewards stays cheap (math-verify pulls in sympy).
    from math_verify import parse, verify

    timeout = _TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse(f"\\boxed{{{ground_truth}}}", parsing_timeout=timeout)
        pred = parse(f"\\boxed{{{predicted}}}", parsing_timeout=timeout)
        if not gold or not pred:
            return False
        return bool(verify(gold, pred, timeout_seconds=timeout))
    except Exception as err:  # math-verify/sympy raise many types (TimeoutError, SympifyError, RecursionError...)
        logger.debug("math-verify failed on %r vs %r: %s", ground_truth, predicted, err)
        return False


def compute_score(solution_str: Any, ground_truth: Any, **_: Any) -> dict[str, Any]:
    r"""Score one math response.

    Args:
        solution_str: the decoded model response.
        ground_truth: the reference answer (LaTeX string, without ``\boxed``).

    Returns:
        ``{"score": 1.0 | 0.0, "acc": bool, "pred": str | None}``; malformed output (no box, not a string) scores 0.
    """
    if not isinstance(ground_truth, str) or not ground_truth.strip():
        raise ValueError(f"math ground truth must be a non-empty string, got {type(ground_truth).__name__}")
    if not isinstance(solution_str, str):
        return {"score": 0.0, "acc": False, "pred": None}
    predicted = last_boxed(after_think(solution_str))
    if predicted is None or len(predicted) > _MAX_ANSWER_CHARS:
        return {"score": 0.0, "acc": False, "pred": predicted}
    correct = normalize_answer(predicted) == normalize_answer(ground_truth) or _symbolic_equal(ground_truth, predicted)
    return {"score": 1.0 if correct else 0.0, "acc": correct, "pred": predicted}
