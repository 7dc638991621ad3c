"""Paired statistics of each selector against a baseline (Random), seed by seed, with t and bootstrap intervals.

Runs with the same seed share the starting policy, the data order and the rollout sampling, so the comparison that
removes most of the seed-to-seed noise is the per-seed difference (or ratio) between a selector and the baseline.

This module is the command line; the statistics are defined in :mod:`analysis.paired_stats` (what each one means),
the peer and ceiling comparisons in :mod:`analysis.paired_relative`, the outputs in :mod:`analysis.paired_report`.

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
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis import reference_cost
from analysis.cli_checks import out_folder_problem
from analysis.loader import LoadError
from analysis.paired_inputs import RunRecord, load_benchmark
from analysis.paired_relative import ceiling_shares, peer_ratios
from analysis.paired_report import (
    ceiling_to_dict,
    ceiling_to_markdown,
    overview_cell,
    peers_to_dict,
    peers_to_markdown,
    save_figure,
    to_dict,
    to_markdown,
)
from analysis.paired_stats import BASELINE, RESAMPLES, RNG_SEED, Comparison, compare_all

__all__ = ["benchmark_reference_costs", "build_parser", "main"]

logger = logging.getLogger(__name__)

#: the toy benchmark's domain (run logs, figure names)
DOMAIN = "toy"


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
    problem = out_folder_problem(args.out)
    if problem:
        parser.error(problem)
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
        steps = {c.selector: {k: overview_cell(c.stats[k]) for k in ("ttb100", "roll100")} for c in comparisons}
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
