"""The toy benchmark's bookkeeping: where a run lives, its checked ``done.json`` record, which runs finished."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bots_verl import runlog

__all__ = ["finished_record", "finished_runs", "median", "read_done", "run_dir_of"]


def run_dir_of(root: Path, arm: str, seed: int) -> Path:
    """The directory of one run of the benchmark in ``root``."""
    return root / "runs" / f"{arm}_s{seed}"


def read_done(done_file: Path) -> dict[str, Any]:
    """A run's ``done.json`` record, checked: an object with the run's ``selector``, integer ``seed`` and ``steps``,
    and an ``accuracy`` curve of finite values in [0, 1] at integer steps.

    Raises:
        ValueError: naming the file, for a truncated, unreadable or hand-edited record, with what to do about it.
    """
    try:
        record = json.loads(done_file.read_text())
        if not isinstance(record, dict):
            raise ValueError(f"it holds a {type(record).__name__}, not an object")
        missing = [key for key in ("selector", "seed", "steps", "accuracy") if key not in record]
        if missing:
            raise ValueError(f"it lacks {missing}")
        for key in ("seed", "steps"):
            record[key] = runlog.parse_int(record[key], key)
        if record["steps"] < 0:
            raise ValueError(f"steps must not be negative, got {record['steps']}")
        for key in ("accuracy", "pool_accuracy"):
            curve = record.get(key, {})
            if not isinstance(curve, dict):
                raise ValueError(f"{key} is a {type(curve).__name__}, not an object of step -> accuracy")
            for step, value in curve.items():
                runlog.check_accuracy(value, f"{key} at step {runlog.parse_int(step, f'{key} step key')}")
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise ValueError(
            f"{done_file}: not a readable run record ({exc}); it is written atomically, so it was cut or edited "
            f"outside the benchmark: restore it, or remove the run's directory {done_file.parent} to train it again"
        ) from exc
    return record


def finished_record(run_dir: Path, steps: int) -> dict[str, Any] | None:
    """The ``done.json`` record of the run in ``run_dir`` if it finished at ``steps`` steps, else None.

    A run finished at fewer steps has no record here: a benchmark with a longer horizon extends it.

    Raises:
        ValueError: the run finished at more steps than ``steps`` (a checkpoint cannot be shortened: use another
            ``--out``), or its ``done.json`` cannot be read (:func:`read_done`).
    """
    done_file = run_dir / "done.json"
    if not done_file.is_file():
        return None
    record = read_done(done_file)
    if record["steps"] > steps:
        raise ValueError(
            f"{run_dir.name} finished at step {record['steps']}, the profile asks for {steps}: a run cannot be "
            "shortened; give this profile another --out"
        )
    return record if record["steps"] == steps else None


def finished_runs(root: Path) -> list[Path]:
    """The runs under ``<root>/runs`` that finished (a ``done.json``), in name order.

    A run that was stopped, or is still training in another sitting, has no ``done.json`` and may have logged nothing
    yet; the tables and figures hold finished runs only, as ``--summarize-finished`` does.

    Raises:
        RuntimeError: when no run has finished.
    """
    runs = (
        sorted(d for d in (root / "runs").iterdir() if (d / "done.json").is_file()) if (root / "runs").is_dir() else []
    )
    if not runs:
        raise RuntimeError(f"no finished run in {root / 'runs'}")
    return runs


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (0 for none): a run's median step time, and the runs' median of those."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2) if ordered else 0.0
