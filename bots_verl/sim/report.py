"""The summary table: per method, ETR, accuracy, TTB / BSF against the baseline, cost, with 95% intervals over seeds.

RTT(100%) (rollouts to target) is TTB(100%) measured in rollouts instead of steps: the rollouts a method generated
until it first reached the baseline's best accuracy, over the rollouts the baseline needed. It equals TTB(100%) when
both spend the same rollouts per step, and charges DAPO's extra rounds (and saves GRESO's skips) where they do not;
MoPPS, DPS and GRESO report their savings this way ("rollouts at equal accuracy").

TTB, BSF and the intervals come from :mod:`bots_verl.core.selection_metrics` (one implementation shared with
``analysis/``). Every relative figure is paired by seed: a method's seed-``k`` run is compared with the baseline's
seed-``k`` run, which saw the same world (pool, references, eval set).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from bots_verl.core.selection_metrics import Interval, bsf, interval, paired_interval, ttb
from bots_verl.fileio import markdown_table
from bots_verl.sim.loop import RunResult

logger = logging.getLogger(__name__)

__all__ = ["FRACTIONS", "cumulative_rollouts", "format_table", "rollouts_to_target", "summarize"]

FRACTIONS = (0.25, 0.5, 1.0)


def summarize(
    runs: Mapping[str, Sequence[RunResult]], baseline: str | None, steps: int, level: float = 0.95
) -> dict[str, dict[str, Interval]]:
    """Per method label, the table's intervals.

    Args:
        runs: label -> runs, in the same seed order for every label.
        baseline: label of the normalising method (the paper's Random); None or missing skips TTB / BSF / deltas.
        steps: the training budget T.
        level: interval level.

    Returns:
        ``{label: {column: Interval}}``; columns ``etr``, ``acc_final``, ``acc_best``, ``d_acc_final`` (vs the
        baseline), ``ttb25/50/100``, ``rtt100``, ``bsf25/50/100``, ``rollouts``, ``select_ms``.
    """
    base = runs.get(baseline) if baseline else None
    if baseline and base is None:
        logger.warning("baseline %r is not among the methods; TTB/BSF are left out", baseline)
    out: dict[str, dict[str, Interval]] = {}
    for label, rs in runs.items():
        row = {
            "etr": interval([r.etr.mean() for r in rs], level),
            "acc_final": interval([r.eval_acc[-1] for r in rs], level),
            "acc_best": interval([np.nanmax(r.eval_acc) for r in rs], level),
            "rollouts": interval([r.rollouts.sum() for r in rs], level),
            "select_ms": interval([r.select_ms.mean() for r in rs], level),
        }
        if base is not None:
            if [r.seed for r in rs] != [b.seed for b in base]:
                raise ValueError(f"{label}: seeds {[r.seed for r in rs]} do not pair with the baseline's")
            row["d_acc_final"] = paired_interval([r.eval_acc[-1] for r in rs], [b.eval_acc[-1] for b in base], level)
            pairs = list(zip(rs, base, strict=True))
            for f in FRACTIONS:
                key = f"{round(100 * f)}"
                row[f"ttb{key}"] = interval(
                    [ttb(r.eval_steps, r.eval_acc, b.eval_steps, b.eval_acc, f, steps) for r, b in pairs], level
                )
                row[f"bsf{key}"] = interval(
                    [bsf(r.eval_steps, r.eval_acc, b.eval_steps, b.eval_acc, f, steps) for r, b in pairs], level
                )
            row["rtt100"] = interval([rollouts_to_target(r, b) for r, b in pairs], level)
        out[label] = row
    return out


def cumulative_rollouts(run: RunResult) -> np.ndarray:
    """The rollouts generated before each of ``run``'s evaluations (0 at step 0)."""
    return np.concatenate([[0.0], np.cumsum(run.rollouts)])[run.eval_steps]


def rollouts_to_target(run: RunResult, base: RunResult) -> float:
    """RTT(100%): rollouts until ``run`` first reaches ``base``'s best accuracy, over ``base``'s own (NaN: never)."""
    base_x = cumulative_rollouts(base)
    # TTB(100%) on the rollout axis: the horizon is the baseline's whole run, the target its best accuracy
    return ttb(cumulative_rollouts(run), run.eval_acc, base_x, base.eval_acc, 1.0, float(base_x[-1]))


_COLUMNS = [
    ("etr", "ETR", 2),
    ("acc_final", "final acc", 3),
    ("d_acc_final", "Δacc vs base", 3),
    ("ttb25", "TTB(25%)", 2),
    ("ttb50", "TTB(50%)", 2),
    ("ttb100", "TTB(100%)", 2),
    ("rtt100", "RTT(100%)", 2),
    ("bsf25", "BSF(25%)", 3),
    ("bsf50", "BSF(50%)", 3),
    ("bsf100", "BSF(100%)", 3),
    ("rollouts", "rollouts", 0),
    ("select_ms", "select ms", 2),
]


def format_table(summary: Mapping[str, Mapping[str, Interval]]) -> str:
    """A markdown table, one row per method: ``mean [95% interval]`` per column (``—``: never reached / absent)."""
    present = [c for c in _COLUMNS if any(c[0] in row for row in summary.values())]
    rows = [
        [label, *(row[key].format(digits) if key in row else "—" for key, _, digits in present)]
        for label, row in summary.items()
    ]
    return markdown_table(["method", *(title for _, title, _ in present)], rows)
