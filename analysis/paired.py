"""Paired statistics of each selector against a baseline (Random), seed by seed, with t and bootstrap intervals.

Runs with the same seed share the starting policy, the data order and the rollout sampling, so the comparison that
removes most of the seed-to-seed noise is the per-seed difference (or ratio) between a selector and the baseline.
Only seeds that both have are paired; the others are listed, never silently mixed in. Per paired seed:

- ``TTB(x)`` and ``BSF(x)`` at 25/50/100% of the budget: :func:`bots_verl.core.metrics.ttb` / ``bsf``, the
  definitions of the paper's tables (:mod:`analysis.tables`; TTB over the baseline's own steps, so Random = 1);
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
Student-t interval (:func:`bots_verl.core.metrics.interval`) and a paired bootstrap percentile interval (the seeds
resampled with replacement, 10000 times, from a fixed generator seed, so the output is deterministic). With few
seeds neither is trustworthy alone: the t interval is wide (t quantile 4.30 at 3 seeds) and the bootstrap interval
too narrow (it never leaves the range of the per-seed values). A seed where a statistic is undefined (target never
reached, a non-positive slope, no run log) is counted with its reason.

Input: a toy benchmark (:mod:`bots_verl.toy.benchmark`): its ``summary.json`` (the per-run records: selector, seed,
accuracy curve) and, when present, the run logs under ``<benchmark>/runs/<selector>_s<seed>/run`` (for ETR,
rollouts and wall-clock; without them those statistics are marked not available).

**Against a peer** (``--peers dapo_ds greso_ds``): per seed, the rollouts a selector spent to reach the baseline's
final accuracy over those the peer spent to reach the same accuracy (the ratio of their ``Roll(100%)``, which share
the baseline's denominator), with both intervals; undefined where either never reached it. This is how "≤ 0.5 of
DAPO-DS's rollouts" is judged (:func:`peer_ratios`).

**Reference generations** (issue 36, whenever run logs are there): per arm, the reference-model generations it
read (labelled tasks x samples per task x its reference columns, 0 for a selector that reads none) and those it saved
against a full labelling, beside its TTB(100%), Roll(100%) and training rollouts (:mod:`analysis.reference_cost`;
samples per task from the benchmark's data profile, or ``--reference-samples``/``--reference-models``).

**Share of the ceiling's step saving** (``--ceiling oracle``, issue 38): per seed, ``(1 - TTB_arm) / (1 - TTB_oracle)``
at TTB(100%), the part of the steps the ceiling saves over the baseline that the arm saves too (1: as much as the
oracle, 0: none; undefined where either never reached the target or the oracle saved no steps), with both intervals,
the share of the mean savings ``(1 - mean TTB_arm) / (1 - mean TTB_oracle)``, and the ceiling's ETR
(:func:`ceiling_shares`).

Usage::

    python -m analysis.paired runs/toy                          # markdown on stdout
    python -m analysis.paired runs/toy/summary.json --baseline random --out runs/toy
    # --out writes paired.md, paired.json and figures/toy_paired.png
    python -m analysis.paired runs/beyond --peers dapo_ds greso_ds    # adds the rollouts against each peer
    python -m analysis.paired runs/toy --ceiling oracle    # adds every arm's share of the oracle's step saving
    python -m analysis.paired runs/beyond --reference-samples 16 --reference-models 2   # outside the toy's profiles
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from analysis import loader, reference_cost, render
from analysis.cost_metrics import Curve, cost_to_baseline
from analysis.loader import LoadError, Run
from analysis.tables import cost_curve
from bots_verl import runlog
from bots_verl.core import metrics as core
from bots_verl.runlog import ETR_METRIC, ROLLOUTS_METRIC, STEP_TIME_METRIC

__all__ = [
    "BASELINE",
    "CeilingShare",
    "FIGURE_KEYS",
    "STATISTICS",
    "Comparison",
    "PairedStat",
    "PeerRatio",
    "RunRecord",
    "StatSpec",
    "bootstrap_interval",
    "ceiling_shares",
    "ceiling_to_dict",
    "ceiling_to_markdown",
    "benchmark_reference_costs",
    "compare",
    "compare_all",
    "final_gain",
    "load_benchmark",
    "main",
    "mean_gain",
    "paired_figure",
    "peer_ratios",
    "peers_to_dict",
    "peers_to_markdown",
    "records_from_summary",
    "save_figure",
    "slope",
    "to_dict",
    "to_markdown",
]

logger = logging.getLogger(__name__)

BASELINE = "random"
RESAMPLES = 10_000
RNG_SEED = 0
#: the toy benchmark's domain (run logs, figure names)
DOMAIN = "toy"


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
_SPECS = {s.key: s for s in STATISTICS}
#: the overview table's and the figure's statistics
OVERVIEW_KEYS = (
    "ttb100",
    "bsf100",
    "slope_ratio",
    "mean_gain_diff",
    "final_gain_diff",
    "etr_diff",
    "roll100",
    "time100",
)
FIGURE_KEYS = ("ttb100", "slope_ratio", "mean_gain_diff", "final_gain_diff")


# ------------------------------------------------------------------------------------------------------ inputs
@dataclass
class RunRecord:
    """One run: its held-out accuracy curve and, when available, its run log.

    Attributes:
        selector: the selector (the table row).
        seed: the training seed (the pairing key).
        total_steps: the training budget in steps.
        accuracy: held-out accuracy at the evaluated steps (strictly increasing).
        log: the run log (:class:`analysis.loader.Run`) for ETR, rollouts and wall-clock; ``None`` if absent.
    """

    selector: str
    seed: int
    total_steps: int
    accuracy: Curve
    log: Run | None = None


def _curve(points: Any, where: str) -> Curve:
    """A record's ``{step: accuracy}`` as a curve; every step an integer, every value a finite number in [0, 1].

    The same rule as the run logs' accuracies (:func:`analysis.loader.accuracy_metric`): a value that is not a
    finite number in [0, 1] (null, NaN, 7.5) is an error naming the record, the curve and the step.
    """
    if not isinstance(points, Mapping):
        raise LoadError(f"{where}: not an object of step -> accuracy (a {type(points).__name__})")
    pairs = []
    try:
        for key, value in points.items():
            step = runlog.parse_int(key, f"{where}: step key")
            pairs.append((step, runlog.check_accuracy(value, f"{where} at step {step}")))
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    pairs.sort()
    return Curve(np.array([p[0] for p in pairs], np.float64), np.array([p[1] for p in pairs], np.float64))


def _load_log(path: Path, selector: str, seed: int) -> Run | None:
    """The run log at ``path`` if there is one (``None`` otherwise); it must be the record's seed."""
    if not path.is_dir() or not runlog.metrics_files(path):
        return None
    run = loader.load_run(path)
    if run.seed != seed:
        raise LoadError(f"run log {path} is seed {run.seed}, but its benchmark record says {selector} seed {seed}")
    return run


def records_from_summary(
    summary: Mapping[str, Any], runs_dir: Path | None = None, key: str = "accuracy", source: str = "summary"
) -> list[RunRecord]:
    """The runs of a toy benchmark summary (``summary.json``), with their run logs when ``runs_dir`` holds them.

    Args:
        summary: the summary (its ``runs`` records: ``selector``, ``seed``, ``steps``, ``accuracy``).
        runs_dir: the benchmark's ``runs/`` directory; each run's log is ``<selector>_s<seed>/run``.
        key: the record's curve to compare (``accuracy``: held-out; ``pool_accuracy``: training pool).
        source: where the summary was read, for messages.

    Raises:
        LoadError: a record without the curve, a seed, step or budget that is not an integer, an accuracy that is not
            a finite number in [0, 1] (naming the record and the step), or a run log of another seed.
    """
    try:
        if not isinstance(summary, Mapping) or not isinstance(summary.get("runs"), list):
            raise ValueError("it holds no list of 'runs'")
        profile = summary.get("profile") or {}
        budget = profile.get("steps") if isinstance(profile, Mapping) else None
        if budget is not None:
            budget = runlog.parse_int(budget, "profile.steps")
    except ValueError as exc:
        raise LoadError(f"{source}: not a toy benchmark summary: {exc}") from None
    out = []
    for index, rec in enumerate(summary["runs"]):
        try:
            if not isinstance(rec, Mapping):
                raise ValueError(f"not an object: {rec!r:.80}")
            selector = str(rec["selector"])
            seed = runlog.parse_int(rec["seed"], "seed")
            steps = rec.get("steps")
            steps = runlog.parse_int(steps, "steps") if steps is not None else None
        except (KeyError, ValueError) as exc:
            raise LoadError(f"{source}: run record {index}: {exc}") from None
        if not rec.get(key):
            raise LoadError(f"{source}: benchmark record {selector} seed {seed} has no {key!r} curve")
        curve = _curve(rec[key], f"{source}: benchmark record {selector} seed {seed}: {key!r}")
        total = steps or budget or int(curve.steps[-1])
        log = _load_log(runs_dir / f"{selector}_s{seed}" / "run", selector, seed) if runs_dir else None
        out.append(RunRecord(selector, seed, total, curve, log))
    return out


def load_benchmark(path: str | Path, key: str = "accuracy") -> list[RunRecord]:
    """The run records of a finished toy benchmark: a directory holding ``summary.json``, or that file.

    Run logs are read from ``runs/`` next to the summary when they exist (the committed results have none).

    Raises:
        LoadError: no summary there, or as :func:`records_from_summary`.
    """
    path = Path(path)
    summary_file = path / "summary.json" if path.is_dir() else path
    if not summary_file.is_file():
        raise LoadError(f"{path}: no toy benchmark summary.json there")
    try:
        summary = json.loads(summary_file.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise LoadError(f"{summary_file}: cannot read it ({exc})") from exc
    runs_dir = summary_file.parent / "runs"
    records = records_from_summary(summary, runs_dir if runs_dir.is_dir() else None, key, str(summary_file))
    logger.info(
        "%d runs from %s, %d with run logs", len(records), summary_file, sum(r.log is not None for r in records)
    )
    return records


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
        t: mean and Student-t interval over the seeds with a value (:class:`bots_verl.core.metrics.Interval`).
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


@dataclass
class PeerRatio:
    """One selector's rollouts to the baseline's final accuracy over a peer's, paired by seed.

    Attributes:
        values: per seed both have, the ratio (NaN where undefined).
        reasons: per seed without a value, why (the selector's or the peer's ``Roll(100%)`` reason).
        t: mean and Student-t interval over the seeds with a value.
        bootstrap: the percentile bootstrap interval of the same mean.
    """

    selector: str
    peer: str
    values: dict[int, float]
    reasons: dict[int, str]
    t: core.Interval
    bootstrap: tuple[float, float]


def peer_ratios(comparisons: Sequence[Comparison], peers: Sequence[str], key: str = "roll100") -> list[PeerRatio]:
    """Every non-peer selector's ``key`` statistic over each peer's, seed by seed (module docstring).

    Raises:
        ValueError: a peer is not among the comparisons, or a selector and a peer share no seed.
    """
    by_name = {c.selector: c for c in comparisons}
    missing = [p for p in peers if p not in by_name]
    if missing:
        raise ValueError(f"peers {missing} are not among the compared selectors {sorted(by_name)}")
    out = []
    for comp in comparisons:
        if comp.selector in peers:
            continue
        for peer in peers:
            other = by_name[peer]
            seeds = sorted(set(comp.seeds) & set(other.seeds))
            if not seeds:
                raise ValueError(f"{comp.selector} and {peer} share no seed")
            own_stat, peer_stat = comp.stats[key], other.stats[key]
            values, reasons = {}, {}
            for seed in seeds:
                a, b = own_stat.values[seed], peer_stat.values[seed]
                values[seed] = a / b if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan
                if not math.isfinite(values[seed]):
                    why = own_stat.reasons.get(seed) or peer_stat.reasons.get(seed) or "not defined"
                    reasons[seed] = f"{comp.selector if seed in own_stat.reasons else peer}: {why}"
            column = [values[s] for s in seeds]
            c0 = comparisons[0]
            out.append(
                PeerRatio(
                    comp.selector,
                    peer,
                    values,
                    reasons,
                    core.interval(column, c0.level),
                    bootstrap_interval(column, c0.level, c0.resamples, c0.rng_seed),
                )
            )
    return out


def peers_to_markdown(ratios: Sequence[PeerRatio], baseline: str, level: float = 0.95) -> str:
    """The :func:`peer_ratios` table in markdown."""
    spec = _SPECS["roll100"]
    rows = [
        [
            r.selector,
            r.peer,
            ", ".join(f"{s}: {_fmt(v, spec)}" for s, v in r.values.items()),
            _fmt(r.t.mean, spec),
            _fmt_pair(r.t.lo, r.t.hi, spec),
            _fmt_pair(*r.bootstrap, spec),
            "; ".join(f"seed {s} {why}" for s, why in r.reasons.items()),
        ]
        for r in ratios
    ]
    grid = render.Grid(
        f"Rollouts to {baseline}'s final accuracy, selector over peer",
        ["selector", "peer", "per seed", "mean", f"{level:.0%} t", f"{level:.0%} bootstrap", "seeds without a value"],
        rows,
        [
            f"Per seed, the selector's Roll(100%) over the peer's (the rollouts each spent to reach {baseline}'s best "
            "within its budget); < 1: the selector needs fewer rollouts than the peer."
        ],
    )
    return render.to_markdown(grid)


def _per_seed_fields(r: PeerRatio | CeilingShare) -> dict[str, Any]:
    """The per-seed values, their reasons where undefined, and the t and bootstrap intervals of one paired ratio."""
    return {
        "per_seed": {str(s): _num(v) for s, v in r.values.items()},
        "undefined": {str(s): why for s, why in r.reasons.items()},
        "n": r.t.n,
        "mean": _num(r.t.mean),
        "t": {"lo": _num(r.t.lo), "hi": _num(r.t.hi)},
        "bootstrap": {"lo": _num(r.bootstrap[0]), "hi": _num(r.bootstrap[1])},
    }


def peers_to_dict(ratios: Sequence[PeerRatio]) -> list[dict[str, Any]]:
    """A JSON-able form of :func:`peer_ratios`."""
    return [
        {
            "selector": r.selector,
            "peer": r.peer,
            **_per_seed_fields(r),
        }
        for r in ratios
    ]


@dataclass
class CeilingShare:
    """One selector's share of the ceiling's step saving over the baseline, paired by seed (issue 38).

    Attributes:
        values: per seed both have, ``(1 - TTB_selector) / (1 - TTB_ceiling)`` at TTB(100%) (NaN where undefined).
        reasons: per seed without a value, why.
        t: mean and Student-t interval over the seeds with a value.
        bootstrap: the percentile bootstrap interval of the same mean.
        of_means: ``(1 - mean TTB_selector) / (1 - mean TTB_ceiling)`` over the seeds with a value.
        etr: the selector's mean per-step ETR over those seeds (NaN without run logs).
        ceiling_etr: the ceiling's, over the same seeds.
    """

    selector: str
    ceiling: str
    values: dict[int, float]
    reasons: dict[int, str]
    t: core.Interval
    bootstrap: tuple[float, float]
    of_means: float
    etr: float
    ceiling_etr: float


def _mean_etr(comp: Comparison, seeds: Sequence[int]) -> float:
    """The selector's mean per-step ETR over ``seeds`` (the selector side of its ETR Δ), NaN where not logged."""
    parts = comp.stats["etr_diff"].parts
    own = [parts[s][0] for s in seeds if s in parts and math.isfinite(parts[s][0])]
    return float(np.mean(own)) if own and len(own) == len(seeds) else math.nan


def ceiling_shares(comparisons: Sequence[Comparison], ceiling: str, key: str = "ttb100") -> list[CeilingShare]:
    """Every other selector's share of ``ceiling``'s step saving, seed by seed (module docstring).

    Raises:
        ValueError: the ceiling is not among the comparisons, or a selector shares no seed with it.
    """
    by_name = {c.selector: c for c in comparisons}
    if ceiling not in by_name:
        raise ValueError(f"ceiling {ceiling!r} is not among the compared selectors {sorted(by_name)}")
    top = by_name[ceiling].stats[key]
    out = []
    for comp in comparisons:
        if comp.selector == ceiling:
            continue
        seeds = sorted(set(comp.seeds) & set(by_name[ceiling].seeds))
        if not seeds:
            raise ValueError(f"{comp.selector} and {ceiling} share no seed")
        own = comp.stats[key]
        values, reasons = {}, {}
        for seed in seeds:
            a, b = own.values[seed], top.values[seed]
            if not math.isfinite(a):
                reasons[seed] = f"{comp.selector}: {own.reasons.get(seed, 'not defined')}"
            elif not math.isfinite(b):
                reasons[seed] = f"{ceiling}: {top.reasons.get(seed, 'not defined')}"
            elif b >= 1.0:
                reasons[seed] = f"{ceiling} saved no steps (TTB {b:.2f})"
            values[seed] = (1.0 - a) / (1.0 - b) if seed not in reasons else math.nan
        column = [values[s] for s in seeds]
        both = [s for s in seeds if s not in reasons]
        saved = 1.0 - float(np.mean([top.values[s] for s in both])) if both else math.nan
        of_means = (1.0 - float(np.mean([own.values[s] for s in both]))) / saved if both and saved > 0 else math.nan
        c0 = comparisons[0]
        out.append(
            CeilingShare(
                comp.selector,
                ceiling,
                values,
                reasons,
                core.interval(column, c0.level),
                bootstrap_interval(column, c0.level, c0.resamples, c0.rng_seed),
                of_means,
                _mean_etr(comp, both),
                _mean_etr(by_name[ceiling], both),
            )
        )
    return out


def ceiling_to_markdown(shares: Sequence[CeilingShare], baseline: str, level: float = 0.95) -> str:
    """The :func:`ceiling_shares` table in markdown."""
    if not shares:
        return "No selector to compare with the ceiling.\n"
    ceiling = shares[0].ceiling
    spec = StatSpec("share", "share", "ratio", "higher", 2)
    rows = [
        [
            r.selector,
            ", ".join(f"{s}: {_fmt(v, spec)}" for s, v in r.values.items()),
            _fmt(r.t.mean, spec),
            _fmt_pair(r.t.lo, r.t.hi, spec),
            _fmt_pair(*r.bootstrap, spec),
            _fmt(r.of_means, spec),
            _fmt(r.etr, spec),
            _fmt(r.ceiling_etr, spec),
            "; ".join(f"seed {s} {why}" for s, why in r.reasons.items()),
        ]
        for r in shares
    ]
    grid = render.Grid(
        f"Share of {ceiling}'s step saving over {baseline}",
        [
            "selector",
            "per seed",
            "mean",
            f"{level:.0%} t",
            f"{level:.0%} bootstrap",
            "share of mean savings",
            "ETR",
            f"{ceiling} ETR",
            "seeds without a value",
        ],
        rows,
        [
            f"Per seed, (1 − TTB_selector) / (1 − TTB_{ceiling}) at TTB(100%) against {baseline}: the part of the "
            f"steps {ceiling} saves that the selector saves too (1: as many, 0: none, < 0: slower than {baseline}). "
            "Share of mean savings: the same with each TTB's mean over the seeds with a value. ETR: mean per-step "
            "effective task ratio over those seeds (run logs)."
        ],
    )
    return render.to_markdown(grid)


def ceiling_to_dict(shares: Sequence[CeilingShare]) -> list[dict[str, Any]]:
    """A JSON-able form of :func:`ceiling_shares`."""
    return [
        {
            "selector": r.selector,
            "ceiling": r.ceiling,
            **_per_seed_fields(r),
            "share_of_mean_savings": _num(r.of_means),
            "etr": _num(r.etr),
            "ceiling_etr": _num(r.ceiling_etr),
        }
        for r in shares
    ]


# ------------------------------------------------------------------------------------------------------ output
def _num(x: float) -> float | None:
    """JSON has no NaN or infinity: those become null (the reason is reported next to them)."""
    return float(x) if math.isfinite(x) else None


def _intervals_note(comparisons: Sequence[Comparison]) -> dict[str, str]:
    c = comparisons[0] if comparisons else Comparison("", BASELINE, [], {})
    return {
        "t": f"{c.level:.0%} Student-t interval of the mean over the paired seeds with a value "
        "(bots_verl.core.metrics.interval)",
        "bootstrap": f"{c.level:.0%} percentile interval of the mean over {c.resamples} resamples of the paired seeds "
        f"with a value (with replacement, numpy.random.default_rng({c.rng_seed}))",
    }


def to_dict(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    """A JSON-able summary: per selector, per statistic, the per-seed values, the mean and both intervals."""
    out: dict[str, Any] = {
        "baseline": comparisons[0].baseline if comparisons else BASELINE,
        "intervals": _intervals_note(comparisons),
        "comparisons": {},
    }
    for comp in comparisons:
        stats = {}
        for key, st in comp.stats.items():
            stats[key] = {
                "label": st.spec.label,
                "kind": st.spec.kind,
                "null": st.spec.null,
                "better": st.spec.better,
                "per_seed": {str(s): _num(v) for s, v in st.values.items()},
                "undefined": {str(s): r for s, r in st.reasons.items()},
                "parts": {str(s): {"selector": _num(a), "baseline": _num(b)} for s, (a, b) in st.parts.items()},
                "n": st.t.n,
                "n_undefined": st.t.n_missing,
                "mean": _num(st.t.mean),
                "t": {"lo": _num(st.t.lo), "hi": _num(st.t.hi)},
                "bootstrap": {"lo": _num(st.bootstrap[0]), "hi": _num(st.bootstrap[1])},
            }
        out["comparisons"][comp.selector] = {
            "seeds": comp.seeds,
            "unpaired_seeds": comp.unpaired,
            "statistics": stats,
        }
    return out


def _fmt(x: float, spec: StatSpec) -> str:
    if not math.isfinite(x):
        return "—"
    return f"{x:+.{spec.digits}f}" if spec.kind == "difference" else f"{x:.{spec.digits}f}"


def _fmt_pair(lo: float, hi: float, spec: StatSpec) -> str:
    return f"[{_fmt(lo, spec)}, {_fmt(hi, spec)}]" if math.isfinite(lo) and math.isfinite(hi) else "—"


def _fmt_undefined(st: PairedStat) -> str:
    return ", ".join(f"{k} {reason}" for reason, k in st.undefined_counts().items())


def _overview_cell(st: PairedStat) -> str:
    if not st.available:
        return "n/a (" + _fmt_undefined(st) + ")" if st.reasons else "n/a"
    text = _fmt(st.t.mean, st.spec)
    if math.isfinite(st.t.lo):  # one seed has a mean but no interval
        text += " " + _fmt_pair(st.t.lo, st.t.hi, st.spec)
    return text + (f" ({st.t.n_missing}/{st.t.n + st.t.n_missing} —)" if st.t.n_missing else "")


def to_markdown(comparisons: Sequence[Comparison], overview_keys: Sequence[str] = OVERVIEW_KEYS) -> str:
    """An overview table (mean [t interval] per selector) and one detailed table per selector, in markdown.

    Columns of the overview that need run logs are left out when no selector has a value there (the detailed
    tables still list them, marked ``no run log``).
    """
    if not comparisons:
        return "No selector to compare.\n"
    baseline = comparisons[0].baseline
    level = f"{comparisons[0].level:.0%}"
    notes = _intervals_note(comparisons)
    keys = [k for k in overview_keys if not _SPECS[k].needs_log or any(c.stats[k].available for c in comparisons)]
    caption = [
        f"Paired by seed against {baseline} (same seed = same start, data order and sampling); mean [{level} t "
        f"interval] over the paired seeds. Ratios: 1 = no difference; differences (Δ, selector − {baseline}, in "
        "accuracy): 0 = no difference. (k/n —) = k of n seeds have no value (never reached the target, a "
        "non-positive slope, no run log); the detailed tables say why. n/a = no seed has a value.",
        f"Intervals: t = {notes['t']}; bootstrap = {notes['bootstrap']}. With few seeds the t interval is wide and "
        "the bootstrap interval too narrow (it never leaves the range of the per-seed values): read both.",
    ]
    dropped = [_SPECS[k].label for k in overview_keys if k not in keys]
    if dropped:
        caption.append(f"Not available without run logs: {', '.join(dropped)}.")
    overview = render.Grid(
        f"Paired statistics against {baseline}",
        ["selector", "seeds", *(_SPECS[k].label for k in keys)],
        [[c.selector, str(len(c.seeds)), *(_overview_cell(c.stats[k]) for k in keys)] for c in comparisons],
        caption,
    )
    parts = [render.to_markdown(overview)]
    for comp in comparisons:
        rows = []
        for st in comp.stats.values():
            rows.append(
                [
                    st.spec.label,
                    f"{st.spec.null:g}",
                    ", ".join(_fmt(st.values[s], st.spec) for s in comp.seeds),
                    _fmt(st.t.mean, st.spec),
                    _fmt_pair(st.t.lo, st.t.hi, st.spec),
                    _fmt_pair(*st.bootstrap, st.spec),
                    _fmt_undefined(st),
                ]
            )
        caption = []
        if comp.unpaired:
            caption.append(
                "Not paired (no partner seed): " + "; ".join(f"{k} seeds {v}" for k, v in comp.unpaired.items()) + "."
            )
        seeds = ", ".join(map(str, comp.seeds))
        grid = render.Grid(
            f"{comp.selector} vs {baseline}, seeds {seeds}",
            [
                "statistic",
                "null",
                f"per seed ({seeds})",
                "mean",
                f"{level} t",
                f"{level} bootstrap",
                "seeds without a value",
            ],
            rows,
            caption,
        )
        parts.append(render.to_markdown(grid))
    definitions = (
        "TTB(x): steps to the baseline's best within x of the budget over the baseline's own steps to it; BSF(x): "
        "best within x over the baseline's best within x; slope ratio: least-squares slope of accuracy vs step, "
        "baseline over selector (< 1: the selector learns faster; undefined if a slope is ≤ 0); mean gain Δ: area "
        "under (accuracy − accuracy at step 0) over the evaluated steps, divided by the steps spanned; final gain Δ: "
        "gain at the last evaluation; ETR Δ: mean per-step effective task ratio; Roll/Time(100%): rollouts / "
        "seconds to the baseline's best within the budget over what the baseline spent to reach it (ETR, Roll and "
        "Time need the run logs)."
    )
    return "\n".join(parts) + "\n" + definitions + "\n"


def paired_figure(comparisons: Sequence[Comparison], keys: Sequence[str] = FIGURE_KEYS) -> Any:
    """One panel per statistic: each seed's paired value (a point per seed), the mean with its t interval (black) and
    bootstrap interval (grey, thick), and a dashed line at the null value; returns a matplotlib ``Figure``.

    Seeds without a value are counted under the selector's name (``k —``).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.3 * len(keys), 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    all_seeds = sorted({s for c in comparisons for s in c.seeds})
    colours = {s: f"C{i % 10}" for i, s in enumerate(all_seeds)}
    for ax, key in zip(axes, keys, strict=True):
        spec = _SPECS[key]
        ax.axhline(spec.null, ls="--", lw=1, color="0.5")
        for i, comp in enumerate(comparisons):
            st = comp.stats[key]
            n = max(len(comp.seeds), 1)
            for j, seed in enumerate(comp.seeds):
                value = st.values[seed]
                if math.isfinite(value):
                    x = i - 0.25 + 0.2 * j / max(n - 1, 1)
                    ax.plot(x, value, "o", ms=4, color=colours[seed], label=f"seed {seed}")
            if math.isfinite(st.bootstrap[0]):
                ax.plot(
                    [i + 0.22] * 2,
                    st.bootstrap,
                    lw=4,
                    color="0.65",
                    solid_capstyle="butt",
                    label=f"bootstrap {comp.level:.0%}",
                )
            if math.isfinite(st.t.mean):
                yerr = None
                if math.isfinite(st.t.lo):
                    yerr = [[st.t.mean - st.t.lo], [st.t.hi - st.t.mean]]
                ax.errorbar(
                    i + 0.1,
                    st.t.mean,
                    yerr=yerr,
                    fmt="D",
                    ms=4,
                    color="k",
                    capsize=3,
                    label=f"mean, t {comp.level:.0%}",
                )
            if st.reasons:
                ax.annotate(
                    f"{len(st.reasons)} no value",
                    (i, 0),
                    xycoords=("data", "axes fraction"),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                    color="C3",
                )
        ax.set_xticks(range(len(comparisons)))
        ax.set_xticklabels([c.selector for c in comparisons], rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(comparisons) - 0.4)
        ax.set_title(spec.label, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    baseline = comparisons[0].baseline if comparisons else BASELINE
    if unique:  # no seed with a value draws nothing to label (and matplotlib >= 3.10 refuses ncol=0)
        fig.legend(unique.values(), unique.keys(), loc="upper right", fontsize=7, ncol=len(unique))
    fig.suptitle(f"paired against {baseline}, per seed", fontsize=10, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def save_figure(comparisons: Sequence[Comparison], path: str | Path, keys: Sequence[str] = FIGURE_KEYS) -> Path:
    """Draw :func:`paired_figure` into ``path`` (PNG; parent directories are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    paired_figure(comparisons, keys).savefig(path, dpi=150)
    return path


def benchmark_reference_costs(
    path: str | Path,
    records: Sequence[RunRecord],
    comparisons: Sequence[Comparison],
    settings: reference_cost.ReferenceSettings | None = None,
) -> list[reference_cost.ReferenceCost]:
    """The reference generations of the baseline and every compared arm (:mod:`analysis.reference_cost`), over the
    seeds with a run log; empty when no record has one.

    Args:
        path: the benchmark (directory or its ``summary.json``), for its data profile and ``data/manifest.json``.
        records: its run records.
        comparisons: the arms compared (their order is the table's, after the baseline).
        settings: samples per task and models of a full labelling; default: the toy's (:func:`toy_settings`).

    Raises:
        LoadError: as :func:`analysis.reference_cost.run_reference`.
    """
    if not comparisons or not any(r.log is not None for r in records):
        return []
    summary_file = Path(path) / "summary.json" if Path(path).is_dir() else Path(path)
    if settings is None:
        settings = reference_cost.toy_settings(json.loads(summary_file.read_text()))
    arms = [comparisons[0].baseline, *(c.selector for c in comparisons)]
    logs = {arm: {r.seed: r.log for r in records if r.selector == arm and r.log is not None} for arm in arms}
    manifest = summary_file.parent / "data" / "manifest.json"
    return reference_cost.reference_costs({arm: runs for arm, runs in logs.items() if runs}, settings, manifest)


# --------------------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``python -m analysis.paired``."""
    p = argparse.ArgumentParser(prog="python -m analysis.paired", description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=Path, help="a toy benchmark directory (summary.json, runs/) or its summary.json")
    p.add_argument("--baseline", default=BASELINE, help="the selector every other is paired with")
    p.add_argument("--selectors", nargs="+", help="only these selectors (default: every one in the summary)")
    p.add_argument(
        "--curve",
        default="accuracy",
        choices=["accuracy", "pool_accuracy"],
        help="the records' curve: held-out accuracy (default) or the training pool's",
    )
    p.add_argument(
        "--peers", nargs="+", default=[], help="also the rollouts of every other selector over each of these peers'"
    )
    p.add_argument(
        "--ceiling", help="also every other selector's share of this one's step saving (e.g. oracle; issue 38)"
    )
    p.add_argument(
        "--reference-samples",
        type=int,
        help="samples per task behind each reference column (default: the toy benchmark's data profile)",
    )
    p.add_argument(
        "--reference-models",
        type=int,
        help="reference models of a full labelling (with --reference-samples; default: the toy's)",
    )
    p.add_argument("--out", type=Path, help="write paired.md, paired.json and figures/toy_paired.png here")
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap resamples")
    p.add_argument("--rng-seed", type=int, default=RNG_SEED, help="the bootstrap's generator seed")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; prints the markdown; returns the exit status (2 with a one-line message on bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.reference_samples is None) != (args.reference_models is None):
        parser.error("--reference-samples and --reference-models go together")
    for name in ("reference_samples", "reference_models"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        records = load_benchmark(args.path, args.curve)
        comparisons = compare_all(records, args.baseline, args.selectors, args.level, args.resamples, args.rng_seed)
        ratios = peer_ratios(comparisons, args.peers) if args.peers else []
        shares = ceiling_shares(comparisons, args.ceiling) if args.ceiling else []
        settings = None
        if args.reference_samples is not None:
            settings = reference_cost.ReferenceSettings(
                args.reference_samples, args.reference_models, "--reference-samples/--reference-models"
            )
        costs = benchmark_reference_costs(args.path, records, comparisons, settings)
    except (LoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = to_markdown(comparisons)
    summary = to_dict(comparisons)
    if ratios:
        text += "\n" + peers_to_markdown(ratios, args.baseline, args.level)
        summary["peers"] = peers_to_dict(ratios)
    if shares:
        text += "\n" + ceiling_to_markdown(shares, args.baseline, args.level)
        summary["ceiling"] = ceiling_to_dict(shares)
    if costs:
        steps = {c.selector: {k: _overview_cell(c.stats[k]) for k in ("ttb100", "roll100")} for c in comparisons}
        text += "\n" + reference_cost.costs_to_markdown(costs, steps, args.baseline)
        summary["reference_cost"] = reference_cost.costs_to_dict(costs)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "paired.md").write_text(text)
        (args.out / "paired.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
        figure = save_figure(comparisons, args.out / "figures" / f"{DOMAIN}_paired.png")
        logger.info("wrote %s, %s and %s", args.out / "paired.md", args.out / "paired.json", figure)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
