"""The paper's tables from run logs: the main table and the ρ / λ / selection ablations, as markdown or LaTeX.

The tables are built by :mod:`analysis.paper_tables` and rendered by :mod:`analysis.table_text`; this module is the
command line.

Usage::

    python -m analysis.tables --runs runs/ --methods paper --format md --out table.md
    python -m analysis.tables --runs runs/ --table rho --format latex
    python -m analysis.tables --runs runs/ --methods paper --table places      # first/second places per model size
    python -m analysis.tables --runs runs/ --table overhead                    # selection + update share of step time
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis import loader, overhead, places, render
from analysis.cli_checks import out_file_problem
from analysis.loader import LoadError, Run
from analysis.paper_tables import ABLATION_PARAMS, ablation_table, main_table
from analysis.table_model import Table
from analysis.table_text import to_latex, to_markdown
from bots_verl.core import selection_metrics as core

__all__ = ["TABLE_CHOICES", "build_parser", "main", "tables_for"]

logger = logging.getLogger(__name__)

#: ``--table`` choices: the tables built from a main table or ablations, and the standalone ones.
TABLE_CHOICES = ("main", "rho", "lam", "selection", "places", "overhead", "all")


def tables_for(
    runs: Sequence[Run],
    which: str = "main",
    acc_metric: str | None = None,
    method: str = "bots",
    defaults: Mapping[str, Any] | None = None,
    level: float = 0.95,
    ttb_denominator: str = "baseline",
    methods: Sequence[str] | None = None,
) -> list[Table]:
    """Compute the requested tables (``main``, ``rho``, ``lam``, ``selection`` or ``all``).

    ``all`` skips ablations without runs. ``methods`` restricts the main table (see :func:`main_table`).
    """
    out: list[Table] = []
    if which in ("main", "all"):
        out.append(main_table(runs, acc_metric, level, ttb_denominator, methods))
    for param in ABLATION_PARAMS:
        if which not in (param, "all"):
            continue
        try:
            out.append(ablation_table(runs, param, method, defaults, acc_metric, level, ttb_denominator))
        except LoadError as exc:
            if which == param or "two or more values" not in str(exc):
                raise
            logger.info("skipping the %s ablation: %s", param, exc)
    return out


def _parse_defaults(items: Sequence[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or key not in ABLATION_PARAMS:
            raise ValueError(f"--default expects rho=VALUE, lam=VALUE or selection=VALUE, got {item!r}")
        out[key] = float(value) if ABLATION_PARAMS[key][2] else value
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``python -m analysis.tables``."""
    p = argparse.ArgumentParser(prog="python -m analysis.tables", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="directories (searched recursively) or .csv files")
    p.add_argument(
        "--table",
        choices=TABLE_CHOICES,
        default="main",
        help="main; rho / lam / selection ablations; places (first/second places per model size, from the main "
        "table); overhead (selection + update time share); all",
    )
    p.add_argument("--format", choices=["md", "latex"], default="md")
    p.add_argument("--out", type=Path, help="write here instead of stdout")
    p.add_argument("--metric", help="accuracy metric name (default: the runs' val-core/<source>/acc/mean@<n>)")
    p.add_argument(
        "--methods",
        nargs="+",
        metavar="LABEL",
        help="main table and places: only these labels ('paper' = random offline_easy2hard bots_mopps bots_dots "
        "bots); default: every label found",
    )
    p.add_argument(
        "--ttb-denominator",
        choices=core.TTB_DENOMINATORS,
        default=core.TTB_DENOMINATORS[0],
        help="baseline: over Random's own steps to its target (Random = 1.00, the paper's tables); budget: over x%% "
        "of the budget",
    )
    p.add_argument("--method", default="bots", help="the selector ablated in the rho/lam/selection tables")
    p.add_argument(
        "--default", action="append", metavar="PARAM=VALUE", help="held value in ablations (rho=0.1, selection=...)"
    )
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata for runs whose sidecar lacks it")
    p.add_argument("--digits", type=int, default=2)
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals over seeds")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _render_all(args: argparse.Namespace, runs: Sequence[Run]) -> str:
    md = args.format == "md"
    out: list[str] = []
    computed: list[Table] = []
    if args.table in ("main", "rho", "lam", "selection", "all"):
        defaults = _parse_defaults(args.default)
        computed = tables_for(
            runs, args.table, args.metric, args.method, defaults, args.level, args.ttb_denominator, args.methods
        )
        out += [to_markdown(t, args.digits) if md else to_latex(t, args.digits) for t in computed]
    grids: list[render.Grid] = []
    if args.table in ("places", "all"):
        main = next((t for t in computed if t.title == "Main table"), None)
        if main is None:
            main = main_table(runs, args.metric, args.level, args.ttb_denominator, args.methods)
        grids.append(places.to_grid(places.place_counts(main, args.digits)))
    if args.table in ("overhead", "all"):
        try:
            grids.append(overhead.to_grid(overhead.overhead_table(runs, args.level), args.digits))
        except LoadError as exc:
            if args.table == "overhead":
                raise
            logger.info("skipping the overhead table: %s", exc)
    out += [render.to_markdown(g) if md else render.to_latex(g) for g in grids]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 with a one-line message on bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = out_file_problem(args.out)
    if problem:
        parser.error(problem)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        runs = loader.load_runs(args.runs, loader.parse_meta_args(args.meta))
        text = _render_all(args, runs)
    except (LoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        logger.info("wrote %s", args.out)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
