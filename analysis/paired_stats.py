"""Paired statistics of each selector against a baseline (Random), seed by seed, with t and bootstrap intervals.

Runs with the same seed share the starting policy, the data order and the rollout sampling, so the comparison that
removes most of the seed-to-seed noise is the per-seed difference (or ratio) between a selector and the baseline.
Only seeds that both have are paired; the others are listed, never silently mixed in. Per paired seed:

- ``TTB(x)`` and ``BSF(x)`` at 25/50/100% of the budget: :func:`bots_verl.core.selection_metrics.ttb` / ``bsf``, the
  definitions of the paper's tables (:mod:`analysis.paper_tables`; TTB over the baseline's own steps, so Random = 1);
- ``slope ratio``: the least-squares slope of held-out accuracy against step of the baseline over the selector's.
  It reads like TTB: below 1 the selector gains accuracy faster (0.5: twice as fast). A seed where either slope is
  not positive has no ratio (the quotient would flip sign or explode) and is counted as such;
- ``mean gain Δ``: the area under the gain curve (accuracy minus the accuracy at the first evaluation, step 0),
  trapezoid over the evaluated steps, divided by the steps spanned: the mean gain over training; selector − baseline;
- ``final gain Δ``: the gain at the last evaluation, selector − baseline;
- ``ETR Δ``: the mean per-step effective task ratio (:data:`bots_verl.runlog.ETR_METRIC`, the tables' ETR),
  selector − baseline; needs the run logs;
- ``Roll(100%)`` and ``Time(100%)``: rollouts and wall-clock seconds spent until the selector first reaches the
  baseline's best within the budget (its final best so far), over what the baseline spent to reach it
  (:func:`analysis.cost_metrics.cost_to_baseline`, the tables' Roll/Time); needs the run logs.

**A selector run shorter than the baseline's** (an arm stopped early because each of its steps costs several
baseline steps of rollouts, e.g. dynamic sampling) is censored, not refused: TTB and Roll/Time keep the baseline's
target and budget and are undefined ("not reached in its N steps") when the run ends first; BSF is undefined for a
horizon past its last step; the slope ratio and the gain differences compare both curves up to the shorter run's
last step (at equal steps). A selector run longer than the baseline's is refused.

Each statistic gets its mean over the paired seeds where it is defined and two 95% intervals of that mean: the
Student-t interval (:func:`bots_verl.core.selection_metrics.interval`) and a paired bootstrap percentile interval (the
seeds resampled with replacement, 10000 times, from a fixed generator seed, so the output is deterministic). With few
seeds neither is trustworthy alone: the t interval is wide (t quantile 4.30 at 3 seeds) and the bootstrap interval
too narrow (it never leaves the range of the per-seed values). A seed where a statistic is undefined (target never
reached, a non-positive slope, no run log) is counted with its reason.

The inputs are read by :mod:`analysis.paired_inputs`, the comparisons against a peer or a ceiling are in
:mod:`analysis.paired_relative`, the markdown, JSON and figure in :mod:`analysis.paired_report`, and the command line is
:mod:`analysis.paired`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from analysis.cost_metrics import Curve, cost_to_baseline
from analysis.loader import LoadError
from analysis.paired_inputs import RunRecord
from analysis.paper_tables import cost_curve
from bots_verl.core import selection_metrics as core
from bots_verl.runlog import ETR_METRIC, ROLLOUTS_METRIC, STEP_TIME_METRIC

__all__ = [
    "BASELINE",
    "SPECS",
    "STATISTICS",
    "Comparison",
    "PairedStat",
    "StatSpec",
    "bootstrap_interval",
    "compare",
    "compare_all",
    "final_gain",
    "mean_gain",
    "slope",
]

logger = logging.getLogger(__name__)

BASELINE = "random"
RESAMPLES = 10_000
RNG_SEED = 0


@dataclass(frozen=True)
class StatSpec:
    """One paired statistic.

    Attributes:
        key: short id (``ttb100``), the key in the JSON output.
        label: display name.
        kind: ``"ratio"`` (null value 1) or ``"difference"`` (null value 0).
        better: ``"lower"`` or ``"higher"``.
        digits: decimals shown.
        needs_log: computed from the run logs (not available without them).
    """

    key: str
    label: str
    kind: str
    better: str
    digits: int
    needs_log: bool = False

    @property
    def null(self) -> float:
        """The value of no difference: 1 for a ratio, 0 for a difference."""
        return 1.0 if self.kind == "ratio" else 0.0


FRACTIONS = (0.25, 0.5, 1.0)
STATISTICS: tuple[StatSpec, ...] = (
    *(StatSpec(f"ttb{int(f * 100)}", f"TTB({int(f * 100)}%)↓", "ratio", "lower", 2) for f in FRACTIONS),
    *(StatSpec(f"bsf{int(f * 100)}", f"BSF({int(f * 100)}%)↑", "ratio", "higher", 3) for f in FRACTIONS),
    StatSpec("slope_ratio", "slope ratio (baseline / selector)↓", "ratio", "lower", 2),
    StatSpec("mean_gain_diff", "mean gain Δ (AUC / steps)↑", "difference", "higher", 4),
    StatSpec("final_gain_diff", "final gain Δ↑", "difference", "higher", 4),
    StatSpec("etr_diff", "ETR Δ↑", "difference", "higher", 3, needs_log=True),
    StatSpec("roll100", "Roll(100%)↓", "ratio", "lower", 2, needs_log=True),
    StatSpec("time100", "Time(100%)↓", "ratio", "lower", 2, needs_log=True),
)
#: the statistics by key
SPECS = {s.key: s for s in STATISTICS}


# -------------------------------------------------------------------------------------------- per-seed numbers
def slope(curve: Curve) -> float:
    """Least-squares slope of the curve's values against its steps (NaN with fewer than two points)."""
    x, y = np.asarray(curve.steps, np.float64), np.asarray(curve.values, np.float64)
    if x.size < 2:
        return float("nan")
    dx = x - x.mean()
    return float(dx @ (y - y.mean()) / (dx @ dx))


def mean_gain(curve: Curve) -> float:
    """Area under the gain curve (value minus the first evaluation's) over the steps it spans: the mean gain."""
    x, y = np.asarray(curve.steps, np.float64), np.asarray(curve.values, np.float64)
    if x.size < 2:
        return float("nan")
    gain = y - y[0]
    return float(np.sum(np.diff(x) * (gain[1:] + gain[:-1]) / 2) / (x[-1] - x[0]))


def final_gain(curve: Curve) -> float:
    """The last evaluation's value minus the first's."""
    return float(curve.values[-1] - curve.values[0]) if len(curve.values) else float("nan")


@dataclass
class _Value:
    """One seed's value of a statistic, why it is undefined (``value`` NaN), and the two sides it compares."""

    value: float
    reason: str | None = None
    parts: tuple[float, float] | None = None  # (selector, baseline)


def _undefined(reason: str, parts: tuple[float, float] | None = None) -> _Value:
    return _Value(float("nan"), reason, parts)


def _censored(sel: RunRecord, base: RunRecord) -> str | None:
    """Why an unreached target is undefined for a run stopped before the baseline's budget (None if it ran it all)."""
    return f"not reached in its {sel.total_steps} steps" if sel.total_steps < base.total_steps else None


def _up_to(curve: Curve, last_step: int) -> Curve:
    """The curve's evaluations at steps ``<= last_step``."""
    keep = curve.steps <= last_step
    return Curve(curve.steps[keep], curve.values[keep])


def _ttb(sel: RunRecord, base: RunRecord, fraction: float) -> _Value:
    acc, bacc = sel.accuracy, base.accuracy
    horizon = core.budget_horizon(fraction, base.total_steps)
    target = core.best_within(bacc.steps, bacc.values, horizon)
    if not np.isfinite(target):
        return _undefined("baseline not evaluated in the horizon")
    value = core.ttb(acc.steps, acc.values, bacc.steps, bacc.values, fraction, base.total_steps)
    if np.isnan(value):
        return _undefined(_censored(sel, base) or "never reached")
    if np.isinf(value):
        # core.ttb's convention: the baseline's best was its start and the selector needed training to match it
        return _undefined("∞: baseline's best at step 0")
    return _Value(value)


def _bsf(sel: RunRecord, base: RunRecord, fraction: float) -> _Value:
    acc, bacc = sel.accuracy, base.accuracy
    if core.budget_horizon(fraction, base.total_steps) > sel.total_steps:
        return _undefined(f"horizon past its {sel.total_steps} steps")
    value = core.bsf(acc.steps, acc.values, bacc.steps, bacc.values, fraction, base.total_steps)
    return _Value(value) if np.isfinite(value) else _undefined("baseline best 0 or not evaluated")


def _slope_ratio(sel: RunRecord, base: RunRecord) -> _Value:
    own, other = slope(sel.accuracy), slope(base.accuracy)
    parts = (own, other)
    if not (np.isfinite(own) and np.isfinite(other)):
        return _undefined("fewer than 2 evaluations", parts)
    # a non-positive slope makes the quotient change sign or explode: counted, not divided
    if own <= 0 and other <= 0:
        return _undefined("both slopes ≤ 0", parts)
    if own <= 0:
        return _undefined("selector slope ≤ 0", parts)
    if other <= 0:
        return _undefined("baseline slope ≤ 0", parts)
    return _Value(other / own, None, parts)


def _difference(own: float, other: float) -> _Value:
    if not (np.isfinite(own) and np.isfinite(other)):
        return _undefined("fewer than 2 evaluations", (own, other))
    return _Value(own - other, None, (own, other))


def _etr(sel: RunRecord, base: RunRecord) -> _Value:
    if sel.log is None or base.log is None:
        return _undefined("no run log")
    try:
        own, other = float(sel.log.column(ETR_METRIC).mean()), float(base.log.column(ETR_METRIC).mean())
    except LoadError as exc:
        logger.info("ETR not available: %s", exc)
        return _undefined("ETR not logged")
    return _difference(own, other)


def _cost(sel: RunRecord, base: RunRecord, metric: str) -> _Value:
    if sel.log is None or base.log is None:
        return _undefined("no run log")
    try:
        cost, bcost = cost_curve(sel.log, metric), cost_curve(base.log, metric)
    except LoadError as exc:
        logger.info("%s not available: %s", metric, exc)
        return _undefined(f"{metric} not logged")
    acc, bacc = sel.accuracy, base.accuracy
    value = cost_to_baseline(acc, cost, bacc, bcost, 1.0, base.total_steps)
    if np.isfinite(value):
        return _Value(value)
    target = core.best_within(bacc.steps, bacc.values, base.total_steps)
    if np.isnan(core.steps_to_reach(acc.steps, acc.values, target)):
        return _undefined(_censored(sel, base) or "never reached")
    return _undefined("baseline's best at step 0")


def _per_seed(sel: RunRecord, base: RunRecord) -> dict[str, _Value]:
    out = {f"ttb{int(f * 100)}": _ttb(sel, base, f) for f in FRACTIONS}
    out.update({f"bsf{int(f * 100)}": _bsf(sel, base, f) for f in FRACTIONS})
    # at equal steps: a run stopped early is compared with the baseline's curve up to its own last step
    cut = replace(base, accuracy=_up_to(base.accuracy, sel.total_steps)) if _censored(sel, base) else base
    out["slope_ratio"] = _slope_ratio(sel, cut)
    out["mean_gain_diff"] = _difference(mean_gain(sel.accuracy), mean_gain(cut.accuracy))
    out["final_gain_diff"] = _difference(final_gain(sel.accuracy), final_gain(cut.accuracy))
    out["etr_diff"] = _etr(sel, base)
    out["roll100"] = _cost(sel, base, ROLLOUTS_METRIC)
    out["time100"] = _cost(sel, base, STEP_TIME_METRIC)
    return out


# --------------------------------------------------------------------------------------------------- summaries
def bootstrap_interval(
    values: Iterable[float], level: float = 0.95, resamples: int = RESAMPLES, seed: int = RNG_SEED
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the finite ``values`` (NaN, NaN with fewer than two).

    The values are resampled with replacement ``resamples`` times from ``numpy.random.default_rng(seed)``, so the
    same input always gives the same interval.
    """
    finite = np.asarray([v for v in values if math.isfinite(v)], np.float64)
    if finite.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = finite[rng.integers(0, finite.size, size=(resamples, finite.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


@dataclass
class PairedStat:
    """One statistic of one selector against the baseline over the paired seeds.

    Attributes:
        spec: what it is.
        values: per paired seed, the value (NaN where undefined).
        reasons: per seed without a value, why (``never reached``, ``selector slope ≤ 0``, ``no run log``, ...).
        parts: per seed, the (selector, baseline) numbers compared, where the statistic has them (slopes, gains).
        t: mean and Student-t interval over the seeds with a value (:class:`bots_verl.core.selection_metrics.Interval`).
        bootstrap: the percentile bootstrap interval of the same mean.
    """

    spec: StatSpec
    values: dict[int, float]
    reasons: dict[int, str]
    parts: dict[int, tuple[float, float]]
    t: core.Interval
    bootstrap: tuple[float, float]

    @property
    def available(self) -> bool:
        """Whether any seed has a value."""
        return self.t.n > 0

    def undefined_counts(self) -> dict[str, int]:
        """How many seeds lack a value, by reason."""
        counts: dict[str, int] = {}
        for reason in self.reasons.values():
            counts[reason] = counts.get(reason, 0) + 1
        return counts


@dataclass
class Comparison:
    """A selector against the baseline, paired by seed.

    Attributes:
        unpaired: seeds of the selector or of the baseline without a partner (by selector name); not used.
    """

    selector: str
    baseline: str
    seeds: list[int]
    stats: dict[str, PairedStat]
    unpaired: dict[str, list[int]] = field(default_factory=dict)
    level: float = 0.95
    resamples: int = RESAMPLES
    rng_seed: int = RNG_SEED


def _index(records: Sequence[RunRecord]) -> dict[tuple[str, int], RunRecord]:
    out: dict[tuple[str, int], RunRecord] = {}
    for rec in records:
        if (rec.selector, rec.seed) in out:
            raise ValueError(f"two runs of {rec.selector} seed {rec.seed}")
        out[(rec.selector, rec.seed)] = rec
    return out


def compare(
    records: Sequence[RunRecord],
    selector: str,
    baseline: str = BASELINE,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    rng_seed: int = RNG_SEED,
) -> Comparison:
    """Every statistic of :data:`STATISTICS` for ``selector`` against ``baseline``, over the seeds both have.

    Raises:
        ValueError: no common seed, two runs of one (selector, seed), or a pair with different budgets.
    """
    runs = _index(records)
    own = {seed for sel, seed in runs if sel == selector}
    other = {seed for sel, seed in runs if sel == baseline}
    seeds = sorted(own & other)
    if not seeds:
        raise ValueError(
            f"{selector} (seeds {sorted(own)}) and {baseline} (seeds {sorted(other)}) have no seed in common"
        )
    unpaired = {name: sorted(s - set(seeds)) for name, s in ((selector, own), (baseline, other)) if s - set(seeds)}
    if unpaired:
        logger.warning("%s vs %s: seeds without a partner, not used: %s", selector, baseline, unpaired)
    per_seed: dict[int, dict[str, _Value]] = {}
    for seed in seeds:
        sel, base = runs[(selector, seed)], runs[(baseline, seed)]
        if sel.total_steps > base.total_steps:
            raise ValueError(
                f"seed {seed}: {selector} ran {sel.total_steps} steps, {baseline} {base.total_steps}; "
                "a selector run longer than the baseline's budget cannot be paired (a shorter one is censored)"
            )
        per_seed[seed] = _per_seed(sel, base)
    stats = {}
    for spec in STATISTICS:
        cells = {seed: per_seed[seed][spec.key] for seed in seeds}
        values = {seed: c.value for seed, c in cells.items()}
        column = [values[s] for s in seeds]
        stats[spec.key] = PairedStat(
            spec,
            values,
            {seed: c.reason for seed, c in cells.items() if c.reason is not None},
            {seed: c.parts for seed, c in cells.items() if c.parts is not None},
            core.interval(column, level),
            bootstrap_interval(column, level, resamples, rng_seed),
        )
    return Comparison(selector, baseline, seeds, stats, unpaired, level, resamples, rng_seed)


def compare_all(
    records: Sequence[RunRecord],
    baseline: str = BASELINE,
    selectors: Sequence[str] | None = None,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    rng_seed: int = RNG_SEED,
) -> list[Comparison]:
    """:func:`compare` for every selector other than the baseline (in the records' order, or ``selectors``').

    Raises:
        ValueError: no run of the baseline, or as :func:`compare`.
    """
    present = list(dict.fromkeys(r.selector for r in records))
    if baseline not in present:
        raise ValueError(f"no {baseline!r} runs to pair with; selectors found: {present}")
    chosen = [s for s in (selectors or present) if s != baseline]
    return [compare(records, s, baseline, level, resamples, rng_seed) for s in chosen]
