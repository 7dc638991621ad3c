"""Load training runs for the tables and figures: our run logs, TensorBoard event files or wandb CSV exports.

Supported inputs (see ``analysis/README.md`` for the full description):

- **Run logs** (:mod:`bots_verl.runlog`, written by real verl runs and by the simulator): a directory holding
  ``meta.json`` and ``metrics.jsonl``.
- **TensorBoard**: a directory holding ``events.out.tfevents.*`` files (verl's ``tensorboard`` backend) plus a
  ``meta.json`` sidecar with the run's metadata (same keys as a run log; ``format``/``version`` may be left out).
- **wandb CSV export**: ``<name>.csv`` with a ``_step`` column and one column per metric (``run.history()`` or the
  UI's export), plus a ``<name>.meta.json`` sidecar (or a ``meta.json`` in the same directory if it holds one CSV).

Metadata missing from a sidecar can be filled by ``--meta KEY=VALUE`` on the command line (``meta_defaults`` here);
a value from the sidecar always wins. ``domain``, ``method`` and ``seed`` are required for every run.

Every run comes back as a :class:`Run` whose ``metrics`` frame is indexed by step, one column per metric. Metric
lines logged for the same step (verl logs training and validation metrics separately) are merged.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bots_verl import runlog
from bots_verl.runlog import ACC_PATTERN

__all__ = [
    "LoadError",
    "Run",
    "accuracy_metric",
    "find_run_paths",
    "load_run",
    "load_runs",
    "model_sort_key",
    "parse_meta_args",
]

logger = logging.getLogger(__name__)


#: A parameter count in a model name: ``Qwen2.5-1.5B-Instruct`` -> 1.5.
MODEL_SIZE = re.compile(r"(?<![\d.])(?P<size>\d+(?:\.\d+)?)[bB](?![a-zA-Z])")

REQUIRED_META = ("domain", "method", "seed")
SIDECAR_SUFFIX = ".meta.json"
TB_PREFIX = "events.out.tfevents."


class LoadError(ValueError):
    """A run or metric cannot be used; the message names the run (its path) and what is missing."""


@dataclass
class Run:
    """One training run: its metadata and its metrics (index: step, sorted; columns: metric names).

    Attributes:
        path: where it was read from (directory or CSV file); used in every error message.
        label: the row label in tables: ``extra["label"]`` if set, else ``method``.
        total_steps: the training budget in steps (from metadata, else the last logged step).
    """

    path: Path
    run_id: str
    source: str
    domain: str
    model: str
    method: str
    seed: int
    hparams: dict[str, Any]
    total_steps: int
    extra: dict[str, Any]
    metrics: pd.DataFrame = field(repr=False)
    input_format: str = "runlog"
    #: metric -> {step: value} of values that were logged but are not finite numbers (NaN, infinities, null, text),
    #: at steps where no finite value of that metric was logged; ``metrics`` holds NaN there, like an unlogged step.
    nonfinite: dict[str, dict[int, Any]] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        """The selector's name in tables: ``extra.label`` if given, else the method."""
        return str(self.extra.get("label") or self.method)

    @property
    def last_step(self) -> int:
        """The last step with any logged metric."""
        return int(self.metrics.index.max()) if len(self.metrics) else -1

    @property
    def flat_hparams(self) -> dict[str, Any]:
        """Hyperparameters as one flat dict.

        Real runs written by ``bots_verl.main`` record every hyperparameter the selector ran with in
        ``extra.effective_hparams`` (defaults included), and those are used when present. Otherwise: the simulator
        nests the selector's own hyperparameters (``{"selector": "bots", "hparams": {"rho": 0.2}, "dapo": false,
        ...}``), older real runs store the given ones flat; nested keys win over outer ones.
        """
        effective = self.extra.get("effective_hparams")
        if isinstance(effective, dict):
            return dict(effective)
        inner = self.hparams.get("hparams")
        if isinstance(inner, dict):
            return {**{k: v for k, v in self.hparams.items() if k != "hparams"}, **inner}
        return dict(self.hparams)

    @property
    def selector(self) -> str:
        """The selector behind the label.

        ``extra.selector`` for real runs (``bots_verl.main`` writes it there), ``hparams.selector`` for the simulator,
        else the method.
        """
        return str(self.extra.get("selector") or self.hparams.get("selector") or self.method)

    @property
    def model_name(self) -> str:
        """The model's short name (``Qwen/Qwen2.5-7B-Instruct`` -> ``Qwen2.5-7B-Instruct``); ``""`` if unknown."""
        return self.model.rstrip("/").rsplit("/", 1)[-1]

    def name(self) -> str:
        """A short human-readable identity for messages: ``domain/method/seedK (path)``."""
        return f"{self.domain}/{self.label}/seed{self.seed} ({self.path})"

    def column(self, metric: str) -> pd.Series:
        """The finite values of one metric, indexed by step.

        Raises:
            LoadError: if the run never logged ``metric`` (names the run and the metric).
        """
        if metric not in self.metrics.columns:
            raise LoadError(
                f"run {self.name()}: metric {metric!r} is missing (it has {len(self.metrics.columns)} others)"
            )
        series = self.metrics[metric].astype(np.float64)
        series = series[np.isfinite(series)]
        if series.empty:
            raise LoadError(f"run {self.name()}: metric {metric!r} has no finite value")
        return series

    def has(self, metric: str) -> bool:
        """Whether the run logged at least one finite value of ``metric``."""
        return metric in self.metrics.columns and bool(np.isfinite(self.metrics[metric].astype(np.float64)).any())


def model_sort_key(name: str) -> tuple[float, str]:
    """Order models by their parameter count when the name gives one (``...-1.5B-...`` before ``...-7B-...``)."""
    match = MODEL_SIZE.search(name)
    return (float(match["size"]) if match else math.inf, name)


def accuracy_metric(run: Run, metric: str | Mapping[str, str] | None = None) -> tuple[str, pd.Series]:
    """The run's held-out accuracy curve (step -> accuracy) and a name for it.

    Args:
        run: the run.
        metric: an explicit metric name, or one per domain (``{domain: name}``: a domain left out takes the default);
            by default the run's ``val-core/<source>/acc/mean@<n>`` metric. With several data sources, the curve is
            their unweighted mean at steps where every source was evaluated (the largest ``n`` per source), so a
            domain with two benchmarks is scored by their average, as the paper does.

    Every logged value must be a finite number in [0, 1] (:func:`bots_verl.runlog.check_accuracy`, the same rule as
    the toy benchmark's records in :mod:`analysis.paired`): 7.5, NaN or an infinity at an evaluated step is an error,
    never used as given nor dropped. A step where the metric was not logged is a step without an evaluation.

    Raises:
        LoadError: if the metric is missing, or a logged value is not a finite number in [0, 1], naming the run, the
            metric and the step.
    """
    if isinstance(metric, Mapping):
        metric = metric.get(run.domain)
    if metric is not None:
        return metric, _accuracy_column(run, metric)
    best_n: dict[str, tuple[int, str]] = {}
    for name in run.metrics.columns:
        match = ACC_PATTERN.match(name)
        if match:
            n = int(match["n"])
            if match["source"] not in best_n or n > best_n[match["source"]][0]:
                best_n[match["source"]] = (n, name)
    if not best_n:
        raise LoadError(
            f"run {run.name()}: no eval accuracy metric (val-core/<data_source>/acc/mean@<n>); "
            "enable verl validation (trainer.test_freq) or pass the metric name explicitly"
        )
    names = sorted(name for _, name in best_n.values())
    if len(names) == 1:
        return names[0], _accuracy_column(run, names[0])
    for name in names:
        _accuracy_column(run, name)
    frame = run.metrics[names].astype(np.float64).dropna(how="any")
    if frame.empty:
        raise LoadError(f"run {run.name()}: accuracy metrics {names} were never all logged at the same step")
    return "mean(" + ", ".join(names) + ")", frame.mean(axis=1)


def _accuracy_column(run: Run, metric: str) -> pd.Series:
    """:meth:`Run.column` of an accuracy metric, every logged value checked to be a finite number in [0, 1]."""
    series = run.column(metric)
    bad = run.nonfinite.get(metric)
    if bad:
        step = min(bad)
        more = f" (and at {len(bad) - 1} more steps: {sorted(bad)[1:6]})" if len(bad) > 1 else ""
        _check_accuracy(run, metric, step, bad[step], more)
    outside = series[(series < 0.0) | (series > 1.0)]
    if not outside.empty:
        more = f" (and at {len(outside) - 1} more steps: {list(outside.index[1:6])})" if len(outside) > 1 else ""
        _check_accuracy(run, metric, int(outside.index[0]), float(outside.iloc[0]), more)
    return series


def _check_accuracy(run: Run, metric: str, step: int, value: Any, more: str = "") -> None:
    try:
        runlog.check_accuracy(value, f"run {run.name()}: metric {metric!r} at step {step}")
    except ValueError as exc:
        raise LoadError(f"{exc}{more}") from None


def parse_meta_args(items: Iterable[str] | None) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings (``--meta``) into metadata; values are read as JSON where possible.

    ``hparams.rho=0.1`` sets a key inside ``hparams``.
    """
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--meta expects KEY=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if key.startswith("hparams."):
            out.setdefault("hparams", {})[key.split(".", 1)[1]] = value
        else:
            out[key] = value
    return out


def _read_sidecar(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LoadError(f"{path}: cannot read metadata sidecar ({exc})") from exc
    if not isinstance(meta, dict):
        raise LoadError(f"{path}: metadata sidecar must hold a JSON object")
    if meta.get("format", runlog.FORMAT) != runlog.FORMAT:
        raise LoadError(f"{path}: not a {runlog.FORMAT} metadata file (format={meta.get('format')!r})")
    return meta


def _finite(value: Any) -> bool:
    """Whether a logged value is a finite number (a numeric string counts, as ``pd.to_numeric`` reads it)."""
    if isinstance(value, bool):
        return True
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _frame(records: Iterable[tuple[int, Mapping[str, Any]]]) -> tuple[pd.DataFrame, dict[str, dict[int, Any]]]:
    """Merge ``(step, {metric: value})`` records into one row per step; later finite values win.

    Returns:
        The frame, and per metric the steps where it was logged only as something that is not a finite number
        (:attr:`Run.nonfinite`): the frame cannot tell those from steps where the metric was not logged.
    """
    rows = []
    bad: dict[str, dict[int, Any]] = {}
    good: set[tuple[str, int]] = set()
    for step, data in records:
        rows.append({"step": step, **data})
        for key, value in data.items():
            if _finite(value):
                good.add((key, step))
            else:
                bad.setdefault(key, {})[step] = value
    nonfinite = {
        key: kept for key, steps in bad.items() if (kept := {s: v for s, v in steps.items() if (key, s) not in good})
    }
    if not rows:
        return pd.DataFrame(index=pd.Index([], name="step", dtype=np.int64)), nonfinite
    frame = pd.DataFrame(rows)
    # verl logs training and validation metrics of one step in separate lines: groupby().last() keeps, per column,
    # the last non-null value of that step, which merges them.
    merged = frame.groupby("step", sort=True).last()
    return merged.apply(pd.to_numeric, errors="coerce"), nonfinite


def _read_tensorboard(directory: Path) -> tuple[pd.DataFrame, dict[str, dict[int, Any]]]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    records: list[tuple[int, dict[str, float]]] = []
    for events in sorted(directory.glob(TB_PREFIX + "*")):
        acc = ea.EventAccumulator(str(events), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        tags = acc.Tags()
        for tag in tags.get("scalars", []):
            records.extend((ev.step, {tag: float(ev.value)}) for ev in acc.Scalars(tag))
        # TF2-style writers store scalars as rank-0 tensors.
        for tag in tags.get("tensors", []):
            from tensorboard.util import tensor_util

            for ev in acc.Tensors(tag):
                value = tensor_util.make_ndarray(ev.tensor_proto)
                if value.shape == () and np.issubdtype(value.dtype, np.number):
                    records.append((ev.step, {tag: float(value)}))
    return _frame(records)


def _read_wandb_csv(path: Path) -> tuple[pd.DataFrame, dict[str, dict[int, Any]]]:
    raw = pd.read_csv(path)
    if "_step" not in raw.columns:
        raise LoadError(f"{path}: a wandb CSV export needs a '_step' column (found {list(raw.columns)[:8]}...)")
    raw = raw.dropna(subset=["_step"])
    # wandb's own bookkeeping columns (_runtime, _timestamp, ...) are not metrics.
    metric_cols = [c for c in raw.columns if not str(c).startswith("_")]
    records = []
    for line, (step, row) in enumerate(zip(raw["_step"], raw[metric_cols].to_dict("records"), strict=True)):
        try:
            step = runlog.parse_int(step, "_step")
        except ValueError as exc:
            raise LoadError(f"{path}: data row {line + 1}: {exc}") from None
        # an empty (or NaN) cell is a metric not logged at that step, as wandb exports them
        records.append((step, {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}))
    return _frame(records)


def _build(
    path: Path,
    meta: dict[str, Any],
    read: tuple[pd.DataFrame, dict[str, dict[int, Any]]],
    input_format: str,
) -> Run:
    metrics, nonfinite = read
    missing = [k for k in REQUIRED_META if meta.get(k) is None]
    if missing:
        raise LoadError(
            f"run {path}: metadata lacks {missing}; add them to its meta.json sidecar or pass --meta KEY=VALUE"
        )
    if metrics.empty:
        raise LoadError(f"run {path}: no metrics logged")
    total = meta.get("total_steps")
    if total is None:
        total = int(metrics.index.max())
        logger.warning("run %s: total_steps not in metadata; using the last logged step %d", path, total)
    try:
        seed = runlog.parse_int(meta["seed"], f"run {path}: metadata 'seed'")
        total = runlog.parse_int(total, f"run {path}: metadata 'total_steps'")
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    return Run(
        path=path,
        run_id=str(meta.get("run_id") or path.name),
        source=str(meta.get("source") or "unknown"),
        domain=str(meta["domain"]),
        model=str(meta.get("model") or ""),
        method=str(meta["method"]),
        seed=seed,
        hparams=dict(meta.get("hparams") or {}),
        total_steps=total,
        extra=dict(meta.get("extra") or {}),
        metrics=metrics,
        input_format=input_format,
        nonfinite=nonfinite,
    )


def _merge_meta(meta: dict[str, Any], defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(meta)
    for key, value in (defaults or {}).items():
        if key == "hparams":
            out["hparams"] = {**value, **(out.get("hparams") or {})}
        elif out.get(key) is None:
            out[key] = value
    return out


def load_run(path: str | os.PathLike, meta_defaults: Mapping[str, Any] | None = None) -> Run:
    """Load one run from a run-log directory, a TensorBoard directory or a wandb CSV file.

    Args:
        path: the run's directory, or a ``.csv`` file.
        meta_defaults: metadata for keys the run's own metadata lacks (CLI ``--meta``).

    Raises:
        LoadError: unknown layout, unreadable files or missing required metadata (the message names the path).
    """
    path = Path(path)
    if path.is_file() and path.suffix == ".csv":
        sidecar = path.with_name(path.stem + SIDECAR_SUFFIX)
        if not sidecar.is_file() and len(list(path.parent.glob("*.csv"))) == 1:
            sidecar = path.parent / runlog.META_FILE
        meta = _read_sidecar(sidecar) if sidecar.is_file() else {}
        return _build(path, _merge_meta(meta, meta_defaults), _read_wandb_csv(path), "wandb-csv")
    if not path.is_dir():
        raise LoadError(f"{path}: not a run directory or a .csv file")
    # runlog.metrics_files also finds a resumed run whose metrics so far sit only in metrics.part<k>.jsonl.
    if runlog.metrics_files(path):
        try:
            meta = runlog.read_meta(path) if (path / runlog.META_FILE).is_file() else {}
            frame = _frame(runlog.iter_metrics(path))
        except ValueError as exc:
            raise LoadError(str(exc)) from exc
        return _build(path, _merge_meta(meta, meta_defaults), frame, "runlog")
    if any(path.glob(TB_PREFIX + "*")):
        sidecar = path / runlog.META_FILE
        meta = _read_sidecar(sidecar) if sidecar.is_file() else {}
        return _build(path, _merge_meta(meta, meta_defaults), _read_tensorboard(path), "tensorboard")
    raise LoadError(f"{path}: neither a run log (metrics.jsonl), TensorBoard events nor a wandb .csv")


def find_run_paths(root: str | os.PathLike) -> list[Path]:
    """All runs under ``root`` (itself included): run-log dirs, TensorBoard dirs and ``.csv`` exports, sorted.

    A file given as ``root`` is always returned (so a malformed CSV is reported); CSVs found while walking count only
    if their header has a ``_step`` column.
    """
    root = Path(root)
    if not root.exists():
        raise LoadError(f"{root}: no such file or directory")
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        if runlog.metrics_files(here) or any(f.startswith(TB_PREFIX) for f in filenames):
            found.append(here)
            dirnames.clear()  # a run directory is a leaf; do not descend into its checkpoints
            continue
        # Only CSVs that look like wandb exports: other CSVs in a runs tree (summaries, datasets) are not runs.
        found.extend(here / f for f in sorted(filenames) if f.endswith(".csv") and _has_step_column(here / f))
    return found


def _has_step_column(path: Path) -> bool:
    with path.open() as fh:
        return "_step" in fh.readline().strip().split(",")


def load_runs(roots: Iterable[str | os.PathLike], meta_defaults: Mapping[str, Any] | None = None) -> list[Run]:
    """Load every run under the given directories (or files), sorted by domain, label, hparams and seed.

    Raises:
        LoadError: if no run is found, or a run cannot be read.
    """
    roots = list(roots)
    runs = [load_run(p, meta_defaults) for root in roots for p in find_run_paths(root)]
    if not runs:
        raise LoadError(f"no runs found under {[str(r) for r in roots]}")
    runs.sort(
        key=lambda r: (
            model_sort_key(r.model_name),
            r.domain,
            r.label,
            json.dumps(r.hparams, sort_keys=True, default=str),
            r.seed,
        )
    )
    logger.info("loaded %d runs from %s", len(runs), [str(r) for r in roots])
    return runs
