"""The paper's Table 1 (domains x methods) from run logs of several domains, with the paper's 1.5B figures beside.

Each ``--domain NAME DIR...`` names a domain and its runs (run-log directories, or folders searched for them); a run
must record that domain, or one that ``--read-as RECORDED=NAME`` maps to it (the toy testbed's arithmetic runs record
``toy``: ``--read-as toy=math``). The table is :func:`analysis.paper_tables.main_table` of the paper's five methods
(the code that tabulates a GPU recipe's run logs), rendered by :mod:`analysis.table_text`; beside it the paper's own
figures (:mod:`analysis.paper_reported`), Random's held-out gain per domain and one sentence per domain on BOTS
against Random (none where Random gains under :data:`MIN_RANDOM_GAIN`).

Usage::

    python -m analysis.table1 --domain math runs/math --domain code runs/code --out table1.md
    python -m analysis.table1 --domain math runs/toy_table1/arith/runs --read-as toy=math --model toy \\
        --metric val-core/toy__arith/acc/exact --title "Table 1 on the toy testbed" --out table1.md
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from analysis import loader
from analysis.cli_checks import out_file_problem
from analysis.loader import LoadError, Run
from analysis.paper_reported import PAPER_MAIN_1_5B, PAPER_MODEL, PAPER_SOURCE
from analysis.paper_tables import main_columns, main_table
from analysis.table_model import BASELINE, PAPER_LABELS, Table, display
from analysis.table_text import to_markdown
from bots_verl.core.selection_metrics import Interval, interval
from bots_verl.fileio import markdown_table

__all__ = [
    "RandomGain",
    "beside_paper",
    "build_parser",
    "load_domain",
    "main",
    "random_gain",
    "table1_markdown",
    "verdict",
]

logger = logging.getLogger(__name__)

#: the paper's domain order (columns); other domains follow alphabetically
DOMAIN_ORDER = ("math", "code", "logic")
#: the paper's Table 1 columns: TTB and BSF at 25, 50 and 100% of the budget
TABLE1_KINDS = ("ttb", "bsf")
#: the sentence's column: steps to Random's best within the whole budget
VERDICT_COLUMN = "TTB100"
#: Random's least held-out gain (its last evaluation minus its first, mean over seeds) for a domain to get a verdict:
#: where Random learns less, its best, the target of every TTB, is within noise of where it started (issue 60: a
#: family where Random learns nothing is recalibrated, not reported)
MIN_RANDOM_GAIN = 0.05


def load_domain(
    domain: str, paths: Sequence[str | Path], read_as: Mapping[str, str] | None = None, model: str | None = None
) -> list[Run]:
    """The runs under ``paths`` as runs of ``domain`` (and of ``model`` when given).

    Args:
        domain: the domain they are tabulated under.
        paths: run-log directories or folders holding them (:func:`analysis.loader.find_run_paths`).
        read_as: recorded domain -> domain: runs recording a key count as its value (e.g. ``{"toy": "math"}``).
        model: the model name the table shows for them (the toy testbed's runs record the policy's path).

    Raises:
        LoadError: a run that records another domain (naming it, its domain and the one asked), or as
            :func:`analysis.loader.load_runs`.
    """
    runs = loader.load_runs(paths)
    aliases = {recorded for recorded, name in (read_as or {}).items() if name == domain}
    wrong = [f"{r.path} ({r.domain})" for r in runs if r.domain != domain and r.domain not in aliases]
    if wrong:
        accepted = ", ".join(sorted({domain, *aliases}))
        raise LoadError(
            f"--domain {domain}: these runs record another domain than {accepted}: {', '.join(wrong[:5])}"
            + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
            + "; give each domain its own runs, or --read-as RECORDED=DOMAIN for a domain recorded under another name"
        )
    return [dataclasses.replace(r, domain=domain, model=model if model is not None else r.model) for r in runs]


def _ordered(domains: Sequence[str]) -> list[str]:
    return sorted(domains, key=lambda d: (DOMAIN_ORDER.index(d) if d in DOMAIN_ORDER else len(DOMAIN_ORDER), d))


class RandomGain(NamedTuple):
    """Random's held-out accuracy in one domain, each figure the mean [interval] over its seeds: at the first
    evaluation, its best (the target of every TTB), at the last, and the gains ``last - first`` (the one
    :data:`MIN_RANDOM_GAIN` applies to) and ``best - first``."""

    first: Interval
    best: Interval
    last: Interval
    gain: Interval
    best_gain: Interval


def random_gain(
    runs: Sequence[Run], domain: str, model: str, acc_metric: str | Mapping[str, str] | None, level: float = 0.95
) -> RandomGain:
    """Random's held-out accuracy in ``domain`` at its first evaluation, its best and its last, and the gains.

    Raises:
        LoadError: no Random run of ``domain`` and ``model``, or as :func:`analysis.loader.accuracy_metric`.
    """
    firsts, bests, lasts = [], [], []
    for run in runs:
        if run.label != BASELINE or run.domain != domain or run.model != model:
            continue
        series = loader.accuracy_metric(run, acc_metric)[1].dropna()
        firsts.append(float(series.iloc[0]))
        bests.append(float(series.max()))
        lasts.append(float(series.iloc[-1]))
    if not firsts:
        raise LoadError(f"{domain} ({model}): no {BASELINE} run to measure its held-out gain on")
    first, best, last = np.asarray(firsts), np.asarray(bests), np.asarray(lasts)
    return RandomGain(*(interval(x, level) for x in (first, best, last, last - first, best - first)))


def verdict(table: Table, domain: str, model: str | None = None, digits: int = 2, gain: Interval | None = None) -> str:
    """One sentence: BOTS against Random in ``domain`` by TTB(100%); BOTS beats Random there when every seed reached
    Random's best and the whole interval lies below Random's 1.00. No verdict from one seed (no interval), nor with
    Random's held-out ``gain`` under :data:`MIN_RANDOM_GAIN`: that domain is to be recalibrated."""
    cell: Interval = table.cell("bots", domain, VERDICT_COLUMN, model)
    head = f"**{domain}**: BOTS vs Random there: TTB(100%) {cell.format(digits)}"
    # a gain that prints as the floor passes it: 0.15 - 0.10 is 0.04999... in binary
    if gain is not None and not gain.mean >= MIN_RANDOM_GAIN - 1e-9:
        return (
            f"**{domain}**: no verdict: Random's held-out gain {gain.format(3)} is under {MIN_RANDOM_GAIN}, so its "
            "best is within noise of its start; recalibrate the domain (a harder pool or a weaker starting policy)."
        )
    if cell.n == 0:
        return f"{head} (does not beat: no seed reached Random's best)."
    if cell.n_missing:
        never = f"{cell.n_missing} of {cell.n + cell.n_missing} seeds never reached Random's best"
        return f"{head} (does not beat: {never})."
    if cell.n == 1:
        return f"{head} (no verdict: one seed gives no interval)."
    if cell.hi < 1.0:
        return f"{head} (beats: the interval lies below Random's 1.00)."
    return f"{head} (does not beat: the interval reaches Random's 1.00)."


def beside_paper(table: Table, model: str, digits: int = 2) -> str:
    """Our mean [interval] beside the paper's 1.5B figure, for every column the paper's transcription has (markdown).

    Columns only for the table's domains; a domain the paper has no figures for gets none.
    """
    headers = {c.key: c.header for c in main_columns()}
    columns = [(d, key) for d in _ordered(table.domains) for key in PAPER_MAIN_1_5B.get(d, {})]
    header = ["Method"] + [f"{d} {headers[key]} {label}" for d, key in columns for label in ("ours", "paper")]
    rows = []
    for row in table.rows_of(model):
        cells: list[str] = [display(row)]
        for domain, key in columns:
            ours = table.cells.get((model, row, domain, key))
            paper = PAPER_MAIN_1_5B[domain][key].get(row)
            cells += ["n/a" if ours is None else ours.format(digits), "n/a" if paper is None else f"{paper:.2f}"]
        rows.append(cells)
    return markdown_table(header, rows)


def table1_markdown(
    runs: Sequence[Run],
    title: str,
    acc_metric: str | Mapping[str, str] | None = None,
    level: float = 0.95,
    digits: int = 2,
) -> str:
    """Table 1 of ``runs`` (every domain must hold the paper's five methods; TTB and BSF at 25/50/100%, the paper's
    domain order), the paper's figures beside it and the sentence per domain, as one markdown document.

    Raises:
        LoadError: a method without runs (naming the labels found), a run without its Random partner, runs of
            different lengths (:func:`analysis.paper_tables.main_table`).
    """
    table = main_table(runs, acc_metric, level, methods=list(PAPER_LABELS))
    domains = _ordered(table.domains)
    # the paper's layout: its domains in its order, TTB and BSF only (ETR, rollouts and time are in each domain's own
    # main table, python -m analysis.tables)
    columns = {d: [c for c in cols if c.kind in TABLE1_KINDS] for d, cols in table.columns.items()}
    table = dataclasses.replace(table, title="Table 1", domains=domains, columns=columns)
    for model in table.models:
        absent = [f"{d}: {label}" for d in domains for label in PAPER_LABELS if (model, label, d) not in table.seeds]
        if absent:
            raise LoadError(f"Table 1{f' ({model})' if len(table.models) > 1 else ''} lacks runs of {absent}")
    parts = [f"# {title}", to_markdown(table, digits).strip()]
    for model in table.models:
        name = f" ({model})" if len(table.models) > 1 else ""
        parts.append(
            f"## Beside the paper's {PAPER_MODEL}{name}\n\n"
            f"Ours: mean [{level:.0%} interval] over seeds, relative to {BASELINE} with the same seed. Paper: "
            f"{PAPER_SOURCE}; only these columns were found.\n\n" + beside_paper(table, model, digits)
        )
        gains = {d: random_gain(runs, d, model, acc_metric, level) for d in domains}
        parts.append(
            f"## {display(BASELINE)}'s held-out gain{name}\n\n"
            "Its held-out accuracy at the first evaluation, its best (every TTB's target) and the last; a domain needs "
            f"a mean gain (last - first) of {MIN_RANDOM_GAIN} for a verdict.\n\n"
            + markdown_table(
                ["Domain", "first", "best", "last", "gain", "best - first", "seeds"],
                [[d, *(g.format(3) for g in gains[d]), str(gains[d].gain.n)] for d in domains],
            )
        )
        sentences = "\n".join(f"- {verdict(table, d, model, digits, gains[d].gain)}" for d in domains)
        parts.append(f"## BOTS against Random{name}\n\n{sentences}")
    return "\n\n".join(parts) + "\n"


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``python -m analysis.table1``."""
    p = argparse.ArgumentParser(prog="python -m analysis.table1", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--domain",
        nargs="+",
        action="append",
        required=True,
        metavar="NAME_THEN_DIRS",
        help="a domain's name, then its run-log directories or folders holding them (repeat per domain)",
    )
    p.add_argument(
        "--read-as",
        action="append",
        default=[],
        metavar="RECORDED=DOMAIN",
        help="runs that record domain RECORDED count as DOMAIN (the toy's arithmetic runs: toy=math)",
    )
    p.add_argument("--model", help="the model name shown for every run (default: each run's own)")
    p.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="[DOMAIN=]NAME",
        help="accuracy metric name, for every domain or (repeated) one domain's (default: the runs' "
        "val-core/<source>/acc/mean@<n>)",
    )
    p.add_argument("--title", default="Table 1: domains x methods", help="the document's heading")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals over seeds")
    p.add_argument("--digits", type=int, default=2)
    p.add_argument("--out", type=Path, help="write the markdown here instead of stdout")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 with a one-line ``error:`` message on bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = out_file_problem(args.out)
    if problem:
        parser.error(problem)
    read_as = {}
    for item in args.read_as:
        recorded, sep, domain = item.partition("=")
        if not sep or not recorded or not domain:
            parser.error(f"--read-as expects RECORDED=DOMAIN, got {item!r}")
        read_as[recorded] = domain
    metrics: dict[str, str] = {}  # "" -> the one NAME for every domain
    for item in args.metric:
        domain, sep, name = item.rpartition("=")
        if (sep and not domain) or not name or domain in metrics:
            parser.error(f"--metric expects NAME or DOMAIN=NAME, each domain once, got {item!r}")
        metrics[domain] = name
    if "" in metrics and len(metrics) > 1:
        parser.error("--metric: give one NAME for every domain or DOMAIN=NAME per domain, not both")
    acc_metric = metrics if "" not in metrics and metrics else metrics.get("")
    try:
        runs = []
        for name, *dirs in args.domain:
            if not dirs:
                raise LoadError(f"--domain {name}: give its run directories after the name")
            runs += load_domain(name, dirs, read_as, args.model)
        text = table1_markdown(runs, args.title, acc_metric, args.level, args.digits)
    except (LoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
