"""The paper's tables from run logs: the main table and the ρ / λ ablations, as markdown or LaTeX.

Layout (paper Sec. 4, Table 2): rows are selectors, columns are domain × metric:

- ``TTB(25/50/100%)`` (lower is better) and ``BSF(25/50/100%)`` (higher is better), relative to Random with the same
  seed (:func:`bots_verl.core.metrics.ttb` / ``bsf``), then summarised over seeds;
- ``ETR``: the mean over steps of the per-step effective task ratio (absolute, not relative);
- ``Roll(100%)``: rollouts spent to first reach Random's final best, over Random's rollouts in the whole budget;
- ``Time(100%)``: the same with wall-clock seconds (``timing_s/step``), only for domains whose runs logged it.

Every cell is the mean over seeds with a 95% Student-t interval (:func:`bots_verl.core.metrics.interval`); ``—`` means
no seed reached the target, ``(k/n —)`` that k of n seeds did not (the mean is then over the others).

Usage::

    python -m analysis.tables --runs runs/sim runs/verl --format md --out table.md
    python -m analysis.tables --runs runs/ablation --table rho --format latex
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis import loader
from analysis.loader import ETR_METRIC, ROLLOUTS_METRIC, STEP_TIME_METRIC, LoadError, Run
from analysis.metrics import Curve, cost_to_baseline
from bots_verl.core import metrics as core

__all__ = [
    "ABLATION_PARAMS",
    "Column",
    "Table",
    "ablation_table",
    "main",
    "main_columns",
    "main_table",
    "row_labeller",
    "tables_for",
    "to_latex",
    "to_markdown",
]

logger = logging.getLogger(__name__)

BASELINE = "random"
#: Preferred row order (the paper's); other labels follow alphabetically.
ROW_ORDER = ("random", "offline", "offline_easy2hard", "easy2hard", "mopps", "bots-mopps", "dots", "bots-dots", "bots")
#: The ablated hyperparameters, their accepted hparams keys and display names.
ABLATION_PARAMS: dict[str, tuple[tuple[str, ...], str]] = {
    "rho": (("rho",), "ρ"),
    "lam": (("lam", "lamb", "lambda"), "λ"),
}
#: BOTS defaults (paper Sec. 5): the other ablated parameter is held here.
DEFAULTS = {"rho": 0.1, "lam": 0.1}


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


def main_columns(wall_clock: bool = False) -> list[Column]:
    """The main table's columns for one domain; ``wall_clock`` adds ``Time(100%)``."""
    cols = [Column(f"TTB{int(f * 100)}", f"TTB({int(f * 100)}%)↓", "ttb", f) for f in (0.25, 0.5, 1.0)]
    cols += [Column(f"BSF{int(f * 100)}", f"BSF({int(f * 100)}%)↑", "bsf", f) for f in (0.25, 0.5, 1.0)]
    cols.append(Column("ETR", "ETR↑", "etr"))
    cols.append(Column("Roll100", "Roll(100%)↓", "cost", 1.0, ROLLOUTS_METRIC))
    if wall_clock:
        cols.append(Column("Time100", "Time(100%)↓", "cost", 1.0, STEP_TIME_METRIC))
    return cols


@dataclass
class Table:
    """A computed table: ``cells[(row, domain, column key)]`` holds an :class:`~bots_verl.core.metrics.Interval`."""

    title: str
    row_header: str
    rows: list[str]
    domains: list[str]
    columns: dict[str, list[Column]]
    cells: dict[tuple[str, str, str], core.Interval]
    seeds: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    accuracy: dict[str, str] = field(default_factory=dict)
    level: float = 0.95

    def cell(self, row: str, domain: str, key: str) -> core.Interval:
        """The interval at one cell (KeyError if the row has no runs in that domain)."""
        return self.cells[(row, domain, key)]


def row_sort_key(label: str) -> tuple[int, str]:
    return (ROW_ORDER.index(label) if label in ROW_ORDER else len(ROW_ORDER), label)


def _check_lengths(domain: str, runs: Sequence[Run]) -> None:
    """All runs compared in a domain must share the budget and the last logged step."""
    for attr, what in (("total_steps", "total_steps"), ("last_step", "last logged step")):
        by_value: dict[int, list[str]] = {}
        for run in runs:
            by_value.setdefault(getattr(run, attr), []).append(run.name())
        if len(by_value) > 1:
            detail = "; ".join(f"{what}={v}: {', '.join(names)}" for v, names in sorted(by_value.items()))
            raise LoadError(f"domain {domain}: runs of different lengths cannot be compared ({detail})")


def _group(runs: Iterable[Run], row_of: Callable[[Run], str | None]) -> dict[str, dict[str, dict[int, Run]]]:
    """``{domain: {row: {seed: run}}}``; two runs in one cell (same domain, row and seed) are an error."""
    out: dict[str, dict[str, dict[int, Run]]] = {}
    for run in runs:
        row = row_of(run)
        if row is None:
            continue
        seeds = out.setdefault(run.domain, {}).setdefault(row, {})
        if run.seed in seeds:
            raise LoadError(
                f"domain {run.domain}, row {row!r}, seed {run.seed}: two runs ({seeds[run.seed].path} and {run.path}); "
                "give them distinct labels (meta extra.label) or load them separately"
            )
        seeds[run.seed] = run
    return out


def _varying_hparams(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Per label, the hparams keys whose values differ between its runs (they split the label into rows)."""
    values: dict[str, dict[str, set[str]]] = {}
    for run in runs:
        per_key = values.setdefault(run.label, {})
        for key, value in run.flat_hparams.items():
            per_key.setdefault(key, set()).add(json.dumps(value, sort_keys=True, default=str))
    out: dict[str, list[str]] = {}
    for label, per_key in values.items():
        n_runs = sum(r.label == label for r in runs)
        has_key = {k: sum(k in r.flat_hparams for r in runs if r.label == label) for k in per_key}
        out[label] = sorted(k for k, v in per_key.items() if len(v) > 1 or has_key[k] != n_runs)
    return out


class _Scorer:
    """Per-domain scoring against the baseline's runs, paired by seed; caches accuracy curves."""

    def __init__(self, domain: str, baseline: Mapping[int, Run], acc_metric: str | None, level: float) -> None:
        self.domain = domain
        self.level = level
        self.baseline = baseline
        self.acc_metric = acc_metric
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
                f"domain {self.domain}: {label} seed {run.seed} has no {BASELINE} run with the same seed to pair with "
                f"({BASELINE} seeds: {sorted(self.baseline)}); run {run.path}"
            )
        return self.baseline[run.seed]

    @staticmethod
    def cost(run: Run, metric: str) -> Curve:
        series = run.metrics[metric].astype(np.float64) if metric in run.metrics.columns else None
        if series is None or not np.isfinite(series).any():
            raise LoadError(f"run {run.name()}: metric {metric!r} is missing (needed for the cost-to-target column)")
        # Every training step must carry its cost, or the cumulative sum undercounts; step 0 is verl's initial eval.
        holes = [int(s) for s, v in series.items() if s > 0 and not np.isfinite(v)]
        if holes:
            raise LoadError(f"run {run.name()}: metric {metric!r} is missing at steps {holes[:10]}")
        series = series[np.isfinite(series)]
        return Curve(series.index.to_numpy(np.float64), series.to_numpy(np.float64))

    def score(self, label: str, runs: Mapping[int, Run], col: Column) -> core.Interval:
        values = []
        for seed in sorted(runs):
            run = runs[seed]
            if col.kind == "etr":
                values.append(float(run.column(ETR_METRIC).mean()))
                continue
            base = self.base(run, label)
            total = run.total_steps
            if col.kind in ("ttb", "bsf"):
                fn = core.ttb if col.kind == "ttb" else core.bsf
                acc, bacc = self.acc(run), self.acc(base)
                values.append(fn(acc.steps, acc.values, bacc.steps, bacc.values, col.fraction, total))
            elif col.kind == "cost":
                values.append(
                    cost_to_baseline(
                        self.acc(run),
                        self.cost(run, col.metric),
                        self.acc(base),
                        self.cost(base, col.metric),
                        col.fraction,
                        total,
                    )
                )
            else:
                raise ValueError(f"unknown column kind {col.kind!r}")
        return core.interval(np.asarray(values, dtype=np.float64), self.level)


def _build_table(
    title: str,
    row_header: str,
    runs: Sequence[Run],
    row_of: Callable[[Run], str | None],
    include_baseline_row: bool,
    acc_metric: str | None,
    level: float,
    row_key: Callable[[str], Any] = row_sort_key,
) -> Table:
    baselines = _group((r for r in runs if r.label == BASELINE), lambda r: BASELINE)
    grouped = _group((r for r in runs if r.label != BASELINE), row_of)
    domains = sorted(set(grouped) | set(baselines))
    if not grouped and not (include_baseline_row and baselines):
        raise LoadError(f"{title}: no runs to tabulate")
    cells: dict[tuple[str, str, str], core.Interval] = {}
    columns: dict[str, list[Column]] = {}
    seeds: dict[tuple[str, str], list[int]] = {}
    accuracy: dict[str, str] = {}
    rows: set[str] = set()
    for domain in domains:
        if domain not in baselines:
            methods = sorted(grouped.get(domain, {}))
            raise LoadError(f"domain {domain}: no {BASELINE!r} baseline runs (needed for TTB/BSF); methods: {methods}")
        base = baselines[domain][BASELINE]
        per_row = dict(grouped.get(domain, {}))
        if include_baseline_row:
            per_row[BASELINE] = base
        if not per_row:
            continue
        used = [r for seeds_ in per_row.values() for r in seeds_.values()] + list(base.values())
        _check_lengths(domain, used)
        timed = [r for r in used if r.has(STEP_TIME_METRIC)]
        if timed and len(timed) != len(used):
            lacking = [r.name() for r in used if not r.has(STEP_TIME_METRIC)]
            raise LoadError(f"domain {domain}: some runs log {STEP_TIME_METRIC!r} and these do not: {lacking}")
        columns[domain] = main_columns(wall_clock=bool(timed))
        scorer = _Scorer(domain, base, acc_metric, level)
        for row, row_runs in per_row.items():
            rows.add(row)
            seeds[(row, domain)] = sorted(row_runs)
            for col in columns[domain]:
                cells[(row, domain, col.key)] = scorer.score(row, row_runs, col)
        accuracy[domain] = ", ".join(sorted(scorer.acc_names))
    ordered = sorted(rows, key=row_key)
    shown = [d for d in domains if d in columns]
    return Table(title, row_header, ordered, shown, columns, cells, seeds, accuracy, level)


def main_table(runs: Sequence[Run], acc_metric: str | None = None, level: float = 0.95) -> Table:
    """The main table: one row per selector label (split by hparams that vary within a label), Random first.

    Args:
        runs: loaded runs (any domains).
        acc_metric: the accuracy metric; default: each run's ``val-core/*/acc/mean@*`` (see
            :func:`analysis.loader.accuracy_metric`).
        level: the confidence level of the intervals over seeds.

    Raises:
        LoadError: missing baseline, unpaired seeds, runs of different lengths, missing metrics.
    """
    return _build_table("Main table", "Method", runs, row_labeller(runs), True, acc_metric, level)


def row_labeller(runs: Sequence[Run]) -> Callable[[Run], str]:
    """The main table's row label of a run: its label, plus ``(k=v, ...)`` for hparams that vary within the label.

    The figures use the same labels, so a line and a table row with the same name hold the same runs.
    """
    varying = _varying_hparams(runs)

    def row_of(run: Run) -> str:
        keys = varying.get(run.label, []) if run.label != BASELINE else []
        if not keys:
            return run.label
        return run.label + " (" + ", ".join(f"{k}={run.flat_hparams.get(k, '-')}" for k in keys) + ")"

    return row_of


def _hparam(hparams: Mapping[str, Any], param: str) -> Any:
    for key in ABLATION_PARAMS[param][0]:
        if key in hparams:
            return hparams[key]
    return None


def _rest(run: Run) -> str:
    """The run's hyperparameters other than the ablated ones, as a comparable string."""
    # "selector" is how the run is matched, so it is not part of what must agree.
    ablated = {key for keys, _ in ABLATION_PARAMS.values() for key in keys} | {"selector"}
    return json.dumps({k: v for k, v in run.flat_hparams.items() if k not in ablated}, sort_keys=True, default=str)


def ablation_table(
    runs: Sequence[Run],
    param: str,
    method: str = "bots",
    defaults: Mapping[str, float] | None = None,
    acc_metric: str | None = None,
    level: float = 0.95,
) -> Table:
    """A ρ or λ ablation: runs of selector ``method`` grouped by their value of ``param``.

    A run takes part if its selector (``hparams.selector``, else its method) is ``method``, the other ablated
    parameter is at its held value, and its remaining hyperparameters equal those of the runs labelled ``method``
    (so a greedy or DAPO variant of BOTS is not mistaken for a ρ setting). A missing ρ or λ counts as the default.

    Args:
        runs: loaded runs (Random's are the baseline and are not shown).
        param: ``"rho"`` or ``"lam"`` (hparams keys ``lam``, ``lamb`` and ``lambda`` are accepted for λ).
        method: the selector whose runs are ablated.
        defaults: the defaults of ρ and λ (the paper's 0.1 and 0.1), used for missing values and the held parameter.
        acc_metric, level: as for :func:`main_table`.

    Raises:
        LoadError: if fewer than two values of ``param`` are found, or as for :func:`main_table`.
    """
    if param not in ABLATION_PARAMS:
        raise ValueError(f"unknown ablation parameter {param!r}; choose from {sorted(ABLATION_PARAMS)}")
    held = {**DEFAULTS, **(defaults or {})}
    symbol = ABLATION_PARAMS[param][1]
    candidates = [r for r in runs if r.selector == method and r.label != BASELINE]
    reference = [_rest(r) for r in candidates if r.label == method] or [_rest(r) for r in candidates]
    common = max(set(reference), key=reference.count) if reference else None

    def value_of(run: Run, name: str) -> float:
        value = _hparam(run.flat_hparams, name)
        return held[name] if value is None else float(value)

    def row_of(run: Run) -> str | None:
        if run.selector != method or run.label == BASELINE or _rest(run) != common:
            return None
        if any(not math.isclose(value_of(run, o), held[o]) for o in ABLATION_PARAMS if o != param):
            return None
        return f"{symbol} = {value_of(run, param):g}"

    values = {row_of(r) for r in runs} - {None}
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
        row_key=lambda row: float(row.split("=", 1)[1]),
    )


def _caption(table: Table) -> list[str]:
    lines = [
        f"Mean [{table.level:.0%} interval] over seeds. TTB, BSF, Roll and Time are relative to {BASELINE} "
        "with the same seed; ETR is absolute. — = target never reached; (k/n —) = k of n seeds never reached it."
    ]
    for domain in table.domains:
        counts = ", ".join(
            f"{row} {len(table.seeds[(row, domain)])}" for row in table.rows if (row, domain) in table.seeds
        )
        lines.append(f"{domain}: accuracy = {table.accuracy.get(domain, '?')}; seeds: {counts}.")
    return lines


def _cell_text(table: Table, row: str, domain: str, col: Column, digits: int) -> str:
    cell = table.cells.get((row, domain, col.key))
    return "n/a" if cell is None else cell.format(digits)


def to_markdown(table: Table, digits: int = 2) -> str:
    """Render as a GitHub markdown table with a caption below."""
    header = [table.row_header] + [f"{d} {c.header}" for d in table.domains for c in table.columns[d]]
    lines = [f"**{table.title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.rows:
        cells = [_cell_text(table, row, d, c, digits) for d in table.domains for c in table.columns[d]]
        lines.append("| " + " | ".join([row, *cells]) + " |")
    lines.append("")
    lines.extend(_caption(table))
    return "\n".join(lines) + "\n"


_LATEX_SUBS = [
    ("\\", r"\textbackslash{}"),
    ("&", r"\&"),
    ("%", r"\%"),
    ("#", r"\#"),
    ("_", r"\_"),
    ("—", "---"),
    ("ρ", r"$\rho$"),
    ("λ", r"$\lambda$"),
    ("↓", r"$\downarrow$"),
    ("↑", r"$\uparrow$"),
]


def _tex(text: str) -> str:
    for old, new in _LATEX_SUBS:
        text = text.replace(old, new)
    return text


def to_latex(table: Table, digits: int = 2) -> str:
    """Render as a booktabs ``tabular`` (one ``\\multicolumn`` per domain) inside a ``table`` with a caption."""
    widths = [len(table.columns[d]) for d in table.domains]
    out = [
        r"\begin{table}[t]",
        r"\centering",
        r"\scriptsize",
        r"\begin{tabular}{l" + "c" * sum(widths) + "}",
        r"\toprule",
    ]
    out.append(
        " & "
        + " & ".join(rf"\multicolumn{{{w}}}{{c}}{{{_tex(d)}}}" for d, w in zip(table.domains, widths, strict=True))
        + r" \\"
    )
    start = 2
    rules = []
    for w in widths:
        rules.append(rf"\cmidrule(lr){{{start}-{start + w - 1}}}")
        start += w
    out.append(" ".join(rules))
    out.append(
        " & ".join([_tex(table.row_header)] + [_tex(c.header) for d in table.domains for c in table.columns[d]])
        + r" \\"
    )
    out.append(r"\midrule")
    for row in table.rows:
        cells = [_tex(_cell_text(table, row, d, c, digits)) for d in table.domains for c in table.columns[d]]
        out.append(" & ".join([_tex(row), *cells]) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    out.append(r"\caption{" + _tex(table.title + ". " + " ".join(_caption(table))) + "}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


def tables_for(
    runs: Sequence[Run],
    which: str = "main",
    acc_metric: str | None = None,
    method: str = "bots",
    defaults: Mapping[str, float] | None = None,
    level: float = 0.95,
) -> list[Table]:
    """Compute the requested tables (``main``, ``rho``, ``lam`` or ``all``; ``all`` skips ablations without runs)."""
    out: list[Table] = []
    if which in ("main", "all"):
        out.append(main_table(runs, acc_metric, level))
    for param in ABLATION_PARAMS:
        if which not in (param, "all"):
            continue
        try:
            out.append(ablation_table(runs, param, method, defaults, acc_metric, level))
        except LoadError as exc:
            if which == param or "two or more values" not in str(exc):
                raise
            logger.info("skipping the %s ablation: %s", param, exc)
    return out


def _parse_defaults(items: Sequence[str] | None) -> dict[str, float]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or key not in ABLATION_PARAMS:
            raise ValueError(f"--default expects rho=VALUE or lam=VALUE, got {item!r}")
        out[key] = float(value)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``python -m analysis.tables``."""
    p = argparse.ArgumentParser(prog="python -m analysis.tables", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="directories (searched recursively) or .csv files")
    p.add_argument("--table", choices=["main", "rho", "lam", "all"], default="main")
    p.add_argument("--format", choices=["md", "latex"], default="md")
    p.add_argument("--out", type=Path, help="write here instead of stdout")
    p.add_argument("--metric", help="accuracy metric name (default: the runs' val-core/<source>/acc/mean@<n>)")
    p.add_argument("--method", default="bots", help="the selector ablated in the rho/lam tables")
    p.add_argument("--default", action="append", metavar="PARAM=VALUE", help="held value in ablations (rho=0.1)")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata for runs whose sidecar lacks it")
    p.add_argument("--digits", type=int, default=2)
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals over seeds")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 with a one-line message on bad input)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        runs = loader.load_runs(args.runs, loader.parse_meta_args(args.meta))
        tables = tables_for(runs, args.table, args.metric, args.method, _parse_defaults(args.default), args.level)
    except (LoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    render = to_markdown if args.format == "md" else to_latex
    text = "\n".join(render(t, args.digits) for t in tables)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        logger.info("wrote %s", args.out)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
