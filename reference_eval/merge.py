"""``merge``: add ``successes / attempts`` as a float column to the parquet, matched by stable task id.

Rules, each a fix of a failure seen in the upstream tool:

- rows without a result get NaN and are counted, never 0.0 (0.0 means "the reference never solves it");
- rows are matched by task id, not by prompt text (duplicate prompts would collide), and each result's stored prompt
  hash is checked against the row, so an id that now points at another prompt is caught;
- results for ids the parquet lacks, duplicate results, and duplicate prompts are reported;
- results from different models or sampling settings are never combined into one column;
- the output is a new file written atomically (temp file + fsync + rename); replacing the input needs
  ``in_place=True`` and first copies the input to a backup.

The column's Arrow field metadata records the model, sampling settings and scorer under ``reference_eval``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .data import DataError, duplicate_prompt_groups, prompt_hash_of, read_table, task_ids
from .results import ResultsError, read_results, record_key

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["MergeReport", "merge", "atomic_write_table"]


@dataclass
class MergeReport:
    """What merge did; every count a user should look at before trusting the column.

    Attributes:
        column: The column written.
        rows: Rows in the parquet.
        with_results: Rows that got a pass rate.
        missing: Rows left NaN (no result, or a skipped prompt mismatch).
        prompt_mismatches: Rows whose result was collected for a different prompt under the same id.
        unknown_ids: Result ids not present in the parquet (ignored).
        duplicate_results: Ids with more than one (identical) result record (deduplicated).
        duplicate_prompt_rows: Rows whose prompt repeats another row's.
        attempts: The distinct attempt counts per prompt (normally one value, n).
        model: The reference model.
        settings: The sampling and scorer settings.
        out: The file written.
        backup: The backup of the input (in-place only).
        examples: A few example ids per problem kind.
    """

    column: str
    rows: int
    with_results: int
    missing: int
    prompt_mismatches: int
    unknown_ids: int
    duplicate_results: int
    duplicate_prompt_rows: int
    attempts: list[int]
    model: str | None
    settings: dict[str, Any]
    out: str
    backup: str | None = None
    examples: dict[str, list[Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-ready dict."""
        return asdict(self)


def atomic_write_table(table: pa.Table, path: str | os.PathLike) -> None:
    """Write a parquet file atomically: a temp file in the same directory, fsync, rename, fsync the directory.

    Args:
        table: The table.
        path: The destination.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    # The rename itself is only durable once the directory entry is flushed.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _load_results(paths: list[str | os.PathLike]) -> tuple[dict[tuple[str, Any], dict[str, Any]], int, list, dict]:
    by_id: dict[tuple[str, Any], dict[str, Any]] = {}
    duplicates: list[Any] = []
    settings: dict[str, Any] = {}
    settings_ids: dict[str, str] = {}
    for path in paths:
        records = read_results(path)
        if not records:
            logger.warning("%s holds no results", path)
            continue
        sid = records[0]["settings_id"]
        settings_ids[str(path)] = sid
        settings = {k: records[0].get(k) for k in ("model", "sampling", "scorer", "settings_id")}
        for rec in records:
            if not isinstance(rec["attempts"], int) or rec["attempts"] < 1:
                raise ResultsError(f"{path}: task {rec['task_id']!r} has attempts={rec['attempts']!r}")
            # fractional under the 'score' success rule (or a fractional 'acc'), so any number in [0, attempts]
            successes = rec["successes"]
            if (
                isinstance(successes, bool)
                or not isinstance(successes, int | float)
                or not 0 <= successes <= rec["attempts"]
            ):
                raise ResultsError(f"{path}: task {rec['task_id']!r} has successes={rec['successes']!r}")
            key = record_key(rec["task_id"])
            prev = by_id.get(key)
            if prev is None:
                by_id[key] = rec
                continue
            duplicates.append(rec["task_id"])
            same = (prev["successes"], prev["attempts"], prev.get("prompt_sha256")) == (
                rec["successes"],
                rec["attempts"],
                rec.get("prompt_sha256"),
            )
            if not same:
                raise ResultsError(
                    f"task {rec['task_id']!r} has conflicting results "
                    f"({prev['successes']}/{prev['attempts']} vs {rec['successes']}/{rec['attempts']}); "
                    "were two runs merged into one file?"
                )
    if len(set(settings_ids.values())) > 1:
        raise ResultsError(
            "results files come from different models or sampling settings and cannot form one column: "
            + ", ".join(f"{p} ({s})" for p, s in settings_ids.items())
        )
    return by_id, len(duplicates), duplicates[:5], settings


def merge(
    data_path: str | os.PathLike,
    results_paths: list[str | os.PathLike],
    column: str,
    *,
    out: str | os.PathLike | None = None,
    in_place: bool = False,
    force: bool = False,
    replace_column: bool = False,
    id_column: str = "task_id",
    prompt_column: str = "prompt",
    skip_prompt_mismatch: bool = False,
) -> MergeReport:
    """Add a pass-rate column to a parquet from one or more results files of the same settings.

    Args:
        data_path: The input parquet.
        results_paths: Results files (e.g. one per shard), all from the same model and settings.
        column: The new column's name, e.g. ``qwen2.5_7b_pass_rate``.
        out: The output parquet (a new file). Exactly one of ``out`` and ``in_place``.
        in_place: Replace ``data_path`` (after copying it to ``<data_path>.<timestamp>.bak``).
        force: Overwrite an existing ``out``.
        replace_column: Overwrite the column if the parquet already has it.
        id_column: The stable task id column (dotted names read struct fields).
        prompt_column: The chat-messages column used to verify the results' prompt hashes.
        skip_prompt_mismatch: Leave rows whose result was for another prompt as NaN instead of failing.

    Returns:
        A :class:`MergeReport`.

    Raises:
        DataError: On bad arguments or input (before anything is written).
        ResultsError: On corrupt, conflicting or mixed-settings results, or prompt mismatches.
    """
    data_path = Path(data_path)
    if (out is None) == (not in_place):
        raise DataError("give exactly one of an output path (--out) or --in-place")
    dest = data_path if in_place else Path(out)  # type: ignore[arg-type]
    if not in_place and dest.resolve() == data_path.resolve():
        raise DataError(f"--out is the input file {data_path}; use --in-place to replace it (a backup is kept)")
    if not in_place and dest.exists() and not force:
        raise DataError(f"{dest} exists; pass --force to overwrite it")
    if not results_paths:
        raise DataError("no results files given")
    for p in results_paths:
        if not Path(p).is_file():
            raise DataError(f"results file not found: {p}")

    table = read_table(data_path)
    if column in table.column_names and not replace_column:
        raise DataError(f"{data_path} already has a column {column!r}; pass --replace-column to overwrite it")
    ids = task_ids(table, id_column)
    hashes: list[str] | None = None
    if prompt_column in table.column_names:
        hashes = [prompt_hash_of(p) for p in table.column(prompt_column).to_pylist()]
    else:
        logger.warning("no %r column: cannot verify that results belong to the same prompts", prompt_column)

    by_id, n_dup, dup_examples, settings = _load_results(list(results_paths))

    values: list[float] = []
    missing_ids, mismatch_ids = [], []
    attempts: set[int] = set()
    for i, task_id in enumerate(ids):
        rec = by_id.get(record_key(task_id))
        if rec is None:
            values.append(math.nan)
            missing_ids.append(task_id)
            continue
        if hashes is not None and rec.get("prompt_sha256") not in (None, hashes[i]):
            values.append(math.nan)
            mismatch_ids.append(task_id)
            continue
        attempts.add(rec["attempts"])
        values.append(rec["successes"] / rec["attempts"])
    if mismatch_ids and not skip_prompt_mismatch:
        raise ResultsError(
            f"{len(mismatch_ids)} ids have results collected for a different prompt (e.g. {mismatch_ids[:5]}); "
            "the ids are not stable between the collected file and this one. Pass --skip-prompt-mismatch to leave "
            "those rows NaN."
        )
    id_keys = {record_key(t) for t in ids}
    unknown = [rec["task_id"] for key, rec in by_id.items() if key not in id_keys]
    # Malformed prompts hash to ""; they are not duplicates of each other.
    dup_groups = duplicate_prompt_groups([h or f"row{i}" for i, h in enumerate(hashes)]) if hashes is not None else []

    n_missing = sum(1 for v in values if math.isnan(v))
    report = MergeReport(
        column=column,
        rows=len(ids),
        with_results=len(ids) - n_missing,
        missing=n_missing,
        prompt_mismatches=len(mismatch_ids),
        unknown_ids=len(unknown),
        duplicate_results=n_dup,
        duplicate_prompt_rows=sum(len(g) - 1 for g in dup_groups),
        attempts=sorted(attempts),
        model=settings.get("model"),
        settings=settings,
        out=str(dest),
        examples={
            "missing": missing_ids[:5],
            "prompt_mismatches": mismatch_ids[:5],
            "unknown_ids": unknown[:5],
            "duplicate_results": dup_examples,
        },
    )
    if len(attempts) > 1:
        logger.warning("pass rates over different attempt counts %s; values are not on one grid", sorted(attempts))

    meta = {b"reference_eval": json.dumps({**settings, "rows_with_results": report.with_results}).encode()}
    new_field = pa.field(column, pa.float64(), nullable=True, metadata=meta)
    array = pa.array(values, type=pa.float64())
    if column in table.column_names:
        table = table.set_column(table.column_names.index(column), new_field, array)
    else:
        table = table.append_column(new_field, array)

    if in_place:
        backup = data_path.with_name(f"{data_path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
        if backup.exists():
            raise DataError(f"backup {backup} already exists; retry in a second")
        shutil.copy2(data_path, backup)
        report.backup = str(backup)
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_table(table, dest)
    logger.info("merge: %s", json.dumps(report.to_dict(), default=str))
    if n_missing:
        logger.warning("%d of %d rows have no result and are NaN in %r", n_missing, len(ids), column)
    return report
