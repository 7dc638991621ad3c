"""Task identity: dataset positions <-> stable task ids, and reference pass rates read from the train parquet.

The posterior is indexed by the **position** of a row in verl's train dataset, because that is what a torch sampler
yields. Positions are not stable: ``data.train_max_samples`` subsamples, ``filter_overlong_prompts`` drops rows and a
regenerated file may be reordered. So every row also carries a **task id** (``bots.task_id_field``, default
``extra_info.index``) that data preparation writes once and never changes. Outcomes read back from TransferQueue are
mapped to positions through the task id, reference pass rates are joined by task id, and checkpoints store the task
ids so a resume against a different pool fails loudly instead of crediting the wrong tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "TaskIndex",
    "check_parquet_columns",
    "dataset_data_files",
    "dataset_task_ids",
    "normalize_task_id",
    "read_reference_columns",
    "task_id_of",
]


def normalize_task_id(value: Any, field: str) -> int | str:
    """A hashable, checkpoint-safe task id (int or str).

    Raises:
        ValueError: for missing, float or other values that cannot serve as an id.
    """
    value = getattr(value, "data", value)  # tensordict NonTensorData
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, bool) or value is None:
        raise ValueError(f"task id field {field!r} has the invalid value {value!r}")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"task id field {field!r} must hold ints or non-empty strings, got {value!r}")


def task_id_of(row: Mapping[str, Any], path: Sequence[str]) -> int | str:
    """Read the task id at ``path`` (e.g. ``("extra_info", "index")``) from one row.

    Raises:
        ValueError: if a level is missing.
    """
    value: Any = row
    for i, key in enumerate(path):
        value = getattr(value, "data", value)
        if not isinstance(value, Mapping) or key not in value:
            raise ValueError(f"row has no task id field {'.'.join(path[: i + 1])!r} (bots.task_id_field)")
        value = value[key]
    return normalize_task_id(value, ".".join(path))


def _custom_dataset_error(dataset: Any, missing: str, needed: str) -> ValueError:
    return ValueError(
        f"the train dataset ({type(dataset).__module__}.{type(dataset).__qualname__}, data.custom_cls) {missing}; "
        f"BOTS needs {needed}, as verl's RLHFDataset has: subclass RLHFDataset, or give the class that attribute"
    )


def dataset_task_ids(dataset: Any, path: Sequence[str]) -> list[int | str]:
    """Task ids of every position of a verl ``RLHFDataset`` (after max_samples and filtering), in order.

    Reads only the root column from the underlying HF dataset (no tokenisation, no ``__getitem__``).

    Raises:
        ValueError: for a missing column or bad id; or for a dataset (``data.custom_cls``) without RLHFDataset's
            ``dataframe`` (a ``datasets.Dataset`` of one row per position), or whose ``dataframe`` has another length.
    """
    frame = getattr(dataset, "dataframe", None)
    needed = f"its 'dataframe' attribute: a datasets.Dataset with one row per position and a {path[0]!r} column"
    if frame is None:
        raise _custom_dataset_error(dataset, "has no 'dataframe' attribute", needed)
    if not hasattr(frame, "column_names"):
        raise _custom_dataset_error(dataset, f"has a 'dataframe' of type {type(frame).__name__}", needed)
    if path[0] not in frame.column_names:
        raise ValueError(f"train dataset has no column {path[0]!r} (bots.task_id_field={'.'.join(path)!r})")
    column = frame[path[0]]
    ids = [task_id_of({path[0]: v}, path) for v in column]
    # The sampler yields positions up to len(dataset); ids for other positions would credit the wrong tasks.
    if hasattr(dataset, "__len__") and len(ids) != len(dataset):
        raise _custom_dataset_error(dataset, f"has {len(dataset)} rows but a 'dataframe' of {len(ids)}", needed)
    return ids


def dataset_data_files(dataset: Any) -> list[str]:
    """The local train files a verl ``RLHFDataset`` read (its ``data_files``), to read reference columns from.

    Raises:
        ValueError: for a dataset (``data.custom_cls``) without them.
    """
    files = getattr(dataset, "data_files", None)
    if files is None or isinstance(files, str | bytes) or not all(isinstance(f, str) for f in files):
        raise _custom_dataset_error(
            dataset,
            "has no 'data_files' list" if files is None else f"has 'data_files' of {files!r}",
            "its 'data_files' attribute (the local parquet paths it read) to read bots.reference_columns",
        )
    return list(files)


class TaskIndex:
    """Bijection between dataset positions ``0..N-1`` and task ids.

    Args:
        task_ids: the id of each position, in position order.
        field: the config field name, for messages.

    Raises:
        ValueError: if ids repeat (e.g. ``extra_info.index`` missing, so verl's default 0 everywhere).
    """

    def __init__(self, task_ids: Iterable[int | str], field: str = "task id") -> None:
        self.task_ids: list[int | str] = list(task_ids)
        self.field = field
        if not self.task_ids:
            raise ValueError("the training pool is empty")
        self._position = {tid: pos for pos, tid in enumerate(self.task_ids)}
        if len(self._position) != len(self.task_ids):
            seen: set = set()
            dup = next(t for t in self.task_ids if t in seen or seen.add(t))
            raise ValueError(f"{field} is not unique (e.g. {dup!r} repeats); data prep must write a unique id per row")

    def __len__(self) -> int:
        return len(self.task_ids)

    def positions(self, task_ids: Iterable[int | str]) -> np.ndarray:
        """Positions of ``task_ids``.

        Raises:
            ValueError: for an id that is not in the pool.
        """
        out = []
        for tid in task_ids:
            pos = self._position.get(tid)
            if pos is None:
                raise ValueError(f"{self.field} {tid!r} is not in the training pool")
            out.append(pos)
        return np.asarray(out, dtype=np.int64)


def check_parquet_columns(file: str, columns: Sequence[str]) -> None:
    """Check from the parquet footer alone (no data read) that ``file`` has every top-level column in ``columns``.

    Raises:
        ValueError: naming the file, the first missing column and the columns the file has.
    """
    import pyarrow.parquet as pq

    names = set(pq.read_schema(file).names)
    for col in columns:
        if col not in names:
            raise ValueError(
                f"{file} has no column {col!r} (bots.task_id_field / bots.reference_columns); columns: {sorted(names)}"
            )


#: the GURU domains whose data sources the BOTS rewards know (``bots_verl.rewards.domain_of``)
GURU_DOMAINS = ("math", "code", "logic")


def check_parquet_domain(file: str, domain: str) -> None:
    """Check that every ``data_source`` of ``file`` belongs to ``domain`` (one of :data:`GURU_DOMAINS`).

    A recipe for one domain started on another domain's data would train with the wrong evaluation sets and, for code,
    the wrong isolation settings; it is refused before Ray starts.

    Raises:
        ValueError: naming the file, the recipe's domain and the data sources of other domains.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from bots_verl.rewards import domain_of

    if domain not in GURU_DOMAINS:
        raise ValueError(f"bots.run_log.domain={domain!r} is not one of {GURU_DOMAINS}")
    if "data_source" not in pq.read_schema(file).names:
        raise ValueError(f"{file} has no data_source column; the {domain} recipe needs GURU-format data")
    sources = pc.unique(pq.read_table(file, columns=["data_source"]).column("data_source")).to_pylist()
    foreign = {}
    for source in sources:
        try:
            found = domain_of(source)
        except ValueError:
            found = "no BOTS reward"
        if found != domain:
            foreign[source] = found
    if foreign:
        listed = ", ".join(f"{s!r} ({d})" for s, d in sorted(foreign.items(), key=str))
        raise ValueError(f"{file}: the recipe's domain is {domain!r} (bots.run_log.domain) but it holds {listed}")


def read_reference_columns(
    files: Sequence[str], columns: Sequence[str], path: Sequence[str], index: TaskIndex
) -> np.ndarray:
    """Reference pass rates ``(N, K)`` aligned to ``index`` positions, read from the train parquet(s) by task id.

    Only the task-id root column and the ``columns`` are read (pyarrow column projection).

    Args:
        files: the train parquet files.
        columns: reference columns, weak -> strong.
        path: task id path, e.g. ``("extra_info", "index")``.
        index: the dataset's task index.

    Raises:
        ValueError: naming the file and column when a column is missing, or a task of the pool has no row.
    """
    import pyarrow.parquet as pq

    by_id: dict[int | str, np.ndarray] = {}
    for file in files:
        if not str(file).endswith(".parquet"):
            raise ValueError(f"bots.reference_columns are read from parquet; {file} is not a .parquet file")
        check_parquet_columns(file, [path[0], *columns])
        table = pq.read_table(file, columns=[path[0], *columns])
        root = table.column(path[0]).to_pylist()
        values = np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(float) for c in columns])
        for row, refs in zip(root, values, strict=True):
            tid = task_id_of({path[0]: row}, path)
            if tid in by_id:
                raise ValueError(f"{'.'.join(path)} {tid!r} appears twice in {list(files)}")
            by_id[tid] = refs
    missing = [tid for tid in index.task_ids if tid not in by_id]
    if missing:
        raise ValueError(f"{len(missing)} tasks have no row in {list(files)}, e.g. {missing[:3]}")
    return np.stack([by_id[tid] for tid in index.task_ids])
