"""Metric functions shared by the selectors, the simulator, the verl integration and ``analysis/``.

One implementation of each metric lives here (numpy and the standard library only), so a simulated run and a real
run are scored the same way. Definitions follow the paper (arXiv 2510.26374, Sec. 4; see also its reviews):

- **ETR** (effective task ratio): the share of a batch whose rollout group is neither all-wrong nor all-right.
- **TTB(x)** (time to baseline): the steps a method needs to reach the baseline's (Random's) best score within the
  first ``x`` of the training budget, divided by a denominator (below 1 is faster; NaN means never reached):

  - ``denominator="baseline"`` (default, the convention the paper's tables imply): the steps the baseline itself
    needed to first reach that score. Random's own TTB is then exactly 1.00 in every column, as in the paper's
    main table (its Random row reads 1.00 everywhere), whatever the evaluation grid. If the baseline
    reached it at step 0 (its best within ``x`` is the initial evaluation), the ratio is 1 for a method that also
    reached it at step 0 and ``inf`` for one that needed any training.
  - ``denominator="budget"``: ``x`` of the budget (``x * total_steps``), the reading of an earlier version of this
    module. Random's own TTB is then below 1 whenever its best within ``x`` came before the horizon, and it depends
    on where the evaluations fall.
- **BSF(x)** (best so far): the method's best score within the first ``x`` of the budget over the baseline's best
  within the same steps. Above 1 is better.
- **Estimator quality** (paper Sec. 4.5, Fig. 5): :func:`pearson` and :func:`roc_auc` of predicted against observed
  pass rates.

Curves are given as ``(steps, values)`` pairs because evaluations are usually sparse (verl's ``trainer.test_freq``);
"within the first x of the budget" means ``step <= x * total_steps``. NaN values (a failed evaluation) are skipped.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from bots_verl.core.metric_keys import (
    ALL_RIGHT_STAT,
    ALL_WRONG_STAT,
    DEGENERATE_FIRST_STAT,
    DEGENERATE_REVISIT_STAT,
    FIRST_VISIT_STAT,
)

#: The accepted ``denominator`` values of :func:`ttb` (the first is the default).
TTB_DENOMINATORS = ("baseline", "budget")

__all__ = [
    "TTB_DENOMINATORS",
    "Interval",
    "best_so_far",
    "batch_composition",
    "best_within",
    "bsf",
    "budget_horizon",
    "check_ttb_denominator",
    "effective_task_ratio",
    "interval",
    "paired_interval",
    "pearson",
    "roc_auc",
    "steps_to_reach",
    "t_quantile",
    "ttb",
]


def effective_task_ratio(successes: npt.ArrayLike, attempts: npt.ArrayLike) -> float:
    """Share of tasks whose rollout group is neither all-wrong nor all-right (``0 < s < n``).

    Those are the tasks with a nonzero GRPO advantage. With fractional successes the same strict inequalities apply.
    Returns NaN for an empty batch.
    """
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(attempts, dtype=np.float64)
    if s.size == 0:
        return float("nan")
    return float(np.mean((s > 0) & (s < n)))


def batch_composition(
    successes: npt.ArrayLike, attempts: npt.ArrayLike, times_selected: npt.ArrayLike
) -> dict[str, float]:
    """Where a batch's all-wrong and all-right groups come from: first visits or revisits (issue 38, the gap).

    Args:
        successes: per task of the batch, its successes.
        attempts: per task, its rollouts.
        times_selected: per task, how often it has been selected, this step's selection included (1: a first visit;
            0, a task updated without being selected, counts as a first visit too).

    Returns:
        ``batch/all_wrong_frac`` and ``batch/all_right_frac`` (shares of the batch's groups),
        ``batch/first_visit_frac`` (share of the batch's tasks selected for the first time) and the share of
        degenerate (all-wrong or all-right) groups among the first visits, ``batch/degenerate_first_frac``, and
        among the revisits, ``batch/degenerate_revisit_frac`` (each left out where the batch has none of that kind;
        nothing for an empty batch).
    """
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(attempts, dtype=np.float64)
    if s.size == 0:
        return {}
    first = np.asarray(times_selected) <= 1
    wrong, right = s <= 0, s >= n
    degenerate = wrong | right
    out = {
        ALL_WRONG_STAT: float(wrong.mean()),
        ALL_RIGHT_STAT: float(right.mean()),
        FIRST_VISIT_STAT: float(first.mean()),
    }
    if first.any():
        out[DEGENERATE_FIRST_STAT] = float(degenerate[first].mean())
    if not first.all():
        out[DEGENERATE_REVISIT_STAT] = float(degenerate[~first].mean())
    return out


def pearson(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Pearson correlation of two equal-length arrays; NaN with fewer than 2 entries or a constant array."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"pearson needs two 1-D arrays of equal length, got {a.shape} and {b.shape}")
    if a.size < 2:
        return float("nan")
    a = a - a.mean()
    b = b - b.mean()
    denom = math.sqrt(float(a @ a) * float(b @ b))
    return float(a @ b) / denom if denom > 0 else float("nan")


def roc_auc(scores: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` for boolean ``labels``: P(score of a positive > of a negative).

    Ties count one half (average ranks, the Mann-Whitney U statistic). NaN when either class is empty.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"roc_auc needs two 1-D arrays of equal length, got {s.shape} and {y.shape}")
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    # 1-based ranks, each tie group sharing the mean of its ranks
    first = np.concatenate([[True], sorted_s[1:] != sorted_s[:-1]])
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], s.size)
    ranks = np.empty(s.size)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _curve(steps: npt.ArrayLike, values: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    st = np.asarray(steps, dtype=np.float64)
    va = np.asarray(values, dtype=np.float64)
    if st.shape != va.shape or st.ndim != 1:
        raise ValueError(f"steps and values must be 1-D of equal length, got {st.shape} and {va.shape}")
    if st.size > 1 and np.any(np.diff(st) <= 0):
        raise ValueError("steps must be strictly increasing")
    keep = ~np.isnan(va)
    return st[keep], va[keep]


def best_so_far(values: npt.ArrayLike) -> np.ndarray:
    """Running maximum, skipping NaN (NaN until the first finite value)."""
    va = np.asarray(values, dtype=np.float64)
    filled = np.where(np.isnan(va), -np.inf, va)
    out = np.maximum.accumulate(filled) if va.size else filled
    return np.where(np.isneginf(out), np.nan, out)


def best_within(steps: npt.ArrayLike, values: npt.ArrayLike, horizon: float) -> float:
    """The best value at steps ``<= horizon``, skipping NaN; NaN if there is none."""
    st, va = _curve(steps, values)
    inside = va[st <= horizon + 1e-9]
    return float(inside.max()) if inside.size else float("nan")


def steps_to_reach(steps: npt.ArrayLike, values: npt.ArrayLike, target: float) -> float:
    """The first step at which ``values`` reaches ``target`` (``>=``); NaN if it never does."""
    st, va = _curve(steps, values)
    if not np.isfinite(target):
        return float("nan")
    hit = np.flatnonzero(va >= target)
    return float(st[hit[0]]) if hit.size else float("nan")


def budget_horizon(fraction: float, total_steps: float) -> float:
    """The last step inside ``fraction`` of a ``total_steps`` budget.

    Raises:
        ValueError: unless ``0 < fraction <= 1``.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    return fraction * total_steps


def check_ttb_denominator(denominator: str) -> str:
    """Return ``denominator`` if it is one of :data:`TTB_DENOMINATORS`.

    Raises:
        ValueError: naming the accepted values.
    """
    if denominator not in TTB_DENOMINATORS:
        raise ValueError(f"TTB denominator must be one of {TTB_DENOMINATORS}, got {denominator!r}")
    return denominator


def ttb(
    steps: npt.ArrayLike,
    values: npt.ArrayLike,
    base_steps: npt.ArrayLike,
    base_values: npt.ArrayLike,
    fraction: float,
    total_steps: float,
    denominator: str = "baseline",
) -> float:
    """Time to baseline at ``fraction`` of the budget (see the module docstring); NaN if never reached.

    Args:
        steps, values: the method's evaluation curve.
        base_steps, base_values: the baseline's (Random's) curve.
        fraction: the budget fraction, in (0, 1].
        total_steps: the training budget in steps.
        denominator: ``"baseline"`` (the baseline's own steps to its target; Random scores exactly 1) or
            ``"budget"`` (``fraction * total_steps``).

    Raises:
        ValueError: for a fraction outside (0, 1], an unknown denominator or malformed curves.
    """
    check_ttb_denominator(denominator)
    horizon = budget_horizon(fraction, total_steps)
    target = best_within(base_steps, base_values, horizon)
    reached = steps_to_reach(steps, values, target)
    if denominator == "budget":
        return reached / horizon
    base_reached = steps_to_reach(base_steps, base_values, target)
    if not (np.isfinite(reached) and np.isfinite(base_reached)):
        return float("nan")
    if base_reached == 0:
        # The baseline's best within the horizon is its initial evaluation: matching it without training is parity,
        # needing any training is infinitely slower.
        return 1.0 if reached == 0 else float("inf")
    return reached / base_reached


def bsf(
    steps: npt.ArrayLike,
    values: npt.ArrayLike,
    base_steps: npt.ArrayLike,
    base_values: npt.ArrayLike,
    fraction: float,
    total_steps: float,
) -> float:
    """Best-so-far ratio at ``fraction`` of the budget: the method's best over the baseline's, both within it."""
    horizon = budget_horizon(fraction, total_steps)
    base = best_within(base_steps, base_values, horizon)
    own = best_within(steps, values, horizon)
    if not np.isfinite(base) or base == 0:
        return float("nan")
    return own / base


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t: exact for 1 and 2 degrees of freedom, Cornish-Fisher (error < 0.2%) above."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, got p={p}, df={df}")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    v = float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


class Interval(NamedTuple):
    """Mean and two-sided confidence interval over seeds; ``n_missing`` counts NaN entries (e.g. never reached)."""

    mean: float
    lo: float
    hi: float
    n: int
    n_missing: int

    def format(self, digits: int = 2) -> str:
        """``mean [lo, hi]``, with ``(k/n missing)`` appended when some seeds have no value; ``—`` if none has."""
        if self.n == 0:
            return "—"
        text = f"{self.mean:.{digits}f}"
        if self.n > 1:
            text += f" [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"
        if self.n_missing:
            text += f" ({self.n_missing}/{self.n + self.n_missing} —)"
        return text


def interval(values: npt.ArrayLike, level: float = 0.95) -> Interval:
    """Student-t interval of the mean over the finite entries of ``values``."""
    va = np.asarray(values, dtype=np.float64).ravel()
    finite = va[np.isfinite(va)]
    n, missing = int(finite.size), int(va.size - finite.size)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, missing)
    mean = float(finite.mean())
    if n == 1:
        return Interval(mean, float("nan"), float("nan"), 1, missing)
    half = t_quantile(0.5 + level / 2, n - 1) * float(finite.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, missing)


def paired_interval(values: npt.ArrayLike, baseline: npt.ArrayLike, level: float = 0.95) -> Interval:
    """Interval of the per-seed difference ``values - baseline`` (entries paired by seed, same order)."""
    a = np.asarray(values, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {a.shape} vs {b.shape}")
    return interval(a - b, level)
