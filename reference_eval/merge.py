"""``merge``: add ``successes / attempts`` as a float column to the parquet, matched by stable task id.

Rules, each a fix of a failure seen in the upstream tool or in fault tests:

- rows without a result get NaN and are counted, never 0.0 (0.0 means "the reference never solves it"); the same
  holds for a row whose every response hit a scorer error (``unscored``), and a response whose scoring failed is left
  out of its row's pass rate, never counted as a failure: "we don't know" is never written as a number;
- rows are matched by task id, not by prompt text (duplicate prompts would collide), and each result's stored prompt
  hash is checked against the row, so an id that now points at another prompt is caught;
- results for ids the parquet lacks, duplicate results, and duplicate prompts are reported;
- results from different models or sampling settings are never combined into one column;
- the output is a new file written atomically (temp file + fsync + rename); replacing the input needs
  ``in_place=True`` and keeps the old file as a timestamped backup (a hard link, made just before the rename);
- leftovers of a merge that was killed are dealt with by the next run on the same file: a hidden temp file of a
  process that no longer runs on this host is removed, a backup that is still the very same file as the input (the
  kill came between backup and rename, so nothing was replaced) is removed, and anything that cannot be judged
  (a temp file of another host or of a live process) is reported.

The column's Arrow field metadata records the model, sampling settings and scorer under ``reference_eval``.
"""

from __future__ import annotations

import filecmp
import glob
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

from bots_verl.fileio import OutputLock, clean_stale_temps, describe_holder, fsync_file, lock_holder, publishing

from .data import DataError, duplicate_prompt_groups, prompt_hash_of, read_table, task_ids
from .results import ResultsError, read_results, record_key

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["MergeReport", "merge", "clean_leftovers"]


@dataclass
class MergeReport:
    """What merge did; every count a user should look at before trusting the column.

    Attributes:
        column: The column written.
        rows: Rows in the parquet.
        with_results: Rows that got a pass rate.
        missing: Rows left NaN, for any reason: no result, every response unscored, or a skipped prompt mismatch.
        unscored: Rows whose result has no scored response (every one hit a scorer error): NaN, not 0.0.
        partly_unscored: Rows with some responses unscored; their pass rate is over the scored responses only.
        prompt_mismatches: Rows whose result was collected for a different prompt under the same id.
        unknown_ids: Result ids not present in the parquet (ignored).
        duplicate_results: Ids with more than one (identical) result record (deduplicated).
        duplicate_prompt_rows: Rows whose prompt repeats another row's.
        attempts: The distinct attempt counts per prompt (normally one value, n).
        model: The reference model.
        settings: The sampling and scorer settings.
        out: The file written.
        backup: The backup of the input (in-place only).
        cleaned: Leftovers of an interrupted earlier merge that this run removed.
        leftovers: Possible leftovers it could not judge and kept (temp files of another host or a live process).
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
    unscored: int = 0
    partly_unscored: int = 0
    cleaned: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    examples: dict[str, list[Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-ready dict."""
        return asdict(self)


def clean_leftovers(
    dest: str | os.PathLike, backups_of: str | os.PathLike | None = None
) -> tuple[list[str], list[str]]:
    """Remove what a killed merge left next to ``dest``; report what cannot be judged.

    Args:
        dest: The output about to be written.
        backups_of: The input of an in-place merge (``dest`` itself); its ``<name>.<time>.bak`` files are checked.

    Returns:
        ``(removed, kept)`` paths. Removed: hidden temp files of ``dest`` whose writer (same host) is gone, and backups
        that are still the same file as the input (the kill came before the rename, so the input is unchanged and
        the backup holds nothing else). Kept and reported: temp files of another host or a live process.
    """
    removed, kept = clean_stale_temps(dest)
    if backups_of is not None:
        data = Path(backups_of)
        for backup in sorted(data.parent.glob(f"{glob.escape(data.name)}.*.bak")):
            if _same_content(backup, data):
                backup.unlink()
                removed.append(str(backup))
    for path in removed:
        logger.warning("removed %s, left behind by an interrupted merge", path)
    for path in kept:
        logger.warning("%s looks like the temp file of another merge (other host, or still running); kept", path)
    return removed, kept


def _same_content(a: Path, b: Path) -> bool:
    try:
        if os.path.samefile(a, b):
            return True
        # A copy (where hard links are not supported) keeps size and mtime; only then compare the bytes.
        sa, sb = a.stat(), b.stat()
        return sa.st_size == sb.st_size and int(sa.st_mtime) == int(sb.st_mtime) and filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def _make_backup(data: Path) -> Path:
    """Keep the current input as ``<name>.<time>[-k].bak``: a hard link (instant, no space), else a copy."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for k in range(1000):
        backup = data.with_name(f"{data.name}.{stamp}{f'-{k}' if k else ''}.bak")
        if not backup.exists():
            break
    else:
        raise DataError(f"cannot find a free backup name for {data}")
    try:
        os.link(data, backup)
    except OSError:
        shutil.copy2(data, backup)
    return backup


def _load_results(paths: list[str | os.PathLike]) -> tuple[dict[tuple[str, Any], dict[str, Any]], int, list, dict]:
    by_id: dict[tuple[str, Any], dict[str, Any]] = {}
    duplicates: list[Any] = []
    settings: dict[str, Any] = {}
    settings_ids: dict[str, str] = {}
    for path in paths:
        holder = lock_holder(path)
        if holder is not None:
            logger.warning(
                "%s is still being written by %s; prompts it has not reached yet will be NaN",
                path,
                describe_holder(holder),
            )
        # Every line is checked here (check_record): counts, booleans, successes <= scored responses.
        records = read_results(path)
        if not records:
            logger.warning("%s holds no results", path)
            continue
        sid = records[0]["settings_id"]
        settings_ids[str(path)] = sid
        settings = {k: records[0].get(k) for k in ("model", "sampling", "scorer", "settings_id")}
        for rec in records:
            key = record_key(rec["task_id"])
            prev = by_id.get(key)
            if prev is None:
                by_id[key] = rec
                continue
            duplicates.append(rec["task_id"])
            fields = ("successes", "attempts", "score_errors", "prompt_sha256")
            if tuple(prev.get(k) for k in fields) != tuple(rec.get(k) for k in fields):
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
        in_place: Replace ``data_path``, keeping the old file as ``<data_path>.<timestamp>.bak``.
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
        LockError: If another merge is writing the same output.
        OSError: If the output cannot be written (nothing is replaced then).
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

    # One merge per output at a time: two in-place merges of the same file would each add their column to the same
    # old table, and the second rename would silently drop the first one's column.
    dest.parent.mkdir(parents=True, exist_ok=True)
    with OutputLock(dest, f"merge --column {column} into {dest}"):
        return _merge_locked(
            data_path,
            list(results_paths),
            column,
            dest,
            in_place=in_place,
            replace_column=replace_column,
            id_column=id_column,
            prompt_column=prompt_column,
            skip_prompt_mismatch=skip_prompt_mismatch,
        )


def _merge_locked(
    data_path: Path,
    results_paths: list[str | os.PathLike],
    column: str,
    dest: Path,
    *,
    in_place: bool,
    replace_column: bool,
    id_column: str,
    prompt_column: str,
    skip_prompt_mismatch: bool,
) -> MergeReport:
    table = read_table(data_path)
    if column in table.column_names and not replace_column:
        raise DataError(f"{data_path} already has a column {column!r}; pass --replace-column to overwrite it")
    ids = task_ids(table, id_column)
    hashes: list[str] | None = None
    if prompt_column in table.column_names:
        hashes = [prompt_hash_of(p) for p in table.column(prompt_column).to_pylist()]
    else:
        logger.warning("no %r column: cannot verify that results belong to the same prompts", prompt_column)

    by_id, n_dup, dup_examples, settings = _load_results(results_paths)

    values: list[float] = []
    missing_ids, mismatch_ids, unscored_ids, partly_ids = [], [], [], []
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
        # A response whose scoring raised says nothing about the model: it is left out of the denominator, and a row
        # with no scored response at all is unknown (NaN), not "never solved" (0.0).
        scored = rec["attempts"] - rec.get("score_errors", 0)
        if scored == 0:
            values.append(math.nan)
            unscored_ids.append(task_id)
            continue
        if scored < rec["attempts"]:
            partly_ids.append(task_id)
        values.append(rec["successes"] / scored)
    if mismatch_ids and not skip_prompt_mismatch:
        raise ResultsError(
            f"{len(mismatch_ids)} ids have results collected for a different prompt (e.g. {mismatch_ids[:5]}); "
            "the ids are not stable between the collected file and this one. Pass --skip-prompt-mismatch to leave "
            "those rows NaN."
        )
    id_keys = {record_key(t) for t in ids}
    unknown = [rec["task_id"] for key, rec in by_id.items() if key not in id_keys]
    # Ids are matched with their type (1 and "1" are different tasks), so results collected with string ids against
    # a parquet of integer ids (or the other way round) match no row: every value would be NaN, silently.
    as_text = {str(t): t for t in ids}
    retyped = [t for t in unknown if str(t) in as_text and type(as_text[str(t)]) is not type(t)]
    if retyped:
        theirs, ours = type(retyped[0]).__name__, type(as_text[str(retyped[0])]).__name__
        raise ResultsError(
            f"{len(retyped)} result task ids are {theirs}s where {data_path}'s id column {id_column!r} holds {ours}s "
            f"(e.g. {retyped[:3]} against {[as_text[str(t)] for t in retyped[:3]]}): ids match with their type, so "
            f"those rows would all be NaN. Collect the results from this parquet (or one with the same id column), "
            f"or give --id-column the column the results were collected with"
        )
    if by_id and ids and not id_keys & by_id.keys():
        raise ResultsError(
            f"none of the {len(by_id)} results matches a row of {data_path} by its id column {id_column!r} "
            f"(result ids e.g. {unknown[:3]}, row ids e.g. {ids[:3]}): the column would be all NaN. Are the results "
            f"of another dataset, or collected with another --id-column?"
        )
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
        unscored=len(unscored_ids),
        partly_unscored=len(partly_ids),
        examples={
            "missing": missing_ids[:5],
            "unscored": unscored_ids[:5],
            "partly_unscored": partly_ids[:5],
            "prompt_mismatches": mismatch_ids[:5],
            "unknown_ids": unknown[:5],
            "duplicate_results": dup_examples,
        },
    )
    if len(attempts) > 1:
        logger.warning("pass rates over different attempt counts %s; values are not on one grid", sorted(attempts))
    if partly_ids:
        logger.warning(
            "%d rows had responses whose scoring failed; their pass rate is over the scored responses only (e.g. %s)",
            len(partly_ids),
            partly_ids[:5],
        )

    meta = {b"reference_eval": json.dumps({**settings, "rows_with_results": report.with_results}).encode()}
    new_field = pa.field(column, pa.float64(), nullable=True, metadata=meta)
    array = pa.array(values, type=pa.float64())
    if column in table.column_names:
        table = table.set_column(table.column_names.index(column), new_field, array)
    else:
        table = table.append_column(new_field, array)

    report.cleaned, report.leftovers = clean_leftovers(dest, data_path if in_place else None)
    # Order matters for a kill at any point: the new table is complete on disk before the backup exists, and the
    # backup (a hard link to the unchanged input) exists before the rename; clean_leftovers undoes either stage.
    try:
        with publishing(dest) as tmp:
            pq.write_table(table, tmp)
            fsync_file(tmp)
            if in_place:
                report.backup = str(_make_backup(data_path))
    except BaseException:
        if report.backup is not None:
            Path(report.backup).unlink(missing_ok=True)
        raise
    logger.info("merge: %s", json.dumps(report.to_dict(), default=str))
    if n_missing:
        logger.warning(
            "%d of %d rows are NaN in %r: %d without a result, %d unscored (every response hit a scorer error), "
            "%d with a result for another prompt",
            n_missing,
            len(ids),
            column,
            len(missing_ids),
            len(unscored_ids),
            len(mismatch_ids),
        )
    return report
