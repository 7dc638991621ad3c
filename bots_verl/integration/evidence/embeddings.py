"""Task embedding files: one vector per task of the pool, for the similarity graph of issue 36.

Format: a parquet file with two columns, ``task_id`` (int64 or string: the pool's ids as
:func:`~bots_verl.integration.evidence.task_index.normalize_task_id` reads them) and ``embedding``
(``fixed_size_list<float32>[d]``), and file metadata under the key ``bots_embeddings`` (JSON: ``method``, ``model``,
``dims``, ``source``, and whatever else the producer records). ``python -m reference_eval embed`` writes it
(:mod:`reference_eval.embed`); the trainer reads it with :func:`load_task_embeddings`, which aligns the rows to the
pool's positions and refuses, before Ray starts, ids that are missing, extra or repeated, rows of other lengths and
values that are not finite.

Only numpy and pyarrow here: the driver checks a file with the same function the trainer loads it with.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bots_verl.fileio import write_table_atomic

logger = logging.getLogger(__name__)

__all__ = [
    "METADATA_KEY",
    "EmbeddingFileError",
    "TaskEmbeddings",
    "embeddings_sha256",
    "check_reference_values",
    "load_task_embeddings",
    "pool_task_ids",
    "read_embedding_file",
    "write_embedding_file",
]

#: the parquet file-metadata key of the producer's description (JSON)
METADATA_KEY = b"bots_embeddings"


class EmbeddingFileError(ValueError):
    """A task embedding file that cannot be used for this pool (the message names the file and the problem)."""


@dataclass(frozen=True)
class TaskEmbeddings:
    """An embedding file's rows.

    Attributes:
        task_ids: one id per row, in file order (or pool order once aligned).
        vectors: ``(N, d)`` float32.
        meta: the producer's description (``method``, ``model``, ``dims``, ...).
        path: the file read.
    """

    task_ids: list[int | str]
    vectors: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @property
    def sha256(self) -> str:
        """:func:`embeddings_sha256` of the vectors (in this object's row order)."""
        return embeddings_sha256(self.vectors)


def embeddings_sha256(vectors: np.ndarray) -> str:
    """sha256 of an ``(N, d)`` array as float32 (shape included): the checkpoint fingerprint's record of it."""
    values = np.ascontiguousarray(vectors, dtype=np.float32)
    digest = hashlib.sha256(str(values.shape).encode())
    digest.update(values.tobytes())
    return digest.hexdigest()


def _id_array(task_ids: Sequence[int | str]) -> pa.Array:
    if all(isinstance(t, int | np.integer) and not isinstance(t, bool) for t in task_ids):
        return pa.array([int(t) for t in task_ids], type=pa.int64())
    if all(isinstance(t, str) and t for t in task_ids):
        return pa.array(list(task_ids), type=pa.string())
    raise EmbeddingFileError("task ids must be all integers or all non-empty strings")


def write_embedding_file(
    path: str | os.PathLike, task_ids: Sequence[int | str], vectors: np.ndarray, meta: Mapping[str, Any]
) -> Path:
    """Write an embedding file atomically (a temp file in the same folder, fsynced, renamed into place).

    Args:
        path: the output parquet.
        task_ids: one id per row.
        vectors: ``(N, d)`` finite values (stored as float32).
        meta: the producer's description; ``dims`` and ``tasks`` are added.

    Returns:
        The path written.

    Raises:
        EmbeddingFileError: for a shape or id mismatch, repeated ids or non-finite values.
    """
    values = np.asarray(vectors, dtype=np.float32)
    if values.ndim != 2 or values.shape[0] != len(task_ids) or values.shape[1] < 1:
        raise EmbeddingFileError(f"need an (N, d) array for {len(task_ids)} task ids, got shape {values.shape}")
    if len(set(task_ids)) != len(task_ids):
        raise EmbeddingFileError("task ids repeat")
    if not np.isfinite(values).all():
        raise EmbeddingFileError(f"{int((~np.isfinite(values)).any(axis=1).sum())} rows hold non-finite values")
    dims = values.shape[1]
    column = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), type=pa.float32()), dims)
    table = pa.table({"task_id": _id_array(task_ids), "embedding": column})
    description = {**dict(meta), "dims": int(dims), "tasks": len(task_ids)}
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(description, sort_keys=True).encode()})
    out = Path(path)
    if out.parent != Path():
        out.parent.mkdir(parents=True, exist_ok=True)
    write_table_atomic(table, out)
    return out


def read_embedding_file(path: str | os.PathLike) -> TaskEmbeddings:
    """Read and check an embedding file (rows in file order).

    Raises:
        EmbeddingFileError: naming the file: unreadable, missing columns, null or repeated ids, rows of different
            lengths, nulls or non-finite values.
    """
    path = Path(path)
    if not path.is_file():
        raise EmbeddingFileError(f"task embedding file not found: {path} (bots.task_embeddings)")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise EmbeddingFileError(f"{path}: not a readable parquet file: {err}") from err
    for col in ("task_id", "embedding"):
        if col not in table.column_names:
            raise EmbeddingFileError(
                f"{path}: no {col!r} column (columns: {table.column_names}); write it with "
                "python -m reference_eval embed"
            )
    if table.num_rows == 0:
        raise EmbeddingFileError(f"{path}: no rows")
    raw_ids = table.column("task_id").to_pylist()
    ids: list[int | str] = []
    for row, value in enumerate(raw_ids):
        if isinstance(value, bool) or value is None or not isinstance(value, int | str) or value == "":
            raise EmbeddingFileError(f"{path}: row {row} has an unusable task_id {value!r}")
        ids.append(value)
    if len(set(ids)) != len(ids):
        seen: set = set()
        dup = next(t for t in ids if t in seen or seen.add(t))
        raise EmbeddingFileError(f"{path}: task_id {dup!r} appears more than once")
    vectors = _vectors(table.column("embedding"), path)
    if not np.isfinite(vectors).all():
        bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        raise EmbeddingFileError(
            f"{path}: {bad.size} rows hold NaN or infinite values (e.g. task_id {ids[int(bad[0])]!r})"
        )
    meta: dict[str, Any] = {}
    raw_meta = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw_meta is not None:
        try:
            meta = json.loads(raw_meta)
        except ValueError:
            logger.warning("%s: its %s metadata is not JSON; ignored", path, METADATA_KEY.decode())
    return TaskEmbeddings(ids, vectors, meta, str(path))


def _vectors(column: pa.ChunkedArray, path: Path) -> np.ndarray:
    """The ``embedding`` column as ``(N, d)`` float32; every row must have the same length and no nulls."""
    column = column.combine_chunks()
    kind = column.type
    if not (pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        raise EmbeddingFileError(f"{path}: 'embedding' must be a list of floats per row, got {kind}")
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise EmbeddingFileError(f"{path}: row {row} has no embedding (null)")
    if pa.types.is_fixed_size_list(kind):
        dims = kind.list_size
    else:
        lengths = np.asarray(column.value_lengths().to_numpy(zero_copy_only=False))
        if lengths.size and (lengths != lengths[0]).any():
            row = int(np.flatnonzero(lengths != lengths[0])[0])
            raise EmbeddingFileError(
                f"{path}: rows have different dimensions (row 0 has {lengths[0]}, row {row} has {lengths[row]})"
            )
        dims = int(lengths[0])
    values = column.flatten()
    if values.null_count:
        raise EmbeddingFileError(f"{path}: 'embedding' holds null values")
    if dims < 1:
        raise EmbeddingFileError(f"{path}: embeddings have no dimensions")
    try:
        flat = values.to_numpy(zero_copy_only=False).astype(np.float32)
    except (TypeError, ValueError, pa.ArrowException) as err:
        raise EmbeddingFileError(f"{path}: 'embedding' values are not numbers ({values.type})") from err
    return flat.reshape(len(column), dims)


def load_task_embeddings(
    path: str | os.PathLike,
    pool_task_ids: Sequence[int | str],
    file_task_ids: Sequence[int | str] | None = None,
) -> TaskEmbeddings:
    """Read an embedding file and align its rows to the pool's positions.

    Args:
        path: the embedding file (``bots.task_embeddings``).
        pool_task_ids: the task id of every position of the training pool, in order.
        file_task_ids: every task id of the train files the pool was read from: rows for these tasks that verl left
            out of the pool (``data.train_max_samples``, ``filter_overlong_prompts``) are dropped, not refused.

    Returns:
        The embeddings with ``task_ids == list(pool_task_ids)`` and ``vectors[i]`` the row of position ``i``.

    Raises:
        EmbeddingFileError: when a pool task has no row, the file has rows for tasks outside the pool, or the file
            itself is malformed (:func:`read_embedding_file`).
    """
    emb = read_embedding_file(path)
    row_of = {tid: row for row, tid in enumerate(emb.task_ids)}
    missing = [tid for tid in pool_task_ids if tid not in row_of]
    if missing:
        kinds = {type(t).__name__ for t in emb.task_ids[:1]} | {type(t).__name__ for t in missing[:1]}
        hint = f" (ids of types {sorted(kinds)}: int and str ids never match)" if len(kinds) > 1 else ""
        raise EmbeddingFileError(
            f"{path}: {len(missing)} of the pool's {len(pool_task_ids)} tasks have no embedding, e.g. "
            f"{missing[:3]}{hint}; embed the same train file (python -m reference_eval embed --data ...)"
        )
    known = set(pool_task_ids) if file_task_ids is None else set(pool_task_ids) | set(file_task_ids)
    foreign = [t for t in emb.task_ids if t not in known]
    if foreign:
        raise EmbeddingFileError(
            f"{path}: {len(foreign)} rows are for tasks that are not in the training data, e.g. {foreign[:3]}; "
            "embed the train file the run uses (python -m reference_eval embed --data <data.train_files>)"
        )
    order = np.fromiter((row_of[tid] for tid in pool_task_ids), dtype=np.int64, count=len(pool_task_ids))
    return TaskEmbeddings(list(pool_task_ids), emb.vectors[order], emb.meta, emb.path)


def pool_task_ids(files: Sequence[str], path: Sequence[str]) -> list[int | str]:
    """The task ids of every row of the train parquet files, in file order (only the id's root column is read).

    Raises:
        ValueError: for a missing column or an unusable id.
    """
    from .task_index import task_id_of

    ids: list[int | str] = []
    for file in files:
        table = pq.read_table(file, columns=[path[0]])
        ids.extend(task_id_of({path[0]: v}, path) for v in table.column(path[0]).to_pylist())
    return ids


def check_reference_values(reference: np.ndarray, columns: Sequence[str], source: str) -> int:
    """Refuse reference columns that hold no value at all; returns the number of tasks with every column finite.

    Raises:
        ValueError: for a column that is NaN on every task (a labelled fraction of 0, or a failed merge): BOTS would
            otherwise fall back to its flat prior on every task without a word.
    """
    for j, column in enumerate(columns):
        if not np.isfinite(reference[:, j]).any():
            raise ValueError(
                f"reference column {column!r} of {source} is NaN on all {reference.shape[0]} tasks (no task was "
                "labelled, or its merge found no results); with no references at all use bots.selector=bots_noref"
            )
    return int(np.isfinite(reference).all(axis=1).sum())
