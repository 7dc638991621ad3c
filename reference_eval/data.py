"""Reading and validating a verl-format parquet for reference evaluation.

A verl dataset row carries ``data_source`` (the reward router key), ``prompt`` (a list of chat messages),
``reward_model.ground_truth`` and ``extra_info`` (a struct, usually with ``index``). BOTS additionally needs a stable
unique task id per row; the data prep writes it as ``task_id``, and ``extra_info.index`` is the fallback.

Everything here runs before any generation: a malformed file must fail fast with a message that names the column and
the row, never after hours of sampling.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = [
    "DataError",
    "Task",
    "read_table",
    "column_values",
    "decode_json_cell",
    "task_ids",
    "load_tasks",
    "prompt_sha256",
    "prompt_hash_of",
    "duplicate_prompt_groups",
]

TaskId = int | str


class DataError(ValueError):
    """The input data cannot be used as asked (missing column, bad prompt, duplicate ids, ...)."""


@dataclass(frozen=True)
class Task:
    """One row to evaluate.

    Attributes:
        task_id: The stable unique id of the row (int or str).
        row: The row's position in the parquet (for error messages only; never used as identity).
        data_source: The reward router key.
        prompt: The chat messages, ``[{"role": ..., "content": ...}, ...]``.
        ground_truth: ``reward_model.ground_truth`` as stored (its type depends on the data source).
        extra_info: ``extra_info`` as a dict, or None when the file has no such column.
        prompt_sha256: A hash of the canonical prompt, stored with each result so that merge can tell an id that now
            points at a different prompt.
    """

    task_id: TaskId
    row: int
    data_source: str
    prompt: list[dict[str, Any]]
    ground_truth: Any
    extra_info: dict[str, Any] | None
    prompt_sha256: str


def read_table(path: str | os.PathLike) -> pa.Table:
    """Read a parquet file with pyarrow (no pandas round trip, so nested types survive unchanged).

    Args:
        path: The parquet file.

    Returns:
        The table.

    Raises:
        DataError: If the file does not exist, is a directory, or is not a readable parquet file (empty, truncated,
            garbage), naming the file.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a directory, not a parquet file")
    if not path.is_file():
        raise DataError(f"parquet file not found: {path}")
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise DataError(f"{path}: not a readable parquet file (empty, truncated or not parquet?): {err}") from err


def decode_json_cell(text: str, row: int, column: str) -> Any:
    """Decode a cell that holds JSON text (some GURU variants store ``extra_info``/``reward_model`` that way).

    Raises:
        DataError: Naming the row and column if the text is not JSON or is nested too deeply to decode.
    """
    try:
        return json.loads(text)
    except ValueError as err:
        raise DataError(f"row {row}: {column!r} is a string that is not JSON ({err})") from None
    except RecursionError:
        raise DataError(f"row {row}: {column!r} holds JSON nested too deeply to decode") from None


def column_values(table: pa.Table, name: str) -> list[Any]:
    """Return a column as Python values; a dotted name (``extra_info.index``) reads a field of a struct column.

    Args:
        table: The table.
        name: A top-level column name, or ``column.field[.field...]``.

    Returns:
        One value per row (None where a struct or field is null).

    Raises:
        DataError: If the column or field does not exist.
    """
    if name in table.column_names:
        return table.column(name).to_pylist()
    head, _, rest = name.partition(".")
    if not rest or head not in table.column_names:
        raise DataError(f"column {name!r} not found; the file has columns {table.column_names}")
    values = []
    for i, value in enumerate(table.column(head).to_pylist()):
        for part in rest.split("."):
            if value is None:
                break
            if isinstance(value, str):
                # Some GURU variants store extra_info / reward_model as JSON strings so all files share one schema.
                value = decode_json_cell(value, i, head)
            if not isinstance(value, dict):
                raise DataError(f"row {i}: cannot read field {part!r} of {name!r} from a {type(value).__name__}")
            if part not in value:
                raise DataError(f"row {i}: field {name!r} not found (available: {sorted(value)})")
            value = value[part]
        values.append(value)
    return values


def _normalize_id(value: Any, row: int, id_column: str) -> TaskId:
    # bool is an int subclass but never a sensible id; floats only when integral (pandas turns int columns with
    # nulls into float64), and NaN/None means the row has no id, which must not be papered over.
    if isinstance(value, bool) or value is None:
        raise DataError(f"row {row}: id column {id_column!r} has no usable value ({value!r})")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or not value.is_integer():
            raise DataError(f"row {row}: id column {id_column!r} has a non-integer value {value!r}")
        return int(value)
    if isinstance(value, str) and value:
        return value
    raise DataError(f"row {row}: id column {id_column!r} has an unsupported value {value!r} ({type(value).__name__})")


def task_ids(table: pa.Table, id_column: str) -> list[TaskId]:
    """Read and check the task ids of every row.

    Args:
        table: The table.
        id_column: The id column (``task_id``, or a dotted field such as ``extra_info.index``).

    Returns:
        One id per row.

    Raises:
        DataError: If the column is missing, a value is unusable, or an id repeats (a repeated id cannot be mapped back
            to one row, so it is an error rather than a warning).
    """
    try:
        raw = column_values(table, id_column)
    except DataError as err:
        hint = " (pass --id-column extra_info.index to use verl's index instead)" if id_column == "task_id" else ""
        raise DataError(f"{err}{hint}") from err
    ids = [_normalize_id(v, i, id_column) for i, v in enumerate(raw)]
    counts = Counter(ids)
    dups = {k: c for k, c in counts.items() if c > 1}
    if dups:
        example = ", ".join(f"{k!r}x{c}" for k, c in list(dups.items())[:5])
        raise DataError(f"id column {id_column!r} is not unique: {len(dups)} ids repeat (e.g. {example})")
    return ids


def prompt_sha256(prompt: list[dict[str, Any]]) -> str:
    """Hash the prompt messages canonically (sorted keys, no whitespace), so equal prompts give equal hashes."""
    canonical = json.dumps(prompt, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def prompt_hash_of(value: Any) -> str:
    """The prompt hash of a raw ``prompt`` cell, over role and content only (as collect stores it); "" if malformed.

    Other message keys (e.g. a null ``name`` that some writers add) do not change what the model sees, so they must
    not make merge report a mismatch.
    """
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        return ""
    return prompt_sha256([{"role": m.get("role"), "content": m.get("content")} for m in value])


def _check_prompt(value: Any, row: int, prompt_column: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise DataError(
            f"row {row}: {prompt_column!r} must be a non-empty list of chat messages "
            f"[{{'role': ..., 'content': ...}}], got {type(value).__name__}"
        )
    for msg in value:
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str) or not isinstance(msg.get("content"), str):
            raise DataError(f"row {row}: every message in {prompt_column!r} needs string 'role' and 'content': {msg!r}")
    return [{"role": m["role"], "content": m["content"]} for m in value]


def load_tasks(
    path: str | os.PathLike,
    id_column: str = "task_id",
    prompt_column: str = "prompt",
    ground_truth_column: str = "reward_model.ground_truth",
) -> list[Task]:
    """Load and validate every row of a verl-format parquet as a :class:`Task`.

    Args:
        path: The parquet file.
        id_column: The stable id column (dotted names read struct fields).
        prompt_column: The chat-messages column.
        ground_truth_column: The ground-truth column (dotted).

    Returns:
        The tasks in file order.

    Raises:
        DataError: On a missing column, a malformed prompt, a missing data_source or ground truth, or repeated ids.
    """
    table = read_table(path)
    try:
        return _tasks_of(table, id_column, prompt_column, ground_truth_column)
    except DataError as err:
        # Row and column problems are found deep inside; the file is named once, here.
        raise DataError(f"{path}: {err}") from None


def _tasks_of(table: pa.Table, id_column: str, prompt_column: str, ground_truth_column: str) -> list[Task]:
    if table.num_rows == 0:
        raise DataError("the parquet has no rows")
    for required in ("data_source", prompt_column):
        if required not in table.column_names:
            raise DataError(f"required column {required!r} not found; the file has {table.column_names}")
    ids = task_ids(table, id_column)
    sources = table.column("data_source").to_pylist()
    prompts = table.column(prompt_column).to_pylist()
    truths = column_values(table, ground_truth_column)
    extras = table.column("extra_info").to_pylist() if "extra_info" in table.column_names else [None] * len(ids)
    tasks = []
    for i in range(table.num_rows):
        if not isinstance(sources[i], str) or not sources[i]:
            raise DataError(f"row {i}: data_source is empty or not a string ({sources[i]!r})")
        if truths[i] is None:
            raise DataError(f"row {i}: {ground_truth_column!r} is null")
        prompt = _check_prompt(prompts[i], i, prompt_column)
        extra = extras[i]
        if isinstance(extra, str):
            extra = decode_json_cell(extra, i, "extra_info")
        if extra is not None and not isinstance(extra, dict):
            raise DataError(f"row {i}: extra_info must be a struct or a JSON object, got {type(extra).__name__}")
        tasks.append(Task(ids[i], i, sources[i], prompt, truths[i], extra, prompt_sha256(prompt)))
    return tasks


def duplicate_prompt_groups(hashes: list[str]) -> list[list[int]]:
    """Group row positions whose prompts are identical.

    Args:
        hashes: One prompt hash per row.

    Returns:
        The groups (row positions) of size > 1, in first-occurrence order.
    """
    groups: dict[str, list[int]] = {}
    for i, h in enumerate(hashes):
        groups.setdefault(h, []).append(i)
    return [rows for rows in groups.values() if len(rows) > 1]
