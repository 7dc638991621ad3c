r"""Math reward: the last ``\boxed{}`` answer, checked symbolically with math-verify.

GURU's math prompts end with "Please output the final answer within \boxed{}" and its reference pass rates count a
sample as solved when the reward is 1 (guru.md §3-§4), so the score here is binary: 1.0 when the boxed answer is
equivalent to the ground truth, else 0.0 (``acc`` is the same bit). A cheap normalised string comparison runs first, in
the caller's thread, so that the common exact cases never reach sympy; everything else goes to
:mod:`bots_verl.rewards.math_verifier`, whose worker processes enforce a hard time limit from any thread.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from bots_verl.rewards._extract import after_think, last_boxed
from bots_verl.rewards.math_verifier import symbolic_equal

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

__all__ = ["compute_score", "normalize_answer"]

# Seconds one answer's symbolic check may take in all (a worker overrunning it is killed).
DEFAULT_TIMEOUT_S = 5.0
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


def compute_score(
    solution_str: Any, ground_truth: Any, timeout_s: float = DEFAULT_TIMEOUT_S, **_: Any
) -> dict[str, Any]:
    r"""Score one math response.

    Args:
        solution_str: the decoded model response.
        ground_truth: the reference answer (LaTeX string, without ``\boxed``).
        timeout_s: wall-clock limit of the symbolic check.

    Returns:
        ``{"score": 1.0 | 0.0, "acc": bool, "pred": str | None}``; malformed output (no box, not a string, too long,
        too slow to check) scores 0.

    Raises:
        ValueError: empty or non-string ground truth.
        ImportError: math-verify is not installed.
    """
    if not isinstance(ground_truth, str) or not ground_truth.strip():
        raise ValueError(f"math ground truth must be a non-empty string, got {type(ground_truth).__name__}")
    if not isinstance(solution_str, str):
        return {"score": 0.0, "acc": False, "pred": None}
    predicted = last_boxed(after_think(solution_str))
    if predicted is None or len(predicted) > _MAX_ANSWER_CHARS:
        return {"score": 0.0, "acc": False, "pred": predicted}
    correct = normalize_answer(predicted) == normalize_answer(ground_truth) or symbolic_equal(
        ground_truth, predicted, timeout_s
    )
    return {"score": 1.0 if correct else 0.0, "acc": correct, "pred": predicted}
