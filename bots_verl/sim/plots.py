"""PNG figures of an experiment (matplotlib, Agg backend): mean curves with 95% intervals over seeds.

- ``accuracy.png``: eval accuracy per step.
- ``etr.png``: effective task ratio per step (moving average over ``window`` steps, then the interval over seeds).
- ``accuracy_vs_rollouts.png``: eval accuracy against cumulative rollouts (what DAPO's extra rollouts cost).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from bots_verl.core.selection_metrics import interval
from bots_verl.sim.loop import RunResult

logger = logging.getLogger(__name__)

__all__ = ["plot_all"]


def _bands(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, low and high of a ``(seeds, points)`` array, per point (low = high = mean with one seed)."""
    ivs = [interval(curves[:, j]) for j in range(curves.shape[1])]
    mean = np.array([iv.mean for iv in ivs])
    lo = np.array([iv.lo if np.isfinite(iv.lo) else iv.mean for iv in ivs])
    hi = np.array([iv.hi if np.isfinite(iv.hi) else iv.mean for iv in ivs])
    return mean, lo, hi


def _smooth(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (shorter windows at the start), so step t uses steps <= t only."""
    c = np.cumsum(np.insert(x, 0, 0.0))
    idx = np.arange(1, x.size + 1)
    start = np.maximum(idx - window, 0)
    return (c[idx] - c[start]) / (idx - start)


def plot_all(runs: Mapping[str, Sequence[RunResult]], out: str | Path, title: str, window: int = 10) -> list[Path]:
    """Write the three figures to ``out`` and return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_seeds = min(len(rs) for rs in runs.values())
    paths = []
    specs = [
        ("accuracy.png", "step", "eval accuracy"),
        ("etr.png", "step", f"effective task ratio (moving avg {window})"),
        ("accuracy_vs_rollouts.png", "rollouts", "eval accuracy"),
    ]
    for fname, xlabel, ylabel in specs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, rs in runs.items():
            if fname == "etr.png":
                x = np.arange(1, rs[0].etr.size + 1)
                y = np.stack([_smooth(r.etr, window) for r in rs])
            else:
                y = np.stack([r.eval_acc for r in rs])
                x = rs[0].eval_steps.astype(np.float64)
                if fname == "accuracy_vs_rollouts.png":
                    cum = np.stack([np.concatenate([[0.0], np.cumsum(r.rollouts)])[r.eval_steps] for r in rs])
                    x = cum.mean(axis=0)
            mean, lo, hi = _bands(y)
            (line,) = ax.plot(x, mean, label=label, lw=1.6)
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title} — mean and 95% interval over {n_seeds} seeds", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
