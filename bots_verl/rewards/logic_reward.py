"""Logic rewards: exact-match checkers for GURU's ordering, graph, ARC/BARC and zebra puzzles.

Every GURU logic prompt asks for the answer inside ``<answer> ... </answer>`` (guru.md §2.3); the last such pair after
``</think>`` is parsed. Ground truths may arrive either as the structure GURU stores (list, dict, nested list) or as
the JSON string our data preparation writes (one parquet column must have one type across a domain's files).

Success (``acc``) is always all-or-nothing. The zebra checker can put the fraction of correct cells into ``score``
(``partial_credit=True``, GURU's training reward); by default the score is binary like the paper's reward, and in
either case ``acc`` is true only when every cell is right.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
from collections.abc import Callable
from typing import Any

from bots_verl.rewards._extract import after_think, last_answer_tag

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

__all__ = ["score_arc", "score_graph", "score_ordering", "score_zebra", "parse_structured"]

# Upper bound on the parsed answer text: a 30x30 ARC grid is < 3k chars; anything far larger is not an answer and
# literal_eval on it wastes time.
_MAX_ANSWER_CHARS = 20_000


def _fail(pred: Any = None) -> dict[str, Any]:
    return {"score": 0.0, "acc": False, "pred": pred}


def _result(correct: bool, pred: Any) -> dict[str, Any]:
    return {"score": 1.0 if correct else 0.0, "acc": correct, "pred": pred}


def _judge(solution_str: Any, compare: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Extract the ``<answer>`` and compare it; malformed or hostile output is a failure, never an exception.

    ``compare`` sees model-controlled structures (deeply nested lists, huge numbers), so anything it raises
    (RecursionError, MemoryError, ...) counts as a wrong answer.
    """
    if not isinstance(solution_str, str):
        return _fail()
    answer = last_answer_tag(after_think(solution_str))
    if answer is None:
        return _fail()
    try:
        return compare(answer)
    except Exception as err:  # the answer's shape, not a bug in the data: score 0
        logger.debug("logic answer could not be compared: %s", type(err).__name__)
        return _fail(answer)


def parse_structured(text: str) -> Any:
    """Parse a JSON or Python literal (lists, dicts, strings, numbers); ``None`` when it is neither.

    Models write both ``["a", "b"]`` and ``['a', 'b']``, so JSON is tried first and Python literals second.
    """
    if len(text) > _MAX_ANSWER_CHARS:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _ground_truth(ground_truth: Any, expected: type | tuple[type, ...], what: str) -> Any:
    """Decode a ground truth stored as JSON text and check its type (a bad ground truth is a data error: raise)."""
    value = ground_truth
    if isinstance(value, str) and expected is not str:
        try:
            value = json.loads(value)
        except ValueError as err:
            raise ValueError(f"{what} ground truth is not valid JSON: {ground_truth[:200]!r}") from err
    if hasattr(value, "tolist"):  # numpy arrays from pandas-read parquet
        value = value.tolist()
    if not isinstance(value, expected):
        raise ValueError(f"{what} ground truth must be {expected}, got {type(value).__name__}")
    return value


def _norm_cell(value: Any) -> str:
    return " ".join(str(value).split()).lower()


def score_ordering(solution_str: Any, ground_truth: Any, **_: Any) -> dict[str, Any]:
    """Ordering puzzle: the answer list must equal the ground-truth order exactly (case and spacing ignored).

    Args:
        solution_str: the model response.
        ground_truth: list of item names (or its JSON text).

    Returns:
        ``{"score", "acc", "pred"}``.
    """
    truth = [_norm_cell(item) for item in _ground_truth(ground_truth, list, "ordering")]

    def compare(answer: str) -> dict[str, Any]:
        parsed = parse_structured(answer)
        if not isinstance(parsed, list | tuple):
            return _fail(answer)
        return _result([_norm_cell(item) for item in parsed] == truth, answer)

    return _judge(solution_str, compare)


def score_graph(solution_str: Any, ground_truth: Any, **_: Any) -> dict[str, Any]:
    """Graph search: the path letters in ``<answer>`` must equal the ground truth (case-insensitive, spaces ignored).

    Args:
        solution_str: the model response.
        ground_truth: the path as a string of node letters.

    Returns:
        ``{"score", "acc", "pred"}``.
    """
    truth = "".join(_ground_truth(ground_truth, str, "graph").split()).lower()

    def compare(answer: str) -> dict[str, Any]:
        # Models sometimes quote the path or separate nodes with commas/arrows; only letters carry the answer.
        letters = "".join(char for char in answer if char.isalnum()).lower()
        return _result(letters == truth, answer)

    return _judge(solution_str, compare)


def _as_cell(cell: Any) -> int | None:
    """An int cell; a float only when it is finite and whole (``NaN``, ``Infinity``, ``1e999`` and bools are not)."""
    if isinstance(cell, bool):
        return None
    if isinstance(cell, int):
        return cell
    if isinstance(cell, float) and math.isfinite(cell) and cell.is_integer():
        return int(cell)
    return None


def _as_grid(value: Any) -> list[list[int]] | None:
    """A rectangular-or-ragged 2-D list of ints, or ``None`` for anything else."""
    if not isinstance(value, list | tuple) or not value:
        return None
    grid = []
    for row in value:
        if not isinstance(row, list | tuple):
            return None
        cells = [_as_cell(cell) for cell in row]
        if any(cell is None for cell in cells):
            return None
        grid.append(cells)
    return grid


def score_arc(solution_str: Any, ground_truth: Any, **_: Any) -> dict[str, Any]:
    """ARC-AGI / BARC: the 2-D grid in ``<answer>`` must equal the ground-truth grid cell for cell (same shape).

    Args:
        solution_str: the model response.
        ground_truth: 2-D list of ints (or its JSON text).

    Returns:
        ``{"score", "acc", "pred"}``.
    """
    truth = _as_grid(_ground_truth(ground_truth, list, "ARC"))
    if truth is None:
        raise ValueError("ARC ground truth must be a non-empty 2-D list of integers")

    def compare(answer: str) -> dict[str, Any]:
        grid = _as_grid(parse_structured(answer))
        return _result(grid is not None and grid == truth, answer)

    return _judge(solution_str, compare)


def score_zebra(solution_str: Any, ground_truth: Any, partial_credit: bool = False, **_: Any) -> dict[str, Any]:
    """Zebra puzzle: the ``{"header": [...], "rows": [[...]]}`` grid in ``<answer>`` compared cell by cell.

    Args:
        solution_str: the model response.
        ground_truth: dict with ``header`` and ``rows`` (or its JSON text).
        partial_credit: put the fraction of correct cells into ``score`` (GURU's reward) instead of 0/1.

    Returns:
        ``{"score", "acc", "pred"}``; ``acc`` is true only when every cell is right.
    """
    truth = _ground_truth(ground_truth, dict, "zebra")
    rows = truth.get("rows")
    if hasattr(rows, "tolist"):
        rows = rows.tolist()
    if not isinstance(rows, list) or not rows or not all(isinstance(row, list | tuple) and row for row in rows):
        raise ValueError("zebra ground truth needs a non-empty 'rows' list of lists")
    total = sum(len(row) for row in rows)

    def compare(answer: str) -> dict[str, Any]:
        parsed = parse_structured(answer)
        pred_rows = parsed.get("rows") if isinstance(parsed, dict) else None
        if not isinstance(pred_rows, list | tuple):
            return _fail(answer)
        correct = 0
        for i, row in enumerate(rows):
            pred_row = pred_rows[i] if i < len(pred_rows) else None
            if not isinstance(pred_row, list | tuple):
                continue
            for j, cell in enumerate(row):
                if j < len(pred_row) and _norm_cell(pred_row[j]) == _norm_cell(cell):
                    correct += 1
        # Extra rows or cells in the prediction make it wrong even if the expected cells all match.
        exact = (
            correct == total
            and len(pred_rows) == len(rows)
            and all(len(p) == len(t) for p, t in zip(pred_rows, rows, strict=False))
        )
        score = correct / total if partial_credit else float(exact)
        return {"score": score, "acc": exact, "pred": answer}

    return _judge(solution_str, compare)
