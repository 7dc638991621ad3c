"""Paired comparisons beyond the baseline: against a peer and as a share of the ceiling's saving.

**Against a peer** (``--peers dapo_ds greso_ds``): per seed, the rollouts a selector spent to reach the baseline's
best accuracy within its budget over those the peer spent to reach the same accuracy (the ratio of their
``Roll(100%)``, which share the baseline's denominator), with both intervals; undefined where either never reached it.
This is how "≤ 0.5 of DAPO-DS's rollouts" is judged (:func:`peer_ratios`).

**Reference generations** (issue 36, whenever run logs are there): per arm, the reference-model generations it
read (labelled tasks x samples per task x its reference columns, 0 for a selector that reads none) and those it saved
against a full labelling, beside its TTB(100%), Roll(100%) and training rollouts (:mod:`analysis.reference_cost`;
samples per task from the benchmark's data profile, or ``--reference-samples``/``--reference-models``).

**Share of the ceiling's step saving** (``--ceiling oracle``, issue 38): per seed, ``(1 - TTB_arm) / (1 - TTB_oracle)``
at TTB(100%), the part of the steps the ceiling saves over the baseline that the arm saves too (1: as much as the
oracle, 0: none; undefined where either never reached the target or the oracle saved no steps), with both intervals,
the share of the mean savings ``(1 - mean TTB_arm) / (1 - mean TTB_oracle)``, and the ceiling's ETR
(:func:`ceiling_shares`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.paired_stats import Comparison, bootstrap_interval
from bots_verl.core import selection_metrics as core

__all__ = ["CeilingShare", "PeerRatio", "ceiling_shares", "peer_ratios"]


@dataclass
class PeerRatio:
    """One selector's rollouts to the baseline's best accuracy over a peer's, paired by seed.

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
