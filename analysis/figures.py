"""The paper's curves from run logs, mean ± 95% interval band over seeds, one line per method (and model size).

Per domain (``python -m analysis.figures --runs runs/ --out figures/``):

- ``<domain>_accuracy``: raw eval accuracy and best-so-far accuracy;
- ``<domain>_etr``: the per-step effective task ratio;
- ``<domain>_estimator`` (the paper's estimator-quality figure): per step, the Pearson correlation and the ROC-AUC of
  the interpolated estimate against the trained batch's empirical pass rates (``bots/estimator/pearson``,
  ``bots/estimator/auc``), drawn when some run logs them;
- ``<domain>_lambda_bias`` (the paper's λ figure): the Thompson-sampled success probability of the selected tasks
  against their observed pass rate (``bots/selection/sampled_p_mean``, ``bots/selection/observed_p_mean``,
  ``bots/selection/sampled_p_bias``) for every λ of the λ sweep, and against the true probability in simulated runs
  (``sim/true_p_mean``); drawn when at least two λ values logged them.

Seeds may evaluate at different steps: each curve is put on the union of its seeds' steps. A raw accuracy point
summarises the seeds evaluated at that step; a best-so-far point holds each seed's best up to that step (carried
forward between evaluations), so it is defined once every seed has been evaluated once.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import loader
from analysis.cli_checks import out_folder_problem, unknown_names_problem
from analysis.loader import LoadError, Run
from analysis.paper_tables import ablation_rows, select_methods
from analysis.table_model import display, row_labeller, row_sort_key
from bots_verl.core import selection_metrics as core
from bots_verl.runlog import (
    AUC_METRIC,
    BIAS_METRIC,
    ETR_METRIC,
    OBSERVED_P_METRIC,
    PEARSON_METRIC,
    SAMPLED_P_METRIC,
    SIM_BATCH_TRUE_P_METRIC,
    SIM_TRUE_P_METRIC,
)

__all__ = [
    "FIGURES",
    "Band",
    "accuracy_figure",
    "band",
    "estimator_figure",
    "etr_figure",
    "lambda_bias_figure",
    "main",
    "save_all",
]

#: The simulator's true success probability of the selected tasks (the first one logged is used).
TRUE_P_METRICS = (SIM_TRUE_P_METRIC, SIM_BATCH_TRUE_P_METRIC)
#: Figure kinds, in drawing order.
FIGURES = ("accuracy", "etr", "estimator", "lambda_bias")

logger = logging.getLogger(__name__)


class Band:
    """Mean and interval of a metric over seeds at each step (arrays of equal length)."""

    def __init__(self, steps: np.ndarray, mean: np.ndarray, lo: np.ndarray, hi: np.ndarray, n: np.ndarray) -> None:
        self.steps, self.mean, self.lo, self.hi, self.n = steps, mean, lo, hi, n


def band(series: Sequence[pd.Series], carry_forward: bool = False, level: float = 0.95) -> Band:
    """Summarise per-seed curves (step-indexed series) on the union of their steps with :func:`core.interval`.

    Args:
        series: one curve per seed.
        carry_forward: fill each seed's value forward between its own steps (for best-so-far curves).
        level: the interval's confidence level.
    """
    frame = pd.concat([s.rename(i) for i, s in enumerate(series)], axis=1).sort_index()
    if carry_forward:
        frame = frame.ffill()
    stats = [core.interval(row.to_numpy(np.float64), level) for _, row in frame.iterrows()]
    return Band(
        frame.index.to_numpy(np.float64),
        np.array([s.mean for s in stats]),
        np.array([s.lo for s in stats]),
        np.array([s.hi for s in stats]),
        np.array([s.n for s in stats]),
    )


def _groups(runs: Sequence[Run], domain: str) -> dict[str, list[Run]]:
    """The domain's runs by line: the main table's row (display name), prefixed by the model when there are several."""
    label_of = row_labeller(runs)
    here = [r for r in runs if r.domain == domain]
    several = len({r.model_name for r in here}) > 1
    keyed: dict[tuple[tuple[float, str], tuple[int, str]], tuple[str, list[Run]]] = {}
    for run in here:
        row = label_of(run)
        key = (loader.model_sort_key(run.model_name), row_sort_key(row))
        name = (f"{run.model_name} · " if several else "") + display(row)
        keyed.setdefault(key, (name, []))[1].append(run)
    return {name: group for _, (name, group) in sorted(keyed.items())}


def _draw(ax: plt.Axes, label: str, b: Band) -> None:
    (line,) = ax.plot(b.steps, b.mean, label=f"{label} (n={int(b.n.max()) if b.n.size else 0})", lw=1.5)
    ax.fill_between(b.steps, b.lo, b.hi, color=line.get_color(), alpha=0.2, lw=0)


def accuracy_figure(runs: Sequence[Run], domain: str, acc_metric: str | None = None, level: float = 0.95) -> Figure:
    """Two panels for one domain: raw eval accuracy and best-so-far accuracy, mean ± interval over seeds.

    Raises:
        LoadError: if a run lacks the accuracy metric (names the run).
    """
    fig, (raw_ax, best_ax) = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    name = "accuracy"
    for label, group in _groups(runs, domain).items():
        curves = []
        for run in group:
            name, series = loader.accuracy_metric(run, acc_metric)
            curves.append(series)
        _draw(raw_ax, label, band(curves, level=level))
        bests = [pd.Series(core.best_so_far(c.to_numpy(np.float64)), index=c.index) for c in curves]
        _draw(best_ax, label, band(bests, carry_forward=True, level=level))
    raw_ax.set(title=f"{domain}: eval accuracy", xlabel="training step", ylabel=name if len(name) < 60 else "accuracy")
    best_ax.set(title=f"{domain}: best so far", xlabel="training step")
    best_ax.legend(fontsize=8, loc="lower right")
    for ax in (raw_ax, best_ax):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def etr_figure(runs: Sequence[Run], domain: str, smooth: int = 1, level: float = 0.95) -> Figure:
    """Per-step effective task ratio for one domain, mean ± interval over seeds.

    Args:
        smooth: centred moving-average window in steps applied to each seed before summarising (1 = raw).

    Raises:
        LoadError: if a run lacks ``bots/batch/effective_task_ratio`` (names the run).
    """
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, group in _groups(runs, domain).items():
        curves = [run.column(ETR_METRIC) for run in group]
        if smooth > 1:
            curves = [c.rolling(smooth, center=True, min_periods=1).mean() for c in curves]
        _draw(ax, label, band(curves, level=level))
    title = f"{domain}: effective task ratio" + (f" ({smooth}-step mean)" if smooth > 1 else "")
    ax.set(title=title, xlabel="training step", ylabel="ETR", ylim=(0, 1))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def estimator_figure(runs: Sequence[Run], domain: str, smooth: int = 1, level: float = 0.95) -> Figure:
    """The estimator quality for one domain: per-step Pearson r and ROC-AUC, mean ± interval over seeds.

    Lines are the runs that log ``bots/estimator/pearson`` (methods with the interpolation plug-in); the legend gives
    each line's mean over steps. The paper reports a Pearson correlation of about 0.5 and an AUC its reviewers call
    weak, especially at 1.5B.

    Raises:
        LoadError: if no run of the domain logs the estimator metrics.
    """
    groups = {name: [r for r in group if r.has(PEARSON_METRIC)] for name, group in _groups(runs, domain).items()}
    groups = {name: group for name, group in groups.items() if group}
    if not groups:
        raise LoadError(
            f"domain {domain}: no run logs {PEARSON_METRIC!r} (the estimator figure needs runs whose selector has the "
            "interpolation plug-in and a core that logs the estimator diagnostics)"
        )
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, metric, title, chance in (
        (axes[0], PEARSON_METRIC, "Pearson r", 0.0),
        (axes[1], AUC_METRIC, "ROC-AUC", 0.5),
    ):
        for name, group in groups.items():
            curves = [run.column(metric) for run in group]
            overall = core.interval(np.array([c.mean() for c in curves]), level)
            if smooth > 1:
                curves = [c.rolling(smooth, center=True, min_periods=1).mean() for c in curves]
            _draw(ax, f"{name}, mean {overall.mean:.2f}", band(curves, level=level))
        ax.axhline(chance, color="grey", lw=0.8, ls="--")
        ax.set(title=f"{domain}: estimator {title}", xlabel="training step", ylabel=title)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _true_p_metric(run: Run) -> str | None:
    return next((m for m in TRUE_P_METRICS if run.has(m)), None)


def _lambda_groups(runs: Sequence[Run], domain: str, method: str, defaults: dict | None) -> dict[str, list[Run]]:
    """The domain's λ-sweep runs that log the sampled p, by λ row (``λ = 0.1``), λ ascending.

    As in the λ table, a seed with two runs at one λ (the main run and a sweep run at the default) uses the run
    labelled ``method``.
    """
    row_of, row_key, _ = ablation_rows(runs, "lam", method, defaults)
    here = [r for r in runs if r.domain == domain and r.has(SAMPLED_P_METRIC)]
    several = len({r.model_name for r in here}) > 1
    chosen: dict[tuple, Run] = {}
    for run in here:
        row = row_of(run)
        if row is None:
            continue
        key = (loader.model_sort_key(run.model_name), row_key(row), row, run.model_name, run.seed)
        if key not in chosen or (run.label == method and chosen[key].label != method):
            chosen[key] = run
    out: dict[tuple, tuple[str, list[Run]]] = {}
    for (model_key, rkey, row, model, _), run in sorted(chosen.items(), key=lambda kv: kv[0][:2] + (kv[0][4],)):
        name = (f"{model} · " if several else "") + row
        out.setdefault((model_key, rkey), (name, []))[1].append(run)
    return {name: group for _, (name, group) in sorted(out.items())}


def lambda_bias_figure(
    runs: Sequence[Run], domain: str, method: str = "bots", defaults: dict | None = None, level: float = 0.95
) -> Figure:
    """The λ figure for one domain: the Thompson-sampled p of the selected tasks against what they turned out to be.

    Left: per λ, the per-step bias (sampled p minus the batch's observed pass rate), mean ± interval over seeds.
    Right: per λ, the run-mean sampled p, observed pass rate and, for simulated runs, true probability, with their
    intervals over seeds. The paper's reading (per its reviews): small λ samples below the truth, large λ above.
    Runs are the λ ablation's (see :func:`analysis.paper_tables.ablation_rows`: selector ``method``, ρ at its default).

    Raises:
        LoadError: if fewer than two λ values have runs logging ``bots/selection/sampled_p_mean``.
    """
    groups = _lambda_groups(runs, domain, method, defaults)
    if len(groups) < 2:
        raise LoadError(
            f"domain {domain}: the λ figure needs runs of selector {method!r} at two or more λ values that log "
            f"{SAMPLED_P_METRIC!r} (found {sorted(groups) or 'none'})"
        )
    fig, (bias_ax, level_ax) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    series = {"sampled p": [], "observed pass rate": [], "true p (sim)": []}
    for name, group in groups.items():
        curves = []
        for run in group:
            if run.has(BIAS_METRIC):
                curves.append(run.column(BIAS_METRIC))
            else:
                curves.append((run.column(SAMPLED_P_METRIC) - run.column(OBSERVED_P_METRIC)).dropna())
        _draw(bias_ax, name, band(curves, level=level))
        truth = [_true_p_metric(r) for r in group]
        per_kind = {
            "sampled p": [run.column(SAMPLED_P_METRIC).mean() for run in group],
            "observed pass rate": [run.column(OBSERVED_P_METRIC).mean() for run in group],
            "true p (sim)": [run.column(m).mean() for run, m in zip(group, truth, strict=True) if m is not None],
        }
        for kind, values in per_kind.items():
            series[kind].append(core.interval(np.array(values, dtype=np.float64), level))
    bias_ax.axhline(0.0, color="grey", lw=0.8, ls="--")
    bias_ax.set(title=f"{domain}: sampled p − observed pass rate", xlabel="training step", ylabel="bias")
    bias_ax.legend(fontsize=8)
    bias_ax.grid(alpha=0.3)
    x = np.arange(len(groups))
    for offset, (kind, intervals) in zip((-0.15, 0.0, 0.15), series.items(), strict=True):
        if not any(iv.n for iv in intervals):
            continue
        mean = np.array([iv.mean for iv in intervals])
        err = np.array([[iv.mean - iv.lo, iv.hi - iv.mean] for iv in intervals]).T
        level_ax.errorbar(x + offset, mean, yerr=np.nan_to_num(err), fmt="o", capsize=3, label=kind)
    level_ax.set_xticks(x, list(groups), rotation=30, fontsize=8)
    level_ax.set(title=f"{domain}: selected tasks, mean over steps", ylabel="success probability")
    level_ax.legend(fontsize=8)
    level_ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _wanted(runs: Sequence[Run], shown: Sequence[Run], domain: str, kind: str, method: str) -> bool:
    """Whether ``kind`` can be drawn for ``domain`` (the automatic choice of :func:`save_all`)."""
    if kind in ("accuracy", "etr"):
        return True
    if kind == "estimator":
        return any(r.domain == domain and r.has(PEARSON_METRIC) for r in shown)
    return len(_lambda_groups(runs, domain, method, None)) >= 2


def save_all(
    runs: Sequence[Run],
    out: str | Path,
    acc_metric: str | None = None,
    smooth: int = 1,
    level: float = 0.95,
    kinds: Sequence[str] | None = None,
    method: str = "bots",
    methods: Sequence[str] | None = None,
) -> list[Path]:
    """Draw every domain's figures into ``out`` as PNG and PDF; returns the written paths.

    Args:
        kinds: figure kinds to draw (:data:`FIGURES`); each is then required, so a missing metric is an error.
            Default: accuracy and ETR, plus the estimator and λ figures for domains whose runs log what they need.
        method: the selector whose λ sweep the λ figure reads.
        methods: only these labels in the accuracy, ETR and estimator figures (``["paper"]``: the paper's five;
            see :func:`analysis.paper_tables.select_methods`); the λ figure always reads the whole λ sweep.

    Raises:
        LoadError: if a requested figure cannot be drawn (names the domain and what is missing).
    """
    unknown = set(kinds or ()) - set(FIGURES)
    if unknown:
        raise ValueError(f"unknown figure kinds {sorted(unknown)}; choose from {FIGURES}")
    shown = select_methods(runs, methods)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for domain in sorted({r.domain for r in runs}):
        chosen = (
            [k for k in FIGURES if k in kinds]
            if kinds
            else [k for k in FIGURES if _wanted(runs, shown, domain, k, method)]
        )
        for kind in chosen:
            if kind == "accuracy":
                fig = accuracy_figure(shown, domain, acc_metric, level)
            elif kind == "etr":
                fig = etr_figure(shown, domain, smooth, level)
            elif kind == "estimator":
                fig = estimator_figure(shown, domain, smooth, level)
            else:
                fig = lambda_bias_figure(runs, domain, method, None, level)
            for ext in ("png", "pdf"):
                path = out / f"{domain}_{kind}.{ext}"
                fig.savefig(path, dpi=150)
                written.append(path)
            plt.close(fig)
    logger.info("wrote %d files to %s", len(written), out)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m analysis.figures``; returns the exit status (2 on bad input)."""
    p = argparse.ArgumentParser(prog="python -m analysis.figures", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="directories (searched recursively) or .csv files")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--metric", help="accuracy metric name (default: the runs' val-core/<source>/acc/mean@<n>)")
    p.add_argument("--smooth", type=int, default=1, help="moving-average window for the ETR and estimator curves")
    p.add_argument(
        "--figures",
        nargs="+",
        choices=FIGURES,
        help="draw only these (each required); default: accuracy and etr, plus estimator and lambda_bias where the "
        "runs log what they need",
    )
    p.add_argument(
        "--method", help="the selector whose lambda sweep the lambda_bias figure reads (default: bots, where it ran)"
    )
    p.add_argument(
        "--methods",
        nargs="+",
        metavar="LABEL",
        help="only these labels in the accuracy, etr and estimator figures ('paper' = the paper's five methods)",
    )
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata for runs whose sidecar lacks it")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    problem = out_folder_problem(args.out)
    if problem:
        p.error(problem)
    # Headless: the CLI only writes files. Not done at import, so notebooks keep their inline backend.
    matplotlib.use("Agg")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        runs = loader.load_runs(args.runs, loader.parse_meta_args(args.meta))
        # a --method no run has would silently leave the λ figure out (it is drawn where the data allows)
        if args.method is not None:
            problem = unknown_names_problem([args.method], sorted({r.selector for r in runs}), "--method", "selector")
            if problem:
                raise ValueError(problem)
        method = args.method or "bots"
        paths = save_all(runs, args.out, args.metric, args.smooth, args.level, args.figures, method, args.methods)
    except (LoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
