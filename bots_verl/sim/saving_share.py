"""The share of a reference arm's step saving that another arm keeps, in the simulator's ablations.

``(1 - TTB_x) / (1 - TTB_ref)`` at TTB(100%) against Random: 1 = the same saving as the reference arm (paper BOTS in
``noref_ablation``), 0 = none. A ratio of means with a paired bootstrap interval over
seeds, as ``analysis.paired --ceiling`` reports it for the toy testbed.
"""

from __future__ import annotations

import numpy as np

from bots_verl.core.selection_metrics import ttb
from bots_verl.fileio import markdown_table
from bots_verl.sim.experiment import ExperimentResult

__all__ = ["format_share", "share_of_saving", "share_table", "ttbs_against_random"]


def ttbs_against_random(res: ExperimentResult, label: str) -> np.ndarray:
    """Each seed's TTB(100%) of arm ``label`` against the same seed's Random run (NaN: never reached)."""
    base = res.runs["random"]
    return np.array(
        [
            ttb(r.eval_steps, r.eval_acc, b.eval_steps, b.eval_acc, 1.0, res.steps)
            for r, b in zip(res.runs[label], base, strict=True)
        ]
    )


def share_of_saving(ttb_x: np.ndarray, ttb_ref: np.ndarray, draws: int = 4000) -> tuple[float, float, float]:
    """``(1 - mean TTB_x) / (1 - mean TTB_ref)`` and its 95% paired bootstrap interval over seeds (NaN seeds,
    which never reached the target, are left out of both arms)."""
    ok = np.isfinite(ttb_x) & np.isfinite(ttb_ref)
    x, b = ttb_x[ok], ttb_ref[ok]
    if x.size < 2:
        return float("nan"), float("nan"), float("nan")
    point = (1 - x.mean()) / (1 - b.mean())
    rng = np.random.Generator(np.random.PCG64(0))
    pick = rng.integers(x.size, size=(draws, x.size))
    boot = (1 - x[pick].mean(axis=1)) / (1 - b[pick].mean(axis=1))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(point), float(lo), float(hi)


def format_share(res: ExperimentResult, label: str, reference: str) -> str:
    """``label``'s share of ``reference``'s saving as ``"95% [92%, 98%]"``."""
    share = share_of_saving(ttbs_against_random(res, label), ttbs_against_random(res, reference))
    return "{:.0%} [{:.0%}, {:.0%}]".format(*share)


def share_table(res: ExperimentResult, labels: list[str], reference: str, share_header: str) -> str:
    """One row per arm: TTB(100%), final-accuracy gain and ETR against Random, and the share of ``reference``'s
    saving (blank for Random and the reference itself)."""
    rows = []
    for label in labels:
        row = res.summary[label]
        share = "" if label in ("random", reference) else format_share(res, label, reference)
        rows.append([label, row["ttb100"].format(2), row["d_acc_final"].format(3), row["etr"].format(2), share])
    return markdown_table(["arm", "TTB(100%) vs Random", "Δ final acc vs Random", "ETR", share_header], rows)
