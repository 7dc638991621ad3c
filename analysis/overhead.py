"""The cost of task selection: selection + posterior-update time as a share of step time, aggregated per run.

The paper reports the overhead as at most 0.2% of training time (per its reviews). A run's share here is the sum over
its training steps of the selection and update milliseconds over the sum of its step times, so steps where selection
happened to be attributed to a neighbour (verl pops the selection timing when the step's outcomes are read) still
add up. Metrics used, per step:

- ``bots/select_ms``, ``bots/update_ms``: the selector's own time (in the posterior actor for verl runs, in-process
  for the simulator); their sum over the step time is the **algorithm share**.
- ``bots/select_roundtrip_ms``, ``bots/update_roundtrip_ms``, ``bots/read_ms`` (verl runs): what the trainer waits
  for, Ray round trips and reading the outcomes from TransferQueue included; their sum is the **trainer share**.
- ``timing_s/step`` (verl's step timer, which wraps BOTSTrainer.step: the dataloader fetch that triggers selection,
  generation, the update and the posterior update). The simulator has no step time, so its shares are ``n/a`` and
  only the milliseconds are shown.

Each cell is the mean over seeds with the core's Student-t interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from analysis import loader, render
from analysis.loader import LoadError, Run
from analysis.table_model import display, row_labeller, row_sort_key
from bots_verl.core import selection_metrics as core
from bots_verl.runlog import (
    READ_MS_METRIC,
    SELECT_MS_METRIC,
    SELECT_ROUNDTRIP_MS_METRIC,
    STEP_TIME_METRIC,
    UPDATE_MS_METRIC,
    UPDATE_ROUNDTRIP_MS_METRIC,
)

__all__ = ["OverheadTable", "RunOverhead", "overhead_table", "run_overhead", "to_grid"]

TRAINER_MS = (SELECT_ROUNDTRIP_MS_METRIC, UPDATE_ROUNDTRIP_MS_METRIC, READ_MS_METRIC)


@dataclass(frozen=True)
class RunOverhead:
    """One run's overhead: per-step means (ms, s) and shares of the summed step time (NaN where not logged)."""

    select_ms: float
    update_ms: float
    trainer_ms: float
    step_s: float
    share: float
    trainer_share: float


def _sum_over(run: Run, metrics: Sequence[str], steps: np.ndarray) -> np.ndarray:
    frame = run.metrics.reindex(index=steps, columns=list(metrics)).astype(np.float64)
    return frame.to_numpy().sum(axis=1)


def run_overhead(run: Run) -> RunOverhead:
    """Aggregate one run's selection and update time over its training steps (step > 0).

    Raises:
        LoadError: if the run never logged ``bots/select_ms`` and ``bots/update_ms`` (names the run).
    """
    for metric in (SELECT_MS_METRIC, UPDATE_MS_METRIC):
        run.column(metric)  # raises a LoadError naming the run and the metric
    frame = run.metrics
    training = frame.index[frame.index > 0]
    algo_cols = [SELECT_MS_METRIC, UPDATE_MS_METRIC]
    algo_ok = training[np.isfinite(frame.loc[training, algo_cols].astype(np.float64)).all(axis=1).to_numpy()]
    algo = _sum_over(run, algo_cols, algo_ok)
    has_trainer = all(run.has(m) for m in TRAINER_MS)
    trainer_ok = algo_ok
    if has_trainer:
        mask = np.isfinite(frame.loc[algo_ok, list(TRAINER_MS)].astype(np.float64)).all(axis=1).to_numpy()
        trainer_ok = algo_ok[mask]
    trainer = _sum_over(run, TRAINER_MS, trainer_ok) if has_trainer else np.array([])

    step_s = share = trainer_share = float("nan")
    if run.has(STEP_TIME_METRIC):
        step = frame[STEP_TIME_METRIC].astype(np.float64)
        timed = algo_ok[np.isfinite(step.reindex(algo_ok).to_numpy())]
        step_s = float(step.reindex(timed).mean())
        total_ms = 1e3 * float(step.reindex(timed).sum())
        if total_ms > 0:
            share = float(_sum_over(run, algo_cols, timed).sum()) / total_ms
            if has_trainer:
                both = trainer_ok[np.isfinite(step.reindex(trainer_ok).to_numpy())]
                trainer_total = 1e3 * float(step.reindex(both).sum())
                trainer_share = float(_sum_over(run, TRAINER_MS, both).sum()) / trainer_total
    sel = frame[SELECT_MS_METRIC].astype(np.float64).reindex(algo_ok)
    upd = frame[UPDATE_MS_METRIC].astype(np.float64).reindex(algo_ok)
    return RunOverhead(
        select_ms=float(sel.mean()),
        update_ms=float(upd.mean()),
        trainer_ms=float(trainer.mean()) if trainer.size else float("nan"),
        step_s=step_s,
        share=share if algo.size else float("nan"),
        trainer_share=trainer_share,
    )


#: The table's columns: (RunOverhead field, header, scale for display).
COLUMNS = (
    ("select_ms", "select ms/step", 1.0),
    ("update_ms", "update ms/step", 1.0),
    ("trainer_ms", "trainer-side ms/step", 1.0),
    ("step_s", "step s", 1.0),
    ("share", "algorithm share %", 100.0),
    ("trainer_share", "trainer share %", 100.0),
)


@dataclass
class OverheadTable:
    """``cells[(model, domain, row)][field]`` holds the interval over seeds of one :class:`RunOverhead` field."""

    keys: list[tuple[str, str, str]]
    cells: dict[tuple[str, str, str], dict[str, core.Interval]] = field(default_factory=dict)
    level: float = 0.95


def overhead_table(runs: Sequence[Run], level: float = 0.95) -> OverheadTable:
    """Per model, domain and row (the main table's row labels): each overhead quantity over seeds.

    Raises:
        LoadError: if a run lacks the selection timings (names it), or no run has them at all.
    """
    row_of = row_labeller(runs)
    groups: dict[tuple[str, str, str], list[RunOverhead]] = {}
    for run in runs:
        groups.setdefault((run.model_name, run.domain, row_of(run)), []).append(run_overhead(run))
    if not groups:
        raise LoadError("overhead: no runs")
    keys = sorted(groups, key=lambda k: (loader.model_sort_key(k[0]), k[1], row_sort_key(k[2])))
    table = OverheadTable(keys, level=level)
    for key in keys:
        table.cells[key] = {
            name: core.interval(np.array([getattr(o, name) for o in groups[key]]) * scale, level)
            for name, _, scale in COLUMNS
        }
    return table


def to_grid(table: OverheadTable, digits: int = 2) -> render.Grid:
    """The table as a grid: Model, domain, Method, then the :data:`COLUMNS`."""
    rows = [
        [model, domain, display(row)]
        + [
            table.cells[(model, domain, row)][name].format(digits + 1 if scale > 1 else digits)
            for name, _, scale in COLUMNS
        ]
        for model, domain, row in table.keys
    ]
    caption = [
        f"Mean [{table.level:.0%} interval] over seeds of per-run aggregates: algorithm share = sum of bots/select_ms "
        "+ bots/update_ms over the sum of timing_s/step; trainer share = the same with the trainer-side round trips "
        "and outcome reads; — = not logged (the simulator has no step time). The paper reports at most 0.2%."
    ]
    header = ["Model", "Domain", "Method", *(h for _, h, _ in COLUMNS)]
    return render.Grid("Selection overhead", header, rows, caption, lead=3)
