"""The run-log layout shared by real verl runs, the simulator and ``analysis/`` (format version 1).

One directory per run::

    <run_dir>/meta.json       what the run was: {"format": "bots-verl-run", "version": 1, "run_id", "source",
                              "domain", "model", "method", "seed", "hparams", "total_steps", "created", "extra"}
    <run_dir>/metrics.jsonl   one line per logged step, exactly verl's ``file`` tracking backend
                              (``verl.utils.tracking.FileLogger``): {"step": int, "data": {metric: number, ...}}

A resumed real run first moves the existing ``metrics.jsonl`` aside as ``metrics.part<k>.jsonl`` (verl's file logger
truncates the file it opens; see :func:`rotate_metrics`); readers take the parts in order, then ``metrics.jsonl``, and
a step logged twice (before the crash and again after the resume) keeps its later values. Only a resumed run may
continue a run log: the entry point refuses a fresh run in a directory that holds logged steps
(``bots_verl.integration.safety.resume``).

A real run gets ``metrics.jsonl`` from verl itself (``trainer.logger=[console,file]`` with
``VERL_FILE_LOGGER_PATH=<run_dir>/metrics.jsonl``) and ``meta.json`` from our entry point; the simulator writes both
with :class:`RunWriter`.

Metric names follow verl's tracking; every key is spelled once, in :mod:`bots_verl.core.metric_keys` (the core
computes most of the figures and may import nothing above itself), and re-exported here, where readers take them:

- ``val-core/<data_source>/acc/mean@<n>`` (:func:`val_accuracy_key`, :data:`ACC_PATTERN`): held-out accuracy
  (verl's validation); the simulator uses the data source ``sim-<domain>``.
- ``bots/<name>`` (:func:`bots_key` of a ``*_STAT``): selector statistics (``stats()``) and the step's figures, e.g.
  ``bots/batch/effective_task_ratio``, ``bots/rollouts``, ``bots/select_ms``, ``bots/implicit/capability_mu``.
- ``timing_s/step`` (:data:`STEP_TIME_METRIC`): wall-clock seconds of the step (verl's; real runs only).

**Method labels** (``meta.json`` ``method``): :data:`METHODS` names the paper's five main-table methods (Random,
Offline easy->hard, BOTS-MoPPS, BOTS-DOTS, BOTS) and :func:`method_spec` also reads the ablation labels
``bots_rho<x>``, ``bots_lambda<x>`` and ``bots_greedy``. Each label means one selector with fixed hyperparameters; the
entry point refuses a label that disagrees with the config it runs (``bots_verl.config.bots_config``), and
``analysis/`` uses the same table for the paper's row order and names.

This module uses the standard library only.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bots_verl.core import metric_keys
from bots_verl.core.defaults import PAPER_BOTS
from bots_verl.core.metric_keys import *  # noqa: F403  (the key table, re-exported for the readers)
from bots_verl.fileio import write_json_atomic

__all__ = [
    *metric_keys.__all__,
    "FORMAT",
    "METHODS",
    "PAPER_METHODS",
    "VERSION",
    "MethodSpec",
    "RunWriter",
    "check_accuracy",
    "iter_metrics",
    "logged_metrics_files",
    "method_display",
    "method_spec",
    "metrics_by_step",
    "metrics_files",
    "parse_int",
    "read_meta",
    "rotate_metrics",
    "sweep_labels",
    "write_meta",
]

FORMAT = "bots-verl-run"
VERSION = 1
META_FILE = "meta.json"
METRICS_FILE = "metrics.jsonl"
META_KEYS = ("run_id", "source", "domain", "model", "method", "seed", "hparams", "total_steps", "extra")


_INT_TEXT = re.compile(r"^[+-]?[0-9]+$")


def parse_int(value: Any, what: str) -> int:
    """A seed, step or count read from a file, as an ``int``, refusing anything that is not exactly an integer.

    ``int()`` alone turns a seed of 0.7 into 0 and ``True`` into 1, and its message for ``"zero"`` names no file.
    Accepted: an ``int`` (not a ``bool``), a float with an integral value (``3.0``, as some JSON writers emit), and a
    string of decimal digits (JSON object keys are strings: ``"10"``).

    Args:
        value: the value read.
        what: what it is and where it was read, for the message (``"/runs/x/meta.json: seed"``).

    Raises:
        ValueError: naming ``what`` and the value.
    """
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        return value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    elif isinstance(value, str) and _INT_TEXT.match(value.strip()):
        return int(value)
    elif hasattr(value, "dtype") and hasattr(value, "item"):  # numpy integer scalars
        return parse_int(value.item(), what)
    raise ValueError(f"{what} must be an integer, got {value!r}")


def check_accuracy(value: Any, what: str) -> float:
    """An accuracy read from a run log or a benchmark record, as a float; it must be a finite number in [0, 1].

    The one rule for held-out accuracies everywhere they are read (``analysis.tables``, ``analysis.paired``,
    ``analysis.figures``, the toy benchmark): a value that was logged at a step but is not a finite number in
    [0, 1] (7.5, NaN, an infinity, null) is an error, never dropped or used as given. A step where no accuracy was
    logged is simply a step without an evaluation.

    Args:
        value: the value read.
        what: the run, the metric and the step, for the message.

    Raises:
        ValueError: naming ``what`` and the value.
    """
    try:
        number = float(value) if not isinstance(value, bool) and value is not None else math.nan
    except (TypeError, ValueError):
        raise ValueError(f"{what}: accuracy {value!r} is not a number (an accuracy must be in [0, 1])") from None
    if not math.isfinite(number):
        logged = "null" if value is None else repr(value)
        raise ValueError(f"{what}: accuracy is {logged}, not a finite number (an accuracy must be in [0, 1])")
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{what}: accuracy {number:g} is outside [0, 1]")
    return number


def _jsonable(value: Any) -> Any:
    """Plain JSON for numpy scalars and non-finite floats (written as null)."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_meta(run_dir: str | os.PathLike, **meta: Any) -> Path:
    """Write ``meta.json`` atomically (temp file + rename) and return its path.

    Args:
        run_dir: the run's directory (created if missing).
        **meta: ``run_id, source, domain, model, method, seed, hparams, total_steps, extra``; unknown keys are an
            error so that typos do not silently vanish.
    """
    unknown = set(meta) - set(META_KEYS)
    if unknown:
        raise ValueError(f"unknown meta keys {sorted(unknown)}; allowed: {list(META_KEYS)}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    record.update({k: meta.get(k) for k in META_KEYS})
    record["hparams"] = record["hparams"] or {}
    record["extra"] = record["extra"] or {}
    path = run_dir / META_FILE
    write_json_atomic(path, record, sort_keys=True, default=_jsonable)
    return path


def read_meta(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Read and check ``meta.json``.

    Raises:
        ValueError: if it is missing, not this format, or a newer version.
    """
    path = Path(run_dir) / META_FILE
    if not path.is_file():
        raise ValueError(f"{run_dir}: no {META_FILE}")
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it ({exc})") from exc
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a {FORMAT} file (it holds a {type(meta).__name__}, not an object)")
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} file (format={meta.get('format')!r})")
    if parse_int(meta.get("version", 0), f"{path}: version") > VERSION:
        raise ValueError(f"{path}: format version {meta['version']} is newer than this reader ({VERSION})")
    return meta


def _part_number(path: Path) -> int:
    return int(path.name[len("metrics.part") : -len(".jsonl")])


def metrics_files(run_dir: str | os.PathLike) -> list[Path]:
    """The run's metrics files in logging order: ``metrics.part<k>.jsonl`` by k, then ``metrics.jsonl``."""
    run_dir = Path(run_dir)
    parts = [p for p in run_dir.glob("metrics.part*.jsonl") if p.name[len("metrics.part") : -len(".jsonl")].isdigit()]
    files = sorted(parts, key=_part_number)
    if (run_dir / METRICS_FILE).is_file():
        files.append(run_dir / METRICS_FILE)
    return files


def logged_metrics_files(run_dir: str | os.PathLike) -> list[Path]:
    """The run's non-empty metrics files (:func:`metrics_files`): those that hold logged steps."""
    return [path for path in metrics_files(run_dir) if path.stat().st_size > 0]


def rotate_metrics(run_dir: str | os.PathLike) -> Path | None:
    """Move a non-empty ``metrics.jsonl`` aside as the next ``metrics.part<k>.jsonl``; return its new path.

    Call it before a resumed run reopens the file: verl's file logger opens it for writing, which would erase the
    steps logged before the restart.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file() or path.stat().st_size == 0:
        return None
    parts = [p for p in metrics_files(run_dir) if p.name != METRICS_FILE]
    target = path.with_name(f"metrics.part{_part_number(parts[-1]) + 1 if parts else 0}.jsonl")
    os.replace(path, target)
    return target


def iter_metrics(run_dir: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(step, data)`` from the run's metrics files (:func:`metrics_files`) in order; nulls come back as NaN.

    Raises:
        ValueError: when there is no metrics file, or on a malformed line (file and line number in the message).
    """
    files = metrics_files(run_dir)
    if not files:
        raise ValueError(f"{run_dir}: no {METRICS_FILE}")
    for path in files:
        with path.open() as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    step, data = parse_int(record["step"], "step"), record["data"]
                    if not isinstance(data, dict):
                        raise TypeError(f"'data' is a {type(data).__name__}, not an object")
                except (ValueError, KeyError, TypeError, RecursionError) as exc:
                    raise ValueError(f"{path}:{lineno}: malformed metrics line ({exc})") from exc
                yield step, {k: (math.nan if v is None else v) for k, v in data.items()}


def metrics_by_step(run_dir: str | os.PathLike) -> dict[int, dict[str, Any]]:
    """Every step's metrics, the lines of one step merged in file order (training and evaluation lines share a step;
    a later line's value wins).

    Raises:
        ValueError: as :func:`iter_metrics`.
    """
    merged: dict[int, dict[str, Any]] = {}
    for step, data in iter_metrics(run_dir):
        merged.setdefault(step, {}).update(data)
    return merged


class RunWriter:
    """Writes a run in the layout above: ``meta.json`` at once, then one ``metrics.jsonl`` line per :meth:`log`.

    Lines are flushed as they are written, so a crashed run keeps every step it logged.
    """

    def __init__(self, run_dir: str | os.PathLike, **meta: Any) -> None:
        self.run_dir = Path(run_dir)
        write_meta(self.run_dir, **meta)
        self._fh: IO[str] | None = (self.run_dir / METRICS_FILE).open("w")

    def log(self, step: int, data: dict[str, Any]) -> None:
        """Append one step's metrics (numbers; NaN and infinities are written as null)."""
        if self._fh is None:
            raise ValueError("RunWriter is closed")
        line = json.dumps({"step": int(step), "data": {k: _jsonable(v) for k, v in data.items()}})
        self._fh.write(line + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the metrics file (idempotent)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------ method labels
@dataclass(frozen=True)
class MethodSpec:
    """What a method label means: one registered selector with fixed hyperparameters.

    Attributes:
        label: the ``method`` written to ``meta.json`` (and the recipe's ``METHOD``).
        display: the paper's name for it (table rows, figure legends).
        selector: the ``bots_verl.core`` selector it runs.
        hparams: the hyperparameters that define it; every other one stays at the selector's default.
        source: where the settings come from (see ``recipes/common.sh`` for the full citations).
    """

    label: str
    display: str
    selector: str
    hparams: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


#: The paper's main-table methods, in its row order.
PAPER_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("random", "Random", "random", {}, "paper Sec. 4: uniform sampling, the reference of every ratio"),
    MethodSpec(
        "offline_easy2hard",
        "Offline (easy→hard)",
        "offline_easy2hard",
        {},
        "paper Sec. 4; authors' Trinity selector offline_easy2hard: reference pass rates, easiest first",
    ),
    # The paper's BOTS-MoPPS row is the ``bots`` selector at lam = 0: not the registered ``mopps`` selector, which keeps
    # BOTS' forgetting (lam = 0.1, rho = 0). Both names are in archived runs (the recipes' METHOD=bots_mopps, the toy
    # benchmark's mopps arm), so both labels stay and mean what they always meant.
    MethodSpec(
        "bots_mopps",
        "BOTS-MoPPS",
        "bots",
        {**PAPER_BOTS, "lam": 0.0, "rho": 0.0, "evidence": "none"},
        "paper notes: 'lambda = 0, rho = 0' (explicit evidence only, Thompson sampling); MoPPS' math default "
        "decay 1.0 = lambda 0",
    ),
    MethodSpec(
        "bots_dots",
        "BOTS-DOTS",
        "bots",
        {**PAPER_BOTS, "lam": 1.0, "rho": 1.0, "selection": "greedy"},
        "paper notes: 'approximating lambda = 1, rho = 1', 'without Thompson sampling' (greedy on the posterior mean)",
    ),
    MethodSpec("bots", "BOTS", "bots", dict(PAPER_BOTS), "paper Sec. 4 defaults"),
)

#: Every fixed label by name (the ablation labels with a value are parsed by :func:`method_spec`).
METHODS: dict[str, MethodSpec] = {
    **{m.label: m for m in PAPER_METHODS},
    "bots_greedy": MethodSpec(
        "bots_greedy",
        "BOTS (greedy)",
        "bots",
        {**PAPER_BOTS, "selection": "greedy"},
        "paper ablation: Thompson sampling vs greedy selection on the posterior mean, lambda = rho = 0.1",
    ),
}

# Ablation labels carrying a value: bots_rho<x> (the rho sweep at lambda 0.1) and bots_lambda<x> (lambda at rho 0.1).
_SWEEPS = {"bots_rho": ("rho", "ρ"), "bots_lambda": ("lam", "λ")}
_SWEEP_LABEL = re.compile(r"^(?P<prefix>bots_rho|bots_lambda)(?P<value>.*)$")


def method_spec(label: str) -> MethodSpec | None:
    """The meaning of a method label, or None for a free-form label (which claims no particular config).

    Raises:
        ValueError: for ``bots_rho<x>`` / ``bots_lambda<x>`` whose ``x`` is not a number in [0, 1].
    """
    if label in METHODS:
        return METHODS[label]
    match = _SWEEP_LABEL.match(label)
    if match is None:
        return None
    key, symbol = _SWEEPS[match["prefix"]]
    try:
        value = float(match["value"])
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"method label {label!r}: {match['prefix']}<x> is a sweep label and needs a value in [0, 1] "
            f"(e.g. {match['prefix']}0.05), got {match['value']!r}"
        )
    return MethodSpec(
        label, f"BOTS ({symbol}={value:g})", "bots", {**PAPER_BOTS, key: value}, f"paper {symbol} ablation"
    )


def sweep_labels(hparams: Mapping[str, Any]) -> list[MethodSpec]:
    """The sweep labels (``bots_rho<x>``, ``bots_lambda<x>``) at the values ``hparams`` holds for the swept keys."""
    specs = [method_spec(f"{prefix}{hparams[key]:g}") for prefix, (key, _) in _SWEEPS.items() if key in hparams]
    return [spec for spec in specs if spec is not None]


def method_display(label: str) -> str:
    """The paper's name for a label (``bots_mopps`` -> ``BOTS-MoPPS``); other labels come back unchanged."""
    try:
        spec = method_spec(label)
    except ValueError:
        return label
    return spec.display if spec is not None else label
