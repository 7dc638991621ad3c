"""The inputs of the paired statistics (:mod:`analysis.paired_stats`): a toy benchmark's runs.

Input: a toy benchmark (:mod:`bots_verl.toy.benchmark`): its ``summary.json`` (the per-run records: selector, seed,
accuracy curve) and, when present, the run logs under ``<benchmark>/runs/<selector>_s<seed>/run`` (for ETR,
rollouts and wall-clock; without them those statistics are marked not available).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis import loader
from analysis.cost_metrics import Curve
from analysis.loader import LoadError, Run
from bots_verl import runlog

__all__ = ["RunRecord", "load_benchmark", "records_from_summary"]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------------ inputs
@dataclass
class RunRecord:
    """One run: its held-out accuracy curve and, when available, its run log.

    Attributes:
        selector: the selector (the table row).
        seed: the training seed (the pairing key).
        total_steps: the training budget in steps.
        accuracy: held-out accuracy at the evaluated steps (strictly increasing).
        log: the run log (:class:`analysis.loader.Run`) for ETR, rollouts and wall-clock; ``None`` if absent.
    """

    selector: str
    seed: int
    total_steps: int
    accuracy: Curve
    log: Run | None = None


def _curve(points: Any, where: str) -> Curve:
    """A record's ``{step: accuracy}`` as a curve; every step an integer, every value a finite number in [0, 1].

    The same rule as the run logs' accuracies (:func:`analysis.loader.accuracy_metric`): a value that is not a
    finite number in [0, 1] (null, NaN, 7.5) is an error naming the record, the curve and the step.
    """
    if not isinstance(points, Mapping):
        raise LoadError(f"{where}: not an object of step -> accuracy (a {type(points).__name__})")
    pairs = []
    try:
        for key, value in points.items():
            step = runlog.parse_int(key, f"{where}: step key")
            pairs.append((step, runlog.check_accuracy(value, f"{where} at step {step}")))
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    pairs.sort()
    return Curve(np.array([p[0] for p in pairs], np.float64), np.array([p[1] for p in pairs], np.float64))


def _load_log(path: Path, selector: str, seed: int) -> Run | None:
    """The run log at ``path`` if there is one (``None`` otherwise); it must be the record's seed."""
    if not path.is_dir() or not runlog.metrics_files(path):
        return None
    run = loader.load_run(path)
    if run.seed != seed:
        raise LoadError(f"run log {path} is seed {run.seed}, but its benchmark record says {selector} seed {seed}")
    return run


def records_from_summary(
    summary: Mapping[str, Any], runs_dir: Path | None = None, key: str = "accuracy", source: str = "summary"
) -> list[RunRecord]:
    """The runs of a toy benchmark summary (``summary.json``), with their run logs when ``runs_dir`` holds them.

    Args:
        summary: the summary (its ``runs`` records: ``selector``, ``seed``, ``steps``, ``accuracy``).
        runs_dir: the benchmark's ``runs/`` directory; each run's log is ``<selector>_s<seed>/run``.
        key: the record's curve to compare (``accuracy``: held-out; ``pool_accuracy``: training pool).
        source: where the summary was read, for messages.

    Raises:
        LoadError: a record without the curve, a seed, step or budget that is not an integer, an accuracy that is not
            a finite number in [0, 1] (naming the record and the step), or a run log of another seed.
    """
    try:
        if not isinstance(summary, Mapping) or not isinstance(summary.get("runs"), list):
            raise ValueError("it holds no list of 'runs'")
        profile = summary.get("profile") or {}
        budget = profile.get("steps") if isinstance(profile, Mapping) else None
        if budget is not None:
            budget = runlog.parse_int(budget, "profile.steps")
    except ValueError as exc:
        raise LoadError(f"{source}: not a toy benchmark summary: {exc}") from None
    out = []
    for index, rec in enumerate(summary["runs"]):
        try:
            if not isinstance(rec, Mapping):
                raise ValueError(f"not an object: {rec!r:.80}")
            selector = str(rec["selector"])
            seed = runlog.parse_int(rec["seed"], "seed")
            steps = rec.get("steps")
            steps = runlog.parse_int(steps, "steps") if steps is not None else None
        except (KeyError, ValueError) as exc:
            raise LoadError(f"{source}: run record {index}: {exc}") from None
        if not rec.get(key):
            raise LoadError(f"{source}: benchmark record {selector} seed {seed} has no {key!r} curve")
        curve = _curve(rec[key], f"{source}: benchmark record {selector} seed {seed}: {key!r}")
        total = steps or budget or int(curve.steps[-1])
        log = _load_log(runs_dir / f"{selector}_s{seed}" / "run", selector, seed) if runs_dir else None
        out.append(RunRecord(selector, seed, total, curve, log))
    return out


def load_benchmark(path: str | Path, key: str = "accuracy") -> list[RunRecord]:
    """The run records of a finished toy benchmark: a directory holding ``summary.json``, or that file.

    Run logs are read from ``runs/`` next to the summary when they exist (the committed results have none).

    Raises:
        LoadError: no summary there, or as :func:`records_from_summary`.
    """
    path = Path(path)
    summary_file = path / "summary.json" if path.is_dir() else path
    if not summary_file.is_file():
        raise LoadError(f"{path}: no toy benchmark summary.json there")
    try:
        summary = json.loads(summary_file.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise LoadError(f"{summary_file}: cannot read it ({exc})") from exc
    runs_dir = summary_file.parent / "runs"
    records = records_from_summary(summary, runs_dir if runs_dir.is_dir() else None, key, str(summary_file))
    logger.info(
        "%d runs from %s, %d with run logs", len(records), summary_file, sum(r.log is not None for r in records)
    )
    return records
