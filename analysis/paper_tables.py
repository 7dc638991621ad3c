"""The paper's tables from run logs: the main table and the ρ / λ / selection ablations, as markdown or LaTeX.

Layout (the paper's main table): rows are methods, in the paper's order and with its names (Random, Offline
(easy→hard), BOTS-MoPPS, BOTS-DOTS, BOTS; see :data:`bots_verl.runlog.PAPER_METHODS`), one block per model size
(1.5B before 7B) when the runs hold several; columns are domain × metric:

- ``TTB(25/50/100%)`` (lower is better) and ``BSF(25/50/100%)`` (higher is better), relative to Random with the same
  seed (:func:`bots_verl.core.selection_metrics.ttb` / ``bsf``), then summarised over seeds. TTB divides by Random's
  own steps to its target by default (Random = 1.00, as in the paper); ``--ttb-denominator budget`` divides by x% of
  the budget;
- ``ETR``: the mean over steps of the per-step effective task ratio (absolute, not relative);
- ``Roll(100%)``: rollouts spent to first reach Random's best within the budget, over Random's rollouts (same
  denominator as TTB);
- ``Time(100%)``: the same with wall-clock seconds (``timing_s/step``), only for domains whose runs logged it.

Every cell is the mean over seeds with a 95% Student-t interval (:func:`bots_verl.core.selection_metrics.interval`);
``—`` means no seed reached the target, ``(k/n —)`` that k of n seeds did not (the mean is then over the others).

Rendered by :mod:`analysis.table_text`; the command line is ``python -m analysis.tables``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from analysis import loader
from analysis.cost_metrics import Curve, cost_to_baseline
from analysis.loader import LoadError, Run
from analysis.table_model import BASELINE, PAPER_LABELS, Column, Table, row_labeller, row_sort_key
from bots_verl.core import defaults
from bots_verl.core import selection_metrics as core
from bots_verl.runlog import ETR_METRIC, ROLLOUTS_METRIC, STEP_TIME_METRIC

__all__ = [
    "ABLATION_PARAMS",
    "ablation_rows",
    "ablation_table",
    "cost_curve",
    "main_columns",
    "main_table",
    "select_methods",
]

logger = logging.getLogger(__name__)

#: The ablated hyperparameters: accepted hparams keys, display symbol, and whether values are numbers.
ABLATION_PARAMS: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "rho": (("rho",), "ρ", True),
    "lam": (("lam", "lamb", "lambda"), "λ", True),
    "selection": (("selection",), "selection", False),
}
#: BOTS defaults (paper Sec. 4): the parameters not ablated are held here.
DEFAULTS: dict[str, Any] = {"rho": defaults.RHO, "lam": defaults.LAM, "selection": defaults.SELECTION}


def main_columns(wall_clock: bool = False) -> list[Column]:
    """The main table's columns for one domain; ``wall_clock`` adds ``Time(100%)``."""
    cols = [Column(f"TTB{int(f * 100)}", f"TTB({int(f * 100)}%)↓", "ttb", f) for f in (0.25, 0.5, 1.0)]
    cols += [Column(f"BSF{int(f * 100)}", f"BSF({int(f * 100)}%)↑", "bsf", f) for f in (0.25, 0.5, 1.0)]
    cols.append(Column("ETR", "ETR↑", "etr"))
    cols.append(Column("Roll100", "Roll(100%)↓", "cost", 1.0, ROLLOUTS_METRIC))
    if wall_clock:
        cols.append(Column("Time100", "Time(100%)↓", "cost", 1.0, STEP_TIME_METRIC))
    return cols


def select_methods(runs: Sequence[Run], methods: Sequence[str] | None) -> list[Run]:
    """The runs whose label is in ``methods`` (``["paper"]``: the paper's five); all runs if ``methods`` is empty.

    Raises:
        LoadError: if a requested label has no run (names the labels found).
    """
    if not methods:
        return list(runs)
    wanted = [m for item in methods for m in (PAPER_LABELS if item == "paper" else (item,))]
    found = {r.label for r in runs}
    missing = [m for m in wanted if m not in found]
    if missing:
        raise LoadError(f"no runs labelled {missing}; labels found: {sorted(found)}")
    return [r for r in runs if r.label in wanted]


def _where(model: str, domain: str, models: Sequence[str]) -> str:
    return f"domain {domain}" + (f" of {model}" if len(set(models)) > 1 else "")


def _check_lengths(where: str, rows: Mapping[str, Mapping[int, Run]], baseline: Mapping[int, Run]) -> None:
    """The runs of each row (the baseline's too) share one budget and last logged step, none past the baseline's.

    A row shorter than the baseline (an arm stopped early because each of its steps costs several baseline steps of
    rollouts) is censored, not refused: :meth:`_Scorer.score` keeps the baseline's target and budget.
    """
    base_total = base_gap = None
    for row_runs in [baseline, *rows.values()]:
        by_total: dict[int, list[str]] = {}
        for run in row_runs.values():
            by_total.setdefault(run.total_steps, []).append(run.name())
        if len(by_total) > 1:
            detail = "; ".join(f"total_steps={v}: {', '.join(names)}" for v, names in sorted(by_total.items()))
            raise LoadError(f"{where}: runs of different lengths cannot be compared ({detail})")
        if base_total is None:
            first = next(iter(row_runs.values()))
            base_total, base_gap = first.total_steps, first.total_steps - first.last_step
        # one budget per row, so one gap between budget and last logged step means one last step per row; a run that
        # stopped logging before its own budget (crashed) is shorter than it claims
        short = [
            f"last logged step={r.last_step}: {r.name()} (total_steps={r.total_steps})"
            for r in row_runs.values()
            if r.total_steps - r.last_step != base_gap
        ]
        if short:
            raise LoadError(f"{where}: runs of different lengths cannot be compared ({'; '.join(short)})")
        longer = [r.name() for r in row_runs.values() if r.total_steps > base_total]
        if longer:
            raise LoadError(f"{where}: runs longer than the {BASELINE} budget ({base_total} steps): {longer}")


Block = tuple[str, str]  # (model name, domain)


def _group(
    runs: Iterable[Run], row_of: Callable[[Run], str | None], prefer: Callable[[Run], bool] | None = None
) -> dict[Block, dict[str, dict[int, Run]]]:
    """``{(model, domain): {row: {seed: run}}}``.

    Two runs in one cell (same model, domain, row and seed) are an error, unless ``prefer`` picks exactly one of them
    (an ablation cell that the main run and a sweep run both describe takes the main run).
    """
    out: dict[Block, dict[str, dict[int, Run]]] = {}
    for run in runs:
        row = row_of(run)
        if row is None:
            continue
        seeds = out.setdefault((run.model_name, run.domain), {}).setdefault(row, {})
        other = seeds.get(run.seed)
        if other is not None:
            if prefer is not None and prefer(run) != prefer(other):
                kept, dropped = (run, other) if prefer(run) else (other, run)
                logger.info("row %r seed %d: using %s, not the identical config %s", row, run.seed, kept, dropped)
                seeds[run.seed] = kept
                continue
            raise LoadError(
                f"domain {run.domain}, row {row!r}, seed {run.seed}: two runs ({other.path} and {run.path}); "
                "give them distinct labels (meta extra.label) or load them separately"
            )
        seeds[run.seed] = run
    return out


def cost_curve(run: Run, metric: str) -> Curve:
    """The run's per-step cost (``bots/rollouts`` or ``timing_s/step``) as a :class:`~analysis.cost_metrics.Curve`.

    Raises:
        LoadError: if the run never logged ``metric``, or a training step lacks it (naming the run and the steps).
    """
    series = run.metrics[metric].astype(np.float64) if metric in run.metrics.columns else None
    if series is None or not np.isfinite(series).any():
        raise LoadError(f"run {run.name()}: metric {metric!r} is missing (needed for the cost-to-target column)")
    # Every training step must carry its cost, or the cumulative sum undercounts; step 0 is verl's initial eval.
    holes = [int(s) for s, v in series.items() if s > 0 and not np.isfinite(v)]
    if holes:
        raise LoadError(f"run {run.name()}: metric {metric!r} is missing at steps {holes[:10]}")
    series = series[np.isfinite(series)]
    return Curve(series.index.to_numpy(np.float64), series.to_numpy(np.float64))


class _Scorer:
    """Per-block scoring against the baseline's runs, paired by seed; caches accuracy curves."""

    def __init__(
        self,
        where: str,
        baseline: Mapping[int, Run],
        acc_metric: str | Mapping[str, str] | None,
        level: float,
        ttb_denominator: str,
    ) -> None:
        self.where = where
        self.level = level
        self.baseline = baseline
        self.acc_metric = acc_metric
        self.ttb_denominator = ttb_denominator
        self._acc: dict[int, Curve] = {}
        self.acc_names: set[str] = set()

    def acc(self, run: Run) -> Curve:
        key = id(run)
        if key not in self._acc:
            name, series = loader.accuracy_metric(run, self.acc_metric)
            self.acc_names.add(name)
            self._acc[key] = Curve(series.index.to_numpy(np.float64), series.to_numpy(np.float64))
        return self._acc[key]

    def base(self, run: Run, label: str) -> Run:
        if run.seed not in self.baseline:
            raise LoadError(
                f"{self.where}: {label} seed {run.seed} has no {BASELINE} run with the same seed to pair with "
                f"({BASELINE} seeds: {sorted(self.baseline)}); run {run.path}"
            )
        return self.baseline[run.seed]

    @staticmethod
    def cost(run: Run, metric: str) -> Curve:
        return cost_curve(run, metric)

    def score(self, label: str, runs: Mapping[int, Run], col: Column) -> core.Interval:
        values = []
        for seed in sorted(runs):
            run = runs[seed]
            if col.kind == "etr":
                values.append(float(run.column(ETR_METRIC).mean()))
                continue
            base = self.base(run, label)
            # the baseline's budget and target, also for a run stopped before it (censored: not reached = NaN)
            total = base.total_steps
            acc, bacc = self.acc(run), self.acc(base)
            if col.kind == "ttb":
                values.append(
                    core.ttb(acc.steps, acc.values, bacc.steps, bacc.values, col.fraction, total, self.ttb_denominator)
                )
            elif col.kind == "bsf":
                past_end = core.budget_horizon(col.fraction, total) > run.total_steps
                values.append(
                    float("nan")
                    if past_end
                    else core.bsf(acc.steps, acc.values, bacc.steps, bacc.values, col.fraction, total)
                )
            elif col.kind == "cost":
                cost, bcost = self.cost(run, col.metric), self.cost(base, col.metric)
                values.append(cost_to_baseline(acc, cost, bacc, bcost, col.fraction, total, self.ttb_denominator))
            else:
                raise ValueError(f"unknown column kind {col.kind!r}")
        return core.interval(np.asarray(values, dtype=np.float64), self.level)


def _build_table(
    title: str,
    row_header: str,
    runs: Sequence[Run],
    row_of: Callable[[Run], str | None],
    include_baseline_row: bool,
    acc_metric: str | Mapping[str, str] | None,
    level: float,
    ttb_denominator: str,
    row_key: Callable[[str], Any] = row_sort_key,
    prefer: Callable[[Run], bool] | None = None,
) -> Table:
    core.check_ttb_denominator(ttb_denominator)
    baselines = _group((r for r in runs if r.label == BASELINE), lambda r: BASELINE)
    grouped = _group((r for r in runs if r.label != BASELINE), row_of, prefer)
    blocks = sorted(set(grouped) | set(baselines), key=lambda b: (loader.model_sort_key(b[0]), b[1]))
    if not grouped and not (include_baseline_row and baselines):
        raise LoadError(f"{title}: no runs to tabulate")
    all_models = [m for m, _ in blocks]
    cells: dict[tuple[str, str, str, str], core.Interval] = {}
    columns: dict[str, list[Column]] = {}
    seeds: dict[tuple[str, str, str], list[int]] = {}
    accuracy: dict[str, set[str]] = {}
    rows: set[str] = set()
    for model, domain in blocks:
        where = _where(model, domain, all_models)
        if (model, domain) not in baselines:
            methods = sorted(grouped.get((model, domain), {}))
            raise LoadError(f"{where}: no {BASELINE!r} baseline runs (needed for TTB/BSF); methods: {methods}")
        base = baselines[(model, domain)][BASELINE]
        per_row = dict(grouped.get((model, domain), {}))
        if include_baseline_row:
            per_row[BASELINE] = base
        if not per_row:
            continue
        used = [r for seeds_ in per_row.values() for r in seeds_.values()] + list(base.values())
        _check_lengths(where, per_row, base)
        timed = [r for r in used if r.has(STEP_TIME_METRIC)]
        if timed and len(timed) != len(used):
            lacking = [r.name() for r in used if not r.has(STEP_TIME_METRIC)]
            raise LoadError(f"{where}: some runs log {STEP_TIME_METRIC!r} and these do not: {lacking}")
        block_cols = main_columns(wall_clock=bool(timed))
        if len(block_cols) > len(columns.get(domain, [])):
            columns[domain] = block_cols
        scorer = _Scorer(where, base, acc_metric, level, ttb_denominator)
        for row, row_runs in per_row.items():
            rows.add(row)
            seeds[(model, row, domain)] = sorted(row_runs)
            for col in block_cols:
                cells[(model, row, domain, col.key)] = scorer.score(row, row_runs, col)
        accuracy.setdefault(domain, set()).update(scorer.acc_names)
    models = sorted({m for (m, _, _, _) in cells}, key=loader.model_sort_key)
    domains = sorted(columns)
    return Table(
        title,
        row_header,
        sorted(rows, key=row_key),
        domains,
        columns,
        cells,
        seeds,
        {d: ", ".join(sorted(names)) for d, names in accuracy.items()},
        level,
        models,
        ttb_denominator,
    )


def main_table(
    runs: Sequence[Run],
    acc_metric: str | Mapping[str, str] | None = None,
    level: float = 0.95,
    ttb_denominator: str = "baseline",
    methods: Sequence[str] | None = None,
) -> Table:
    """The main table: one row per method label (split by hparams that vary within a label), in the paper's order.

    Args:
        runs: loaded runs (any domains and model sizes; one block of rows per model).
        acc_metric: the accuracy metric, or one per domain (a domain not in the mapping takes the default); default:
            each run's ``val-core/*/acc/mean@*`` (see :func:`analysis.loader.accuracy_metric`).
        level: the confidence level of the intervals over seeds.
        ttb_denominator: ``"baseline"`` (Random's own steps; Random = 1.00) or ``"budget"``.
        methods: only these labels (``["paper"]``: the paper's five); Random is always the baseline.

    Raises:
        LoadError: missing baseline, unpaired seeds, runs of different lengths, missing metrics.
    """
    if methods:
        runs = select_methods(runs, [*methods, BASELINE])
    return _build_table(
        "Main table", "Method", runs, row_labeller(runs), True, acc_metric, level, ttb_denominator, row_sort_key
    )


def _hparam(hparams: Mapping[str, Any], param: str) -> Any:
    for key in ABLATION_PARAMS[param][0]:
        if key in hparams:
            return hparams[key]
    return None


def _rest(run: Run) -> str:
    """The run's hyperparameters other than the ablated ones, as a comparable string."""
    # "selector" is how the run is matched, so it is not part of what must agree.
    ablated = {key for keys, _, _ in ABLATION_PARAMS.values() for key in keys} | {"selector"}
    return json.dumps({k: v for k, v in run.flat_hparams.items() if k not in ablated}, sort_keys=True, default=str)


def ablation_rows(
    runs: Sequence[Run], param: str, method: str = "bots", defaults: Mapping[str, Any] | None = None
) -> tuple[Callable[[Run], str | None], Callable[[str], Any], set[str]]:
    """How runs fall into an ablation's rows: ``(row_of, row_key, rows found)``.

    A run takes part if its selector (``extra.selector`` for real runs, ``hparams.selector`` for the simulator, else
    its method) is ``method``, the parameters not ablated are at their held values, and its remaining
    hyperparameters equal those of the runs labelled ``method``. A missing value counts as the default.

    Raises:
        ValueError: for an unknown ``param``.
    """
    if param not in ABLATION_PARAMS:
        raise ValueError(f"unknown ablation parameter {param!r}; choose from {sorted(ABLATION_PARAMS)}")
    held = {**DEFAULTS, **(defaults or {})}
    _, symbol, numeric = ABLATION_PARAMS[param]
    candidates = [r for r in runs if r.selector == method and r.label != BASELINE]
    reference = [_rest(r) for r in candidates if r.label == method] or [_rest(r) for r in candidates]
    common = max(set(reference), key=reference.count) if reference else None

    def value_of(run: Run, name: str) -> Any:
        value = _hparam(run.flat_hparams, name)
        if value is None:
            return held_value(name)
        return float(value) if ABLATION_PARAMS[name][2] else str(value)

    def same(a: Any, b: Any) -> bool:
        return math.isclose(a, b) if isinstance(a, float) and isinstance(b, float) else a == b

    def held_value(name: str) -> Any:
        return float(held[name]) if ABLATION_PARAMS[name][2] else str(held[name])

    def row_of(run: Run) -> str | None:
        if run.selector != method or run.label == BASELINE or _rest(run) != common:
            return None
        if any(not same(value_of(run, o), held_value(o)) for o in ABLATION_PARAMS if o != param):
            return None
        value = value_of(run, param)
        return f"{symbol} = {value:g}" if numeric else f"{symbol} = {value}"

    def row_key(row: str) -> Any:
        value = row.split("=", 1)[1].strip()
        if numeric:
            return (0, float(value), "")
        return (0 if value == str(held[param]) else 1, 0.0, value)

    return row_of, row_key, {row_of(r) for r in runs} - {None}


def ablation_table(
    runs: Sequence[Run],
    param: str,
    method: str = "bots",
    defaults: Mapping[str, Any] | None = None,
    acc_metric: str | None = None,
    level: float = 0.95,
    ttb_denominator: str = "baseline",
) -> Table:
    """A ρ, λ or selection-rule ablation: runs of selector ``method`` grouped by their value of ``param``.

    See :func:`ablation_rows` for which runs take part. When two runs describe the same cell (the main ``bots`` run
    and a sweep run at the default value, same seed), the run labelled ``method`` is used.

    Args:
        runs: loaded runs (Random's are the baseline and are not shown).
        param: ``"rho"``, ``"lam"`` (hparams keys ``lam``, ``lamb`` and ``lambda``) or ``"selection"``.
        method: the selector whose runs are ablated.
        defaults: the held values (the paper's ρ = λ = 0.1, Thompson sampling), also used for missing values.
        acc_metric, level, ttb_denominator: as for :func:`main_table`.

    Raises:
        LoadError: if fewer than two values of ``param`` are found, or as for :func:`main_table`.
    """
    row_of, row_key, values = ablation_rows(runs, param, method, defaults)
    symbol = ABLATION_PARAMS[param][1]
    if len(values) < 2:
        raise LoadError(
            f"{symbol} ablation: need runs of selector {method!r} at two or more values of {param} "
            f"(found {sorted(values) or 'none'})"
        )
    return _build_table(
        f"{symbol} ablation ({method})",
        symbol,
        runs,
        row_of,
        False,
        acc_metric,
        level,
        ttb_denominator,
        row_key=row_key,
        prefer=lambda run: run.label == method,
    )
