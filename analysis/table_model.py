"""What a computed table holds, and how its rows are named and ordered.

The paper's tables (:mod:`analysis.paper_tables`), the place counts (:mod:`analysis.places`), the overhead table
(:mod:`analysis.overhead`) and the figures (:mod:`analysis.figures`) name a run's row the same way, so a figure's line
and a table's row with the same name hold the same runs. This module sits below all of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.loader import Run
from bots_verl import runlog
from bots_verl.core import selection_metrics as core

__all__ = [
    "BASELINE",
    "PAPER_LABELS",
    "Column",
    "Table",
    "display",
    "row_labeller",
    "row_sort_key",
    "varying_hparams",
]

#: The label every relative metric is computed against.
BASELINE = "random"
#: The paper's main-table methods, in its row order (labels as the recipes write them to meta.json).
PAPER_LABELS = tuple(m.label for m in runlog.PAPER_METHODS)


@dataclass(frozen=True)
class Column:
    """One metric column.

    Attributes:
        key: short id (``TTB25``).
        header: display header (``TTB(25%)↓``).
        kind: ``ttb``, ``bsf``, ``etr`` or ``cost``.
        fraction: budget fraction for ``ttb``/``bsf``/``cost``.
        metric: the per-step cost metric for ``cost``.
    """

    key: str
    header: str
    kind: str
    fraction: float | None = None
    metric: str | None = None


@dataclass
class Table:
    """A computed table: ``cells[(model, row, domain, column key)]`` holds an
    :class:`~bots_verl.core.selection_metrics.Interval`.

    Attributes:
        models: the model names (``Run.model_name``), smallest first; one block of rows each.
        rows: every row label, in display order (a model's own rows: :meth:`rows_of`).
        ttb_denominator: ``"baseline"`` or ``"budget"`` (see :func:`bots_verl.core.selection_metrics.ttb`).
    """

    title: str
    row_header: str
    rows: list[str]
    domains: list[str]
    columns: dict[str, list[Column]]
    cells: dict[tuple[str, str, str, str], core.Interval]
    seeds: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    accuracy: dict[str, str] = field(default_factory=dict)
    level: float = 0.95
    models: list[str] = field(default_factory=list)
    ttb_denominator: str = "baseline"

    def rows_of(self, model: str) -> list[str]:
        """The rows that have a cell for ``model``, in display order."""
        present = {r for (m, r, _, _) in self.cells if m == model}
        return [r for r in self.rows if r in present]

    def _model(self, model: str | None) -> str:
        if model is not None:
            return model
        if len(self.models) != 1:
            raise KeyError(f"the table holds models {self.models}; pass model=")
        return self.models[0]

    def cell(self, row: str, domain: str, key: str, model: str | None = None) -> core.Interval:
        """The interval at one cell (KeyError if the row has no runs there); ``model`` may be left out if unique."""
        return self.cells[(self._model(model), row, domain, key)]


def display(row: str) -> str:
    """A row's display name: the paper's name for a known label (``bots_mopps`` -> ``BOTS-MoPPS``), suffix kept."""
    base, sep, rest = row.partition(" (")
    return runlog.method_display(base) + sep + rest


def row_sort_key(label: str) -> tuple[int, str]:
    """The paper's row order first (Random ... BOTS), then other labels alphabetically."""
    base = label.partition(" (")[0]
    return (PAPER_LABELS.index(base) if base in PAPER_LABELS else len(PAPER_LABELS), label)


def _without_paths(value: Any) -> Any:
    """``value`` with every absolute path replaced by ``"<path>"`` (nested dicts and lists too)."""
    if isinstance(value, str):
        return "<path>" if os.path.isabs(value) else value
    if isinstance(value, dict):
        return {k: _without_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_paths(v) for v in value]
    return value


def varying_hparams(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Per label, the hparams keys whose values differ between its runs (they split the label into rows).

    Absolute paths inside a value (the oracle's ``truth_args.data``) say where a run read its files, not how it
    selected: runs of one build trained from two directories stay one row.
    """
    values: dict[str, dict[str, set[str]]] = {}
    for run in runs:
        per_key = values.setdefault(run.label, {})
        for key, value in run.flat_hparams.items():
            per_key.setdefault(key, set()).add(json.dumps(_without_paths(value), sort_keys=True, default=str))
    out: dict[str, list[str]] = {}
    for label, per_key in values.items():
        n_runs = sum(r.label == label for r in runs)
        has_key = {k: sum(k in r.flat_hparams for r in runs if r.label == label) for k in per_key}
        out[label] = sorted(k for k, v in per_key.items() if len(v) > 1 or has_key[k] != n_runs)
    return out


def row_labeller(runs: Sequence[Run]) -> Callable[[Run], str]:
    """The main table's row label of a run: its label, plus ``(k=v, ...)`` for hparams that vary within the label.

    The figures use the same labels, so a line and a table row with the same name hold the same runs.
    """
    varying = varying_hparams(runs)

    def row_of(run: Run) -> str:
        keys = varying.get(run.label, []) if run.label != BASELINE else []
        if not keys:
            return run.label
        hparams = run.flat_hparams
        return run.label + " (" + ", ".join(f"{k}={_without_paths(hparams.get(k, '-'))}" for k in keys) + ")"

    return row_of
