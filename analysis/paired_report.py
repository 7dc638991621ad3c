"""The paired statistics' outputs: markdown tables, a JSON dict and a figure (:mod:`analysis.paired_stats`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis import render
from analysis.paired_relative import CeilingShare, PeerRatio
from analysis.paired_stats import BASELINE, SPECS, Comparison, PairedStat, StatSpec

__all__ = [
    "FIGURE_KEYS",
    "ceiling_to_dict",
    "ceiling_to_markdown",
    "overview_cell",
    "paired_figure",
    "peers_to_dict",
    "peers_to_markdown",
    "save_figure",
    "to_dict",
    "to_markdown",
]

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


def peers_to_markdown(ratios: Sequence[PeerRatio], baseline: str, level: float = 0.95) -> str:
    """The :func:`peer_ratios` table in markdown."""
    spec = SPECS["roll100"]
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
        f"Rollouts to {baseline}'s best accuracy, selector over peer",
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
        "(bots_verl.core.selection_metrics.interval)",
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


def overview_cell(st: PairedStat) -> str:
    """One statistic's cell in the overview table: its mean and t interval, or why it is not available."""
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
    keys = [k for k in overview_keys if not SPECS[k].needs_log or any(c.stats[k].available for c in comparisons)]
    caption = [
        f"Paired by seed against {baseline} (same seed = same start, data order and sampling); mean [{level} t "
        f"interval] over the paired seeds. Ratios: 1 = no difference; differences (Δ, selector − {baseline}, in "
        "accuracy): 0 = no difference. (k/n —) = k of n seeds have no value (never reached the target, a "
        "non-positive slope, no run log); the detailed tables say why. n/a = no seed has a value.",
        f"Intervals: t = {notes['t']}; bootstrap = {notes['bootstrap']}. With few seeds the t interval is wide and "
        "the bootstrap interval too narrow (it never leaves the range of the per-seed values): read both.",
    ]
    dropped = [SPECS[k].label for k in overview_keys if k not in keys]
    if dropped:
        caption.append(f"Not available without run logs: {', '.join(dropped)}.")
    overview = render.Grid(
        f"Paired statistics against {baseline}",
        ["selector", "seeds", *(SPECS[k].label for k in keys)],
        [[c.selector, str(len(c.seeds)), *(overview_cell(c.stats[k]) for k in keys)] for c in comparisons],
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
        spec = SPECS[key]
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
