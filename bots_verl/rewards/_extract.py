"""Answer extraction shared by the domain scorers.

GURU trains with a think-aware chat template, so the final answer is whatever follows the last ``</think>``
(guru.md §3). Every helper returns ``None`` instead of raising when the model output has no usable answer, so that
the scorers can turn malformed output into a plain failure.
"""

from __future__ import annotations

import re

__all__ = ["after_think", "last_boxed", "last_answer_tag", "last_code_block"]

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
# ```python ... ``` or a bare ``` ... ``` fence; the language tag is optional and may be any word.
_CODE_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def after_think(text: str) -> str:
    """Return the part of ``text`` after the last ``</think>`` (all of it when there is none)."""
    cut = text.rfind("</think>")
    return text if cut < 0 else text[cut + len("</think>") :]


def last_boxed(text: str) -> str | None:
    r"""Return the content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, braces balanced.

    Args:
        text: the model output (already cut after ``</think>``).

    Returns:
        The inner LaTeX, stripped, or ``None`` when there is no complete box (an unbalanced brace counts as none).
    """
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        # "\boxed 5" (no braces) is legal LaTeX for a one-token argument.
        tail = text[start:].split(None, 1)
        if len(tail) == 2 and tail[0] in ("\\boxed", "\\fbox"):
            token = tail[1].split("$")[0].strip()
            return token or None
        return None
    depth = 0
    for pos in range(brace, len(text)):
        char = text[pos]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                inner = text[brace + 1 : pos].strip()
                return inner or None
    return None


def last_answer_tag(text: str) -> str | None:
    """Return the stripped content of the last complete ``<answer>...</answer>`` pair, or ``None``."""
    matches = _ANSWER_TAG.findall(text)
    if not matches:
        return None
    inner = matches[-1].strip()
    return inner or None


def last_code_block(text: str) -> str | None:
    """Return the last fenced code block, preferring Python-tagged fences.

    The last block is taken (not all blocks joined) because models often show example input or a draft before the
    final program; the final answer is conventionally the last Python block.

    Args:
        text: the model output (already cut after ``</think>``).

    Returns:
        The code, or ``None`` when there is no complete fence.
    """
    blocks = _CODE_FENCE.findall(text)
    if not blocks:
        return None
    python_blocks = [code for lang, code in blocks if lang.lower() in ("python", "python3", "py")]
    untagged = [code for lang, code in blocks if not lang]
    chosen = python_blocks or untagged
    if not chosen:
        return None
    code = chosen[-1].strip("\n")
    return code if code.strip() else None
