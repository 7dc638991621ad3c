"""GURU rows read, checked and converted into one verl RL parquet file, with the issues counted per source file.

The output schema and the issues are described in :mod:`bots_verl.data.guru`, which publishes the files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bots_verl.fileio import (
    fsync_file,
)
from bots_verl.rewards import domain_of
from bots_verl.rewards.code_plan import parse_tests

__all__ = [
    "FATAL_ISSUES",
    "ISSUES",
    "PASS_RATE_COLUMNS",
    "STRONG_COLUMN",
    "WARN_ISSUES",
    "WEAK_COLUMN",
    "PrepError",
    "output_schema",
    "write_output",
]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

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

_EXTRA_INFO_KEYS = ("split", "index", "id", "idx", "prefix")


class PrepError(RuntimeError):
    """Input that cannot be converted as asked (missing files or columns, or fatal row issues that were not dropped)."""


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


def write_output(
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
