"""Answer extraction shared by the domain scorers.

GURU trains with a think-aware chat template, so the final answer is whatever follows the last ``</think>``
(guru.md §3). Every helper returns ``None`` instead of raising when the model output has no usable answer, so that
the scorers can turn malformed output into a plain failure.
"""

from __future__ import annotations

import re

__all__ = ["after_think", "last_boxed", "last_answer_tag", "last_code_block"]

# Every pattern here is unambiguous (each character can be matched one way only), so matching is linear; the scans
# below never restart a search from each position of a long run (128 KB of "<answer>" tags, a fence followed by 64k
# spaces), which is what made the older regular expressions quadratic.
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
# The rest of a fence's opening line: optional blanks, an optional language tag (any word), optional blanks, newline.
_FENCE_HEADER = re.compile(r"[ \t]*(?:([A-Za-z0-9_+-]+)[ \t]*)?\n")


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


def _last_match(pattern: re.Pattern[str], text: str, end: int) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text[:end]`` (one linear scan)."""
    last = None
    for last in pattern.finditer(text, 0, end):  # noqa: B007 - the loop only advances to the last match
        pass
    return last


def last_answer_tag(text: str) -> str | None:
    """Return the stripped content of the last complete ``<answer>...</answer>`` pair, or ``None``.

    The pair is the last closing tag and the last opening tag before it (so nested or repeated opening tags leave
    the innermost content); linear in the length of ``text``.
    """
    close = _last_match(_ANSWER_CLOSE, text, len(text))
    if close is None:
        return None
    opening = _last_match(_ANSWER_OPEN, text, close.start())
    if opening is None:
        return None
    inner = text[opening.end() : close.start()].strip()
    return inner or None


def _code_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, code) of every complete fenced block, left to right, in one linear pass."""
    blocks = []
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return blocks
        header = _FENCE_HEADER.match(text, start + 3)
        if header is None:  # not an opening fence (e.g. a closing one or inline code): look further
            pos = start + 1
            continue
        end = text.find("```", header.end())
        if end < 0:
            return blocks
        blocks.append((header.group(1) or "", text[header.end() : end]))
        pos = end + 3


def last_code_block(text: str) -> str | None:
    """Return the last fenced code block, preferring Python-tagged fences.

    The last block is taken (not all blocks joined) because models often show example input or a draft before the
    final program; the final answer is conventionally the last Python block.

    Args:
        text: the model output (already cut after ``</think>``).

    Returns:
        The code, or ``None`` when there is no complete fence.
    """
    blocks = _code_blocks(text)
    if not blocks:
        return None
    python_blocks = [code for lang, code in blocks if lang.lower() in ("python", "python3", "py")]
    untagged = [code for lang, code in blocks if not lang]
    chosen = python_blocks or untagged
    if not chosen:
        return None
    code = chosen[-1].strip("\n")
    return code if code.strip() else None
