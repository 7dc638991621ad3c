"""The paper's curves from run logs: accuracy (raw and best-so-far) and ETR, mean ± 95% interval band over seeds.

One figure pair per domain, one line per selector (the main table's row labels)::

    python -m analysis.figures --runs runs/sim --out figures/          # figures/<domain>_{accuracy,etr}.{png,pdf}

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
from analysis.loader import ETR_METRIC, LoadError, Run
from analysis.tables import row_labeller, row_sort_key
from bots_verl.core import metrics as core

__all__ = ["Band", "accuracy_figure", "band", "etr_figure", "main", "save_all"]

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
    label_of = row_labeller(runs)
    out: dict[str, list[Run]] = {}
    for run in runs:
        if run.domain == domain:
            out.setdefault(label_of(run), []).append(run)
    return dict(sorted(out.items(), key=lambda kv: row_sort_key(kv[0])))


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


def save_all(
    runs: Sequence[Run], out: str | Path, acc_metric: str | None = None, smooth: int = 1, level: float = 0.95
) -> list[Path]:
    """Draw every domain's accuracy and ETR figures into ``out`` as PNG and PDF; returns the written paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for domain in sorted({r.domain for r in runs}):
        figs = {
            "accuracy": accuracy_figure(runs, domain, acc_metric, level),
            "etr": etr_figure(runs, domain, smooth, level),
        }
        for kind, fig in figs.items():
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
    p.add_argument("--smooth", type=int, default=1, help="moving-average window for the ETR curves")
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata for runs whose sidecar lacks it")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    # Headless: the CLI only writes files. Not done at import, so notebooks keep their inline backend.
    matplotlib.use("Agg")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        runs = loader.load_runs(args.runs, loader.parse_meta_args(args.meta))
        paths = save_all(runs, args.out, args.metric, args.smooth, args.level)
    except (LoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
