"""Convert GURU (LLM360/guru-RL-92k) parquet files into verl RL datasets with stable task ids.

Usage::

    python -m bots_verl.data.guru --guru-dir /data/guru-RL-92k --out-dir /data/bots [--domains math code logic]
        [--drop weak_gt_strong --drop duplicate_prompt ...] [--skip-eval]

``--guru-dir`` is a local copy of the hub dataset (``train/``, ``online_eval/``, ``offline_eval/``). For each domain the
tool writes ``<out-dir>/<domain>/train.parquet``, one ``val_<name>.parquet`` per evaluation set, and
``<out-dir>/<domain>/prep_report.json`` (counts per source file and per issue).

A domain's outputs appear all together or not at all, and never mix with an earlier run's: they are built in a hidden
staging folder ``<out-dir>/.<domain>.tmp-<host>-<pid>`` and the finished folder replaces ``<out-dir>/<domain>`` as a
whole (:func:`bots_verl.fileio.publishing`: rename the old folder aside, rename the new one in, delete the old one), so
a file of an older run (a ``val_*`` set no longer converted, say) is never left beside new ones. A run that fails leaves
``<out-dir>/<domain>`` exactly as it was and writes its report to ``<out-dir>/<domain>.prep_report.failed.json``. A run
killed half-way leaves only hidden folders; the next run removes them, and puts the previous outputs back if the kill
came between the two renames (:func:`bots_verl.fileio.clean_stale_temps`). Because the folder is replaced as a whole,
a file in it that the prep did not write stops the run (move it elsewhere).

Output schema (one schema per domain, whatever the source files' schemas are):

- ``data_source`` (string), ``prompt`` (list of ``{role, content}``), ``ability`` (string): copied from GURU.
- ``reward_model``: ``{style: "rule", ground_truth: string}``. Structured ground truths (zebra grids, ordering lists,
  ARC grids) are JSON-encoded, because one parquet column cannot hold GURU's per-file ground-truth types; the reward
  functions in :mod:`bots_verl.rewards` decode them.
- ``task_id`` (int64): the task id, dense ``0..N-1`` in output row order, so a selector can index arrays with it.
  The same value is ``extra_info.index`` (verl puts it into every batch as ``index``).
- ``extra_info``: ``{split, index, original_index, source_file}`` (+ ``prefix`` for code: LeetCode's import header,
  prepended before running the tests). ``original_index`` is GURU's ``extra_info.index|id|idx`` as a string.
- ``qwen2.5_7b_pass_rate`` and ``qwen3_30b_pass_rate`` (float64): GURU's weak and strong reference pass rates. Required
  in train files; kept in evaluation files when present.

Validation (counted per file in the report). Rows are never silently dropped or zero-filled:

- fatal unless dropped with ``--drop``: ``malformed_row`` (missing data source/prompt/ability), ``unknown_data_source``
  (no reward function), ``bad_ground_truth`` (unexpected type for the data source), ``missing_pass_rate`` (null or NaN),
  ``pass_rate_out_of_range`` (outside [0, 1]). If any remain, no output is written and the tool exits with status 1.
- kept with a warning unless dropped: ``weak_gt_strong`` (weak pass rate > strong; GURU leaves some in and BOTS's
  interpolation tolerates them), ``duplicate_prompt`` (same prompt text as an earlier row of the same output; the first
  one is kept when dropping). These two are dropped from train files only: evaluation files repeat prompts on purpose
  (AIME 8x, i.e. mean@8) and are benchmarks, so there they are only counted.

An input that cannot be read (a missing, empty, truncated or garbage parquet file, a directory where a file belongs)
or an output folder that cannot be written stops the run with a :class:`PrepError` naming the file.

Files are read with pyarrow, column-selected (including nested ``extra_info`` fields) and streamed in record batches;
the LiveCodeBench train file is 3.3 GB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bots_verl.fileio import (
    clean_stale_temps,
    fsync_file,
    publishing,
    write_json_atomic,
)
from bots_verl.rewards import domain_of
from bots_verl.rewards.code_plan import parse_tests

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

__all__ = ["DOMAINS", "ISSUES", "PrepError", "DomainSpec", "prepare", "prepare_domain", "main"]

WEAK_COLUMN = "qwen2.5_7b_pass_rate"
STRONG_COLUMN = "qwen3_30b_pass_rate"
PASS_RATE_COLUMNS = (WEAK_COLUMN, STRONG_COLUMN)

FATAL_ISSUES = (
    "malformed_row",
    "unknown_data_source",
    "bad_ground_truth",
    "missing_pass_rate",
    "pass_rate_out_of_range",
)
WARN_ISSUES = ("weak_gt_strong", "duplicate_prompt")
ISSUES = FATAL_ISSUES + WARN_ISSUES


@dataclass(frozen=True)
class DomainSpec:
    """Which GURU files make up one domain.

    Attributes:
        train: train file names without the ``_<size>`` suffix, looked up in ``train/``.
        evals: evaluation set name -> file name without the size suffix, looked up in ``online_eval/`` then
            ``offline_eval/``.
    """

    train: tuple[str, ...]
    evals: dict[str, str] = field(default_factory=dict)


# Evaluation sets (the paper names only MATH500 and AIME24, for math; guru.md §1, paper.md §2):
# - math: MATH500 and AIME24 (GURU's AIME24 file repeats each of the 30 problems 8 times: mean@8 with val n=1).
# - code: LiveCodeBench (GURU's held-out, later-dated contest problems: same stdin/stdout format as the training mix
#   and the one code benchmark a BOTS summary names) plus HumanEval (functional tests; cheap, fast sanity signal).
# - logic: GURU's three logic online-eval sets, zebra, ordering and ARC-AGI-1, i.e. the in-domain puzzle families of the
#   training mix (graph search has no eval file). ARC-AGI is in the GURU leaderboard; a 1.5B model scores ~0 there,
#   like AIME for math, so zebra and ordering carry the signal.
DOMAINS: dict[str, DomainSpec] = {
    "math": DomainSpec(
        train=("math__combined",),
        evals={"math500": "math__math", "aime24": "math__aime_repeated_8x"},
    ),
    "code": DomainSpec(
        train=("codegen__leetcode2k", "codegen__livecodebench", "codegen__primeintellect", "codegen__taco"),
        evals={"livecodebench": "codegen__livecodebench", "humaneval": "codegen__humaneval"},
    ),
    "logic": DomainSpec(
        train=(
            "logic__arcagi1",
            "logic__arcagi2",
            "logic__barc",
            "logic__graph_logical",
            "logic__ordering_puzzle",
            "logic__zebra_puzzle",
        ),
        evals={
            "zebra": "logic__zebra_puzzle_dataset",
            "ordering": "logic__ordering_puzzle_dataset",
            "arcagi1": "logic__arcagi1",
        },
    ),
}

_SIZE_SUFFIX = re.compile(r"_[0-9]+(?:\.[0-9]+)?k?\.parquet$")
# What a domain folder may hold: the prep's own outputs, and temp files of versions that wrote them in place.
_OWN_OUTPUT = re.compile(r"^(train\.parquet|val_[^/]+\.parquet|prep_report\.json|\..+\.tmp-[0-9]+)$")
_EXTRA_INFO_KEYS = ("split", "index", "id", "idx", "prefix")


class PrepError(RuntimeError):
    """Input that cannot be converted as asked (missing files or columns, or fatal row issues that were not dropped)."""


def find_file(folder: Path, name: str) -> Path:
    """Resolve ``<folder>/<name>_<size>.parquet`` (the size suffix differs between GURU releases).

    Args:
        folder: e.g. ``<guru>/train``.
        name: the file name without the size suffix, e.g. ``math__combined``.

    Returns:
        The one matching path.

    Raises:
        PrepError: when none or several files match, or the match is not a regular file.
    """
    matches = sorted(p for p in folder.glob(f"{name}_*.parquet") if _SIZE_SUFFIX.sub("", p.name) == name)
    if len(matches) != 1:
        found = sorted(p.name for p in folder.glob("*.parquet")) if folder.is_dir() else "no such folder"
        what = "no file" if not matches else f"several files {[p.name for p in matches]}"
        raise PrepError(f"{what} named {name}_<size>.parquet in {folder}; present: {found}")
    if not matches[0].is_file():
        kind = "a directory" if matches[0].is_dir() else "not a regular file"
        raise PrepError(f"{matches[0]} is {kind}, not a parquet file")
    return matches[0]


def _open_parquet(path: Path) -> pq.ParquetFile:
    """Open a parquet file, turning unreadable input (empty, truncated, garbage, unreadable) into a PrepError."""
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as err:
        raise PrepError(f"{path}: not a readable parquet file (empty, truncated or not parquet?): {err}") from err


def _gt_to_text(data_source: str, value: Any) -> str:
    """Check a ground truth's type for its data source and return it as the stored string (raises ``ValueError``)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    name = data_source.lower()
    domain = domain_of(data_source)
    if domain == "math" or name.startswith("logic__graph"):
        if not isinstance(value, str) or not value.strip():
            raise ValueError("expected a non-empty string")
        return value
    if domain == "code":
        if not isinstance(value, str):
            raise ValueError("expected a JSON string")
        parse_tests(value)
        return value
    if isinstance(value, str):  # already JSON text (e.g. a re-run on our own output)
        try:
            value = json.loads(value)
        except ValueError as err:
            raise ValueError("expected JSON text") from err
    if name.startswith("logic__zebra_puzzle"):
        rows = value.get("rows") if isinstance(value, dict) else None
        if not isinstance(rows, list) or not rows or not all(isinstance(r, list) and r for r in rows):
            raise ValueError("expected {header, rows: [[...]]}")
    elif name.startswith("logic__ordering_puzzle"):
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise ValueError("expected a non-empty list of strings")
    else:  # ARC-AGI / BARC grids
        if (
            not isinstance(value, list)
            or not value
            or not all(
                isinstance(r, list) and r and all(isinstance(c, int) and not isinstance(c, bool) for c in r)
                for r in value
            )
        ):
            raise ValueError("expected a non-empty 2-D list of integers")
    return json.dumps(value)


def _prompt_ok(prompt: Any) -> bool:
    return (
        isinstance(prompt, list)
        and len(prompt) > 0
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt
        )
    )


def _prompt_key(prompt: list[dict[str, str]]) -> bytes:
    text = "\x1e".join(f"{m['role']}\x1f{m['content']}" for m in prompt)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _rate(value: Any) -> float | None:
    if value is None or not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return None
    return float(value)


def output_schema(domain: str, with_pass_rates: bool) -> pa.Schema:
    """The arrow schema of the converted files of ``domain``."""
    extra = [
        pa.field("split", pa.string()),
        pa.field("index", pa.int64()),
        pa.field("original_index", pa.string()),
        pa.field("source_file", pa.string()),
    ]
    if domain == "code":
        extra.append(pa.field("prefix", pa.string()))
    fields = [
        pa.field("data_source", pa.string()),
        pa.field("prompt", pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())]))),
        pa.field("ability", pa.string()),
        pa.field("reward_model", pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())])),
        pa.field("extra_info", pa.struct(extra)),
        pa.field("task_id", pa.int64()),
    ]
    if with_pass_rates:
        fields += [pa.field(WEAK_COLUMN, pa.float64()), pa.field(STRONG_COLUMN, pa.float64())]
    return pa.schema(fields)


def _read_rows(path: Path, want_pass_rates: bool, batch_size: int) -> Iterator[dict[str, Any]]:
    """Stream rows of the columns the conversion needs (nested fields selected individually)."""
    parquet = _open_parquet(path)
    schema = parquet.schema_arrow
    names = set(schema.names)
    missing = [c for c in ("data_source", "prompt", "reward_model") if c not in names]
    if want_pass_rates:
        missing += [c for c in PASS_RATE_COLUMNS if c not in names]
    if missing:
        raise PrepError(f"{path.name}: missing columns {missing}; has {sorted(names)}")
    reward_type = schema.field("reward_model").type
    if not pa.types.is_struct(reward_type) or reward_type.get_field_index("ground_truth") < 0:
        raise PrepError(f"{path.name}: reward_model has no ground_truth field ({reward_type})")
    columns = ["data_source", "prompt", "reward_model.ground_truth"]
    if "ability" in names:
        columns.append("ability")
    if "extra_info" in names and pa.types.is_struct(schema.field("extra_info").type):
        info_type = schema.field("extra_info").type
        columns += [f"extra_info.{k}" for k in _EXTRA_INFO_KEYS if info_type.get_field_index(k) >= 0]
    columns += [c for c in PASS_RATE_COLUMNS if c in names]
    batches = parquet.iter_batches(batch_size=batch_size, columns=columns)
    while True:
        # Only the read is guarded: a corrupt page deep inside a file surfaces here, not at open.
        try:
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as err:
            raise PrepError(f"{path}: cannot read its rows (corrupt or truncated parquet?): {err}") from err
        if batch is None:
            return
        yield from batch.to_pylist()


@dataclass
class _OutputStats:
    rows_in: int = 0
    rows_out: int = 0
    dropped: int = 0
    issues: Counter = field(default_factory=Counter)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)


def _convert_file(
    path: Path,
    domain: str,
    split: str,
    is_train: bool,
    with_pass_rates: bool,
    drop: frozenset[str],
    seen_prompts: set[bytes],
    stats: _OutputStats,
    batch_size: int,
) -> Iterator[dict[str, Any]]:
    """Convert one source file's rows, yielding the kept output rows and counting issues into ``stats``."""
    file_issues: Counter = Counter()
    file_rows = 0
    # Warnings drop train rows only: an evaluation set is a benchmark, and its repeats are intended (mean@k).
    droppable = drop if is_train else drop - set(WARN_ISSUES)
    for row in _read_rows(path, want_pass_rates=is_train, batch_size=batch_size):
        file_rows += 1
        issues: list[str] = []
        data_source, prompt, ability = row.get("data_source"), row.get("prompt"), row.get("ability")
        ground_truth = (row.get("reward_model") or {}).get("ground_truth")
        info = row.get("extra_info") or {}
        if not isinstance(data_source, str) or not _prompt_ok(prompt) or not isinstance(ability, str):
            issues.append("malformed_row")
        gt_text = None
        if isinstance(data_source, str):
            try:
                row_domain = domain_of(data_source)
            except ValueError:
                row_domain = None
            if row_domain != domain:
                issues.append("unknown_data_source")
            else:
                try:
                    gt_text = _gt_to_text(data_source, ground_truth)
                except (ValueError, RecursionError) as err:  # RecursionError: JSON text nested too deeply
                    logger.debug("%s row %d: bad ground truth: %r", path.name, file_rows - 1, err)
                    issues.append("bad_ground_truth")
        weak, strong = (_rate(row.get(WEAK_COLUMN)), _rate(row.get(STRONG_COLUMN)))
        if with_pass_rates:
            if weak is None or strong is None:
                issues.append("missing_pass_rate")
            elif not (0.0 <= weak <= 1.0 and 0.0 <= strong <= 1.0):
                issues.append("pass_rate_out_of_range")
            elif weak > strong:
                issues.append("weak_gt_strong")
        key = _prompt_key(prompt) if _prompt_ok(prompt) else None
        if key is not None and key in seen_prompts:
            issues.append("duplicate_prompt")
        file_issues.update(issues)
        if any(issue in droppable for issue in issues):
            stats.dropped += 1
            continue
        if any(issue in FATAL_ISSUES for issue in issues):
            # Keep counting so that the report lists every problem, but nothing from this run will be written.
            continue
        if key is not None:
            # Registered only for written rows, so a dropped row never makes a later, valid copy a "duplicate".
            seen_prompts.add(key)
        task_id = stats.rows_out
        original = next((info.get(k) for k in ("index", "id", "idx") if info.get(k) is not None), None)
        extra = {
            "split": info.get("split") if isinstance(info.get("split"), str) else split,
            "index": task_id,
            "original_index": None if original is None else str(original),
            "source_file": path.name,
        }
        if domain == "code":
            extra["prefix"] = info.get("prefix") if isinstance(info.get("prefix"), str) else ""
        out = {
            "data_source": data_source,
            "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
            "ability": ability,
            "reward_model": {"style": "rule", "ground_truth": gt_text},
            "extra_info": extra,
            "task_id": task_id,
        }
        if with_pass_rates:
            out[WEAK_COLUMN], out[STRONG_COLUMN] = weak, strong
        stats.rows_out += 1
        yield out
    stats.rows_in += file_rows
    stats.issues.update(file_issues)
    stats.files[path.name] = {"rows": file_rows, "issues": dict(sorted(file_issues.items()))}


def _write_output(
    sources: list[Path],
    out_path: Path,
    domain: str,
    split: str,
    is_train: bool,
    drop: frozenset[str],
    batch_size: int,
) -> dict[str, Any]:
    """Convert ``sources`` into one parquet file at ``out_path`` (in the staging folder) and return its report entry.

    The file is written even when rows have fatal issues (the caller then discards the whole staging folder), so that
    one pass counts every problem of every file.
    """
    with_pass_rates = is_train or all(
        set(PASS_RATE_COLUMNS) <= set(_open_parquet(p).schema_arrow.names) for p in sources
    )
    schema = output_schema(domain, with_pass_rates)
    stats = _OutputStats()
    seen: set[bytes] = set()
    try:
        with pq.ParquetWriter(out_path, schema) as writer:
            for path in sources:
                pending: list[dict[str, Any]] = []
                for out in _convert_file(path, domain, split, is_train, with_pass_rates, drop, seen, stats, batch_size):
                    pending.append(out)
                    if len(pending) >= batch_size:
                        writer.write_table(pa.Table.from_pylist(pending, schema=schema))
                        pending = []
                if pending:
                    writer.write_table(pa.Table.from_pylist(pending, schema=schema))
        fsync_file(out_path)
    except OSError as err:
        raise PrepError(f"cannot write {out_path}: {err.strerror or err}") from err
    # Warnings (weak > strong, duplicates: AIME is repeated 8x on purpose) never block; fatal issues do.
    blocking = {k: v for k, v in stats.issues.items() if k in FATAL_ISSUES and k not in drop}
    report = {
        "path": str(out_path),
        "rows_in": stats.rows_in,
        "rows_out": stats.rows_out,
        "dropped": stats.dropped,
        "issues": dict(sorted(stats.issues.items())),
        "files": stats.files,
        "pass_rate_columns": with_pass_rates,
    }
    if blocking:
        report["blocking"] = blocking
    elif stats.rows_out == 0:
        raise PrepError(f"{[str(p) for p in sources]}: no rows left to write for {out_path.name}")
    return report


def _check_replaceable(domain_dir: Path) -> None:
    """Refuse to replace a domain folder that holds anything the prep did not write (it is replaced as a whole)."""
    if domain_dir.is_symlink() or (domain_dir.exists() and not domain_dir.is_dir()):
        raise PrepError(f"{domain_dir} exists and is not a plain directory; the prep replaces that folder as a whole")
    if not domain_dir.exists():
        return
    foreign = sorted(p.name for p in domain_dir.iterdir() if not _OWN_OUTPUT.match(p.name))
    if foreign:
        raise PrepError(
            f"{domain_dir} holds files the prep did not write: {foreign}. Each run replaces the folder as a whole "
            "(so that no file of an older run is left beside new ones); move them elsewhere first"
        )


def _recover(domain_dir: Path) -> None:
    """Deal with what a killed run left beside ``domain_dir``: put the previous outputs back, remove staging folders.

    Raises:
        PrepError: if a leftover belongs to a run that may still be going (another host, or a live process).
    """
    removed, running = clean_stale_temps(domain_dir)
    for path in removed:
        logger.warning("%s: cleaned up %s, left behind by a killed run", domain_dir, path)
    if running:
        raise PrepError(
            f"{running[0]} belongs to another prep of {domain_dir.name} that may still be running (another host, or a "
            f"live process); wait for it, or remove {running[0]} if that run is gone"
        )


def _describe_output(entry: dict[str, Any]) -> str:
    text = f"{entry['rows_in']} rows in"
    if "blocking" in entry:
        return f"{text}, fatal issues {entry['blocking']}; all issues {entry['issues']}"
    return f"{text}, {entry['rows_out']} kept, {entry['dropped']} dropped; issues {entry['issues'] or 'none'}"


def prepare_domain(
    guru_dir: Path,
    out_dir: Path,
    domain: str,
    drop: frozenset[str] = frozenset(),
    with_eval: bool = True,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Convert one domain's train file(s) and evaluation sets, and publish them together.

    Args:
        guru_dir: local GURU copy with ``train/``, ``online_eval/``, ``offline_eval/``.
        out_dir: output root; files go to ``<out_dir>/<domain>/``, which is replaced as a whole.
        domain: ``math``, ``code`` or ``logic``.
        drop: issue names (see :data:`ISSUES`) whose rows are dropped (and counted) instead of kept or fatal; the
            warnings (``weak_gt_strong``, ``duplicate_prompt``) are dropped from the train file only.
        with_eval: also convert the evaluation sets.
        batch_size: rows per record batch when streaming.

    Returns:
        The domain report (also written to ``<out_dir>/<domain>/prep_report.json``).

    Raises:
        PrepError: missing or unreadable inputs, an output folder that cannot be written, or fatal issues not named
            in ``drop``. ``<out_dir>/<domain>`` is then left as it was; a fatal-issue report goes to
            ``<out_dir>/<domain>.prep_report.failed.json``.
    """
    if domain not in DOMAINS:
        raise PrepError(f"unknown domain {domain!r}; choose from {sorted(DOMAINS)}")
    unknown = set(drop) - set(ISSUES)
    if unknown:
        raise PrepError(f"unknown issue names {sorted(unknown)}; choose from {list(ISSUES)}")
    spec = DOMAINS[domain]
    domain_dir = out_dir / domain
    jobs: list[tuple[str, list[Path], bool]] = [
        ("train", [find_file(guru_dir / "train", name) for name in spec.train], True)
    ]
    if with_eval:
        for eval_name, file_name in spec.evals.items():
            candidates = [guru_dir / "online_eval", guru_dir / "offline_eval"]
            path = None
            for folder in candidates:
                try:
                    path = find_file(folder, file_name)
                    break
                except PrepError:
                    continue
            if path is None:
                raise PrepError(f"evaluation set {eval_name}: no {file_name}_<size>.parquet in {candidates}")
            jobs.append((f"val_{eval_name}", [path], False))
    failed_report = out_dir / f"{domain}.prep_report.failed.json"
    cannot_write = f"cannot write in the output directory {out_dir}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        _recover(domain_dir)
        _check_replaceable(domain_dir)
    except OSError as err:
        raise PrepError(f"{cannot_write}: {err.strerror or err}") from err
    try:
        # the domain's outputs are built in a hidden staging folder that replaces the domain folder as a whole
        with publishing(domain_dir) as staging:
            try:
                staging.mkdir()
            except OSError as err:
                raise PrepError(f"{cannot_write}: {err.strerror or err}") from err
            report: dict[str, Any] = {"domain": domain, "drop": sorted(drop), "outputs": {}}
            for name, sources, is_train in jobs:
                split = "train" if is_train else "test"
                entry = _write_output(sources, staging / f"{name}.parquet", domain, split, is_train, drop, batch_size)
                entry["path"] = str(domain_dir / f"{name}.parquet")
                report["outputs"][name] = entry
                logger.info("%s/%s: %s", domain, name, _describe_output(entry))
            blocked = {name: e["blocking"] for name, e in report["outputs"].items() if "blocking" in e}
            report["written"] = not blocked
            if blocked:
                _write_json(failed_report, report)
                kept = f"{domain_dir} is unchanged" if domain_dir.exists() else f"{domain_dir} was not created"
                raise PrepError(
                    f"{domain}: fatal row issues {blocked}; nothing written ({kept}); report: {failed_report}. "
                    f"Fix the input or pass --drop <issue> to drop and count those rows."
                )
            _write_json(staging / "prep_report.json", report)
        failed_report.unlink(missing_ok=True)
    except OSError as err:
        raise PrepError(f"{domain}: cannot write the outputs in {out_dir}: {err.strerror or err}") from err
    files = ", ".join(f"{name}.parquet ({e['rows_out']} rows)" for name, e in report["outputs"].items())
    logger.info("%s: wrote %s and prep_report.json to %s", domain, files, domain_dir)
    return report


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, payload, sort_keys=True)


def prepare(
    guru_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    domains: list[str] | tuple[str, ...] = ("math", "code", "logic"),
    drop: frozenset[str] | set[str] = frozenset(),
    with_eval: bool = True,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Convert several domains (see :func:`prepare_domain`); returns ``{domain: report}``.

    Each domain is published on its own: if a later domain fails, the earlier ones are already complete.
    """
    guru, out = Path(guru_dir), Path(out_dir)
    if not guru.is_dir():
        raise PrepError(f"--guru-dir {guru} is not a directory")
    return {d: prepare_domain(guru, out, d, frozenset(drop), with_eval, batch_size) for d in domains}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 on bad input or an unwritable output, with one message)."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.data.guru", description=__doc__.split("\n\n")[0])
    parser.add_argument("--guru-dir", required=True, help="local GURU copy (train/, online_eval/, offline_eval/)")
    parser.add_argument("--out-dir", required=True, help="output root; writes <out-dir>/<domain>/*.parquet")
    parser.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=list(DOMAINS))
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        choices=list(ISSUES) + ["all"],
        help="drop (and count) rows with this issue instead of failing or keeping them; repeatable. The warnings "
        "weak_gt_strong and duplicate_prompt are dropped from train files only (evaluation repeats are intended)",
    )
    parser.add_argument("--skip-eval", action="store_true", help="convert only the train files")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per streamed record batch")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (with tracebacks of errors)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    drop = frozenset(ISSUES) if "all" in args.drop else frozenset(args.drop)
    try:
        prepare(args.guru_dir, args.out_dir, args.domains, drop, not args.skip_eval, args.batch_size)
    except (PrepError, OSError) as err:  # OSError: a backstop; reads and writes are wrapped into PrepError
        logger.debug("traceback of the error below", exc_info=True)
        logger.error("%s", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
