"""Two builds of the toy testbed side by side: does each claim hold on both?

``python -m analysis.builds --build full_s0=DIR0 --build full_s2=DIR2 [--arms ...] --out FILE.md`` reads each
build's ``paired.json`` (``python -m analysis.paired DIR --ceiling oracle --peers dapo_ds``, run on that build's
benchmark directory) and writes one table per statistic, a column per build, plus a verdict per arm: whether the two
builds agree in direction with intervals that say so.

Runs are paired only within a build (a build is its own policy, references and task pool); across builds only the
direction and the intervals are compared, never seeds.

Statistics, per arm, mean [95% t interval] over the paired seeds of the build:

- ``TTB(100%)``: steps to Random's best held-out accuracy, over Random's steps (< 1: faster than Random);
- ``Roll(100%)``: the same in rollouts (dynamic sampling pays for its discarded groups here);
- ``steps over dapo_ds``: the arm's steps to Random's best over DAPO-DS's, seed by seed (the TTB ratios share
  Random's denominator, so their quotient is the step ratio of the two arms);
- ``rollouts over dapo_ds``: ``analysis.paired --peers``' rollouts to Random's best, the arm's over DAPO-DS's;
- ``mean gain Δ`` and ``final gain Δ`` against Random (held-out accuracy, AUC over steps and last evaluation);
- ``share of the oracle's saving``: ``analysis.paired --ceiling``'s per-seed share of the oracle's step saving.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.cli_checks import out_file_problem, unknown_names_problem
from bots_verl.core.selection_metrics import Interval, interval
from bots_verl.fileio import markdown_table

logger = logging.getLogger(__name__)

__all__ = ["STATISTICS", "agreement", "build_statistics", "main", "render"]

#: (key, label, null value, better) of every statistic compared across builds
STATISTICS: tuple[tuple[str, str, float, str], ...] = (
    ("ttb100", "TTB(100%) vs Random", 1.0, "lower"),
    ("roll100", "Roll(100%) vs Random", 1.0, "lower"),
    ("steps_over_dapo_ds", "steps to Random's best over dapo_ds's", 1.0, "lower"),
    ("rollouts_over_dapo_ds", "rollouts to Random's best over dapo_ds's", 1.0, "lower"),
    ("mean_gain_diff", "mean gain Δ vs Random", 0.0, "higher"),
    ("final_gain_diff", "final gain Δ vs Random", 0.0, "higher"),
    ("oracle_share", "share of the oracle's step saving", 0.0, "higher"),
)
_PEER = "dapo_ds"


def _per_seed(entry: Mapping[str, Any] | None) -> dict[str, float]:
    """The per-seed values of one ``paired.json`` statistic (missing seeds as NaN are left out)."""
    if not entry:
        return {}
    return {str(seed): float(v) for seed, v in entry.get("per_seed", {}).items() if v is not None}


def build_statistics(paired: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Per arm, per statistic of :data:`STATISTICS`, the per-seed values of one build's ``paired.json``.

    Raises:
        ValueError: ``paired`` is not ``analysis.paired``'s output against ``random``.
    """
    if not isinstance(paired, Mapping):
        raise ValueError(
            f"holds a JSON {type(paired).__name__}, not the object analysis.paired writes "
            "(keys 'baseline' and 'comparisons')"
        )
    if paired.get("baseline") != "random" or not isinstance(paired.get("comparisons"), Mapping):
        raise ValueError("not a paired.json of analysis.paired against random (baseline 'random', 'comparisons')")
    out: dict[str, dict[str, dict[str, float]]] = {}
    for arm, comparison in paired["comparisons"].items():
        stats = comparison.get("statistics", {})
        out[arm] = {
            key: _per_seed(stats.get(key)) for key in ("ttb100", "roll100", "mean_gain_diff", "final_gain_diff")
        }
    peer_ttb = out.get(_PEER, {}).get("ttb100", {})
    for arm, stats in out.items():
        stats["steps_over_dapo_ds"] = (
            {s: v / peer_ttb[s] for s, v in stats["ttb100"].items() if s in peer_ttb and peer_ttb[s] > 0}
            if arm != _PEER
            else {}
        )
    for peer in paired.get("peers") or []:
        if peer.get("peer") == _PEER and peer.get("selector") in out:
            out[peer["selector"]]["rollouts_over_dapo_ds"] = _per_seed(peer)
    for ceiling in paired.get("ceiling") or []:
        if ceiling.get("selector") in out:
            out[ceiling["selector"]]["oracle_share"] = _per_seed(ceiling)
    return out


def _interval(values: Mapping[str, float]) -> Interval:
    return interval([v for v in values.values() if math.isfinite(v)])


def agreement(intervals: Sequence[Interval], null: float) -> str:
    """Whether builds agree on a statistic's side of ``null``.

    ``agree`` when every build's interval lies on one side of ``null`` (the same side), ``null on every build`` when
    every interval holds ``null``, ``build-dependent`` when the intervals say different things (one excludes the null
    and another holds it or lies on the other side), ``—`` when a build has fewer than two seeds, and ``one build``
    when there is nothing to compare with.
    """
    if len(intervals) < 2:
        return "one build"
    if any(iv.n < 2 or not math.isfinite(iv.lo) for iv in intervals):
        return "—"
    sides = {("above" if iv.lo > null else "below" if iv.hi < null else "holds") for iv in intervals}
    if sides == {"holds"}:
        return "null on every build"
    if len(sides) == 1:
        return f"agree ({next(iter(sides))} {null:g})"
    return "build-dependent"


def render(builds: Mapping[str, Mapping[str, Any]], arms: Sequence[str] | None = None) -> str:
    """Markdown: one table per statistic, a row per arm, a column per build and the agreement column.

    Raises:
        ValueError: an arm of ``arms`` is in no build (the message names the known arms), or as
            :func:`build_statistics`.
    """
    per_build = {name: build_statistics(paired) for name, paired in builds.items()}
    names = list(per_build)
    known = list(dict.fromkeys(a for stats in per_build.values() for a in stats))
    if arms is None:
        arms = known
    problem = unknown_names_problem(arms, known, "--arms", "arms")
    if problem:
        raise ValueError(problem)
    sections = [
        f"# The toy testbed's claims on {len(names)} builds: {', '.join(f'`{n}`' for n in names)}",
        "Mean [95% t interval] over each build's paired seeds (n = seeds with a value); seeds pair within a build "
        "only. Agreement: every build's interval on the same side of the null (`agree`), every interval holding it "
        "(`null on every build`), or not (`build-dependent`); `—`: a build has fewer than 2 seeds.",
    ]
    for key, label, null, better in STATISTICS:
        rows = []
        for arm in arms:
            cells = [_interval(per_build[n].get(arm, {}).get(key, {})) for n in names]
            if all(c.n == 0 for c in cells):
                continue
            digits = 4 if key.endswith("gain_diff") else 2
            shown = [f"{c.format(digits)} (n={c.n})" if c.n else "" for c in cells]
            rows.append([arm, *shown, agreement(cells, null)])
        if rows:
            sections.append(
                f"## {label} ({better} is better, null {null:g})\n\n"
                + markdown_table(["arm", *names, "agreement"], rows).strip()
            )
    return "\n\n".join(sections) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m analysis.builds", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--build", action="append", required=True, metavar="NAME=DIR", help="a build's name and its paired.json folder"
    )
    parser.add_argument("--arms", nargs="+", help="arms in row order (default: every arm of any build)")
    parser.add_argument("--out", help="markdown file (default: standard output)")
    args = parser.parse_args(argv)
    problem = out_file_problem(args.out)
    if problem:
        parser.error(problem)
    builds: dict[str, Any] = {}
    for spec in args.build:
        name, sep, folder = spec.partition("=")
        if not sep or not name or not folder:
            parser.error(f"--build {spec!r}: expected NAME=DIR")
        if name in builds:
            parser.error(f"--build {name!r} is given twice: each build needs a name of its own")
        path = Path(folder) / "paired.json" if Path(folder).is_dir() else Path(folder)
        try:
            builds[name] = json.loads(path.read_text())
            build_statistics(builds[name])
        except (OSError, ValueError) as exc:
            print(f"analysis.builds: {path}: {exc}", file=sys.stderr)
            return 2
    try:
        text = render(builds, args.arms)
    except ValueError as exc:
        parser.error(str(exc))
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
