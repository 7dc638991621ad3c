"""The toy benchmark's summary: the analysis commands it runs, its paired statistics and ``summary.md``."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bots_verl.fileio import markdown_table, write_json_atomic
from bots_verl.runlog import TOY_POOL_METRIC
from bots_verl.toy.arms import DYNAMIC_SAMPLING, VARIANTS, BenchmarkProfile, check_profile
from bots_verl.toy.evaluate import family_heldout_metric
from bots_verl.toy.heldout import SAMPLES
from bots_verl.toy.run_records import (
    check_recorded_settings,
    finished_record,
    finished_runs,
    median,
    planned_runs,
    read_build,
    run_dir_of,
)

__all__ = ["add_paired", "analyse", "run_analysis", "summarize_finished", "summary_markdown", "wall_clock"]

logger = logging.getLogger(__name__)


def analyse(root: Path, run_dirs: Sequence[Path] = (), family: str = "arith") -> dict[str, str]:
    """Run ``analysis.tables`` and ``analysis.figures`` on the runs; returns the rendered tables by name.

    Args:
        root: the benchmark directory (tables and figures are written there).
        run_dirs: the runs to analyse; default: every finished run under ``<root>/runs`` (:func:`finished_runs`).
        family: the runs' task family: its held-out accuracy (:func:`~bots_verl.toy.evaluate.family_heldout_metric`);
            only arithmetic's training pool has an exact accuracy to tabulate.
    """
    runs = [str(d) for d in run_dirs or finished_runs(root)]
    heldout = family_heldout_metric(family)
    out: dict[str, str] = {}
    tables = [("main", "main", heldout), ("overhead", "overhead", heldout)]
    if family == "arith":
        tables.insert(1, ("pool", "main", TOY_POOL_METRIC))
    for name, table, metric in tables:
        path = root / f"table_{name}.md"
        cmd = [sys.executable, "-m", "analysis.tables", "--runs", *runs, "--metric", metric, "--table", table]
        run_analysis([*cmd, "--out", str(path)], f"the {name} table")
        out[name] = path.read_text()
    figures = root / "figures"
    run_analysis(
        [sys.executable, "-m", "analysis.figures", "--runs", *runs, "--metric", heldout, "--out", str(figures)]
        + ["--figures", "accuracy", "etr"],
        "the figures",
    )
    return out


def run_analysis(cmd: Sequence[str], what: str) -> None:
    """Run one ``python -m analysis.*`` command; a failure raises with the analysis' own message.

    Raises:
        RuntimeError: naming ``what``, the exit status, the command and the end of its stderr (its ``error:`` line,
            which names the run, the metric and the step).
    """
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "").strip()[-3000:] or "(it printed nothing)"
        module = next((c for c in cmd if c.startswith("analysis.")), cmd[0])
        raise RuntimeError(f"{what} ({module}) failed with exit status {proc.returncode}: {said}\ncommand: {list(cmd)}")


def add_paired(root: Path, summary: dict[str, Any], tables: dict[str, str]) -> None:
    """Paired statistics of every selector against ``random`` (``python -m analysis.paired`` on ``summary.json``),
    and against the dynamic-sampling arms as peers when there are any (``--peers``).

    Writes ``paired.md``, ``paired.json`` and ``figures/toy_paired.png`` into ``root``, puts the dict under
    ``summary["paired"]`` (and rewrites ``summary.json``) and the section under ``tables["paired"]``; does nothing
    without a ``random`` run or another selector to compare with it.
    """
    selectors = {r["selector"] for r in summary["runs"]}
    if "random" not in selectors or len(selectors) < 2:
        return
    cmd = [sys.executable, "-m", "analysis.paired", str(root), "--baseline", "random", "--out", str(root)]
    # the dynamic-sampling arms are the peers issue 24 judges rollouts against (every other arm's over theirs)
    peers = sorted(a for a in selectors if set(DYNAMIC_SAMPLING) <= set(VARIANTS.get(a, ("", ()))[1]))
    if peers and selectors - {"random", *peers}:
        cmd += ["--peers", *peers]
    run_analysis(cmd, "the paired statistics")
    summary["paired"] = json.loads((root / "paired.json").read_text())
    tables["paired"] = "## Paired against random, seed by seed\n\n" + (root / "paired.md").read_text()
    write_json_atomic(root / "summary.json", summary, indent=1)


def _curves(records: Sequence[dict[str, Any]], selectors: Sequence[str], key: str = "accuracy") -> str:
    """Mean and 95% interval over seeds of an accuracy at each evaluated step, by selector (markdown)."""
    from bots_verl.core.selection_metrics import interval

    steps = sorted({int(s) for r in records for s in r[key]})
    table = []
    for sel in selectors:
        rows = [r for r in records if r["selector"] == sel]
        cells = []
        for s in steps:
            vals = [r[key][str(s)] for r in rows if str(s) in r.get(key, {})]
            cells.append(interval(vals).format(3) if vals else "")
        table.append([sel, *cells])
    return markdown_table(["selector", *(f"step {s}" for s in steps)], table)


def _gains_by_seed(records: Sequence[dict[str, Any]], selectors: Sequence[str]) -> str:
    """Each run's held-out accuracy at step 0 and at its last evaluation, one row per seed (markdown), and the mean
    gain per selector with its 95% t-interval over seeds."""
    from bots_verl.core.selection_metrics import interval

    by_run = {(r["selector"], r["seed"]): r for r in records}
    rows = []
    gains: dict[str, list[float]] = {sel: [] for sel in selectors}
    for seed in sorted({r["seed"] for r in records}):
        cells = []
        for sel in selectors:
            run = by_run.get((sel, seed))
            if run is None:
                cells.append("")
                continue
            start, last = run["accuracy"]["0"], run["accuracy"][str(max(int(s) for s in run["accuracy"]))]
            gains[sel].append(last - start)
            cells.append(f"{start:.4f} → {last:.4f} ({last - start:+.3f})")
        rows.append([seed, *cells])
    means = [f"{interval(gains[sel]).format(3)} (n={len(gains[sel])})" if gains[sel] else "" for sel in selectors]
    rows.append(["mean gain [95% t]", *means])
    return markdown_table(["seed", *selectors], rows)


def summarize_finished(profile: BenchmarkProfile, root: Path) -> dict[str, Any]:
    """Summary, tables, figures and paired statistics of the profile's runs that have finished, training nothing.

    For a benchmark that is still under way or was stopped (it takes longer than one sitting): only the runs with a
    ``done.json`` enter the tables (a run still training never does), and ``summary.json`` says how many of the
    planned runs it holds. The summary is labelled with ``profile``'s settings, so they are checked first, as for
    training: the profile itself (:func:`~bots_verl.toy.arms.check_profile`), the build in ``<root>/data``, and every
    planned run the folder holds (:func:`~bots_verl.toy.run_records.check_recorded_settings`).

    Raises:
        ValueError: a profile the benchmark refuses, or settings the folder's build or runs contradict (both named);
            nothing is written.
        RuntimeError: no prepared data in ``root``, or no finished run of the profile.
    """
    check_profile(profile)
    manifest = read_build(profile, root)
    plan = planned_runs(profile)
    check_recorded_settings(manifest, profile, root, plan)
    finished, records = [], []
    for sel, seed in plan:
        run_dir = run_dir_of(root, sel, seed)
        record = finished_record(run_dir, profile.steps_of(sel))
        if record is not None:
            finished.append(run_dir)
            records.append(record)
    if not finished:
        raise RuntimeError(f"no finished run of the {profile.name} profile in {root / 'runs'}")
    tables = analyse(root, finished, profile.family)
    summary = {
        "profile": asdict(profile),
        "finished_runs": len(records),
        "planned_runs": len(plan),
        "median_step_s": median([r["median_step_s"] for r in records]),
        "runs": records,
    }
    write_json_atomic(root / "summary.json", summary, indent=1)
    add_paired(root, summary, tables)
    (root / "summary.md").write_text(summary_markdown(summary, tables, manifest, root / "data"))
    return summary


def wall_clock(summary: dict[str, Any]) -> str:
    """The summary's wall-clock line: the stages' times, or how many of the planned runs finished."""
    prof = summary["profile"]
    if "finished_runs" in summary:
        finished, planned = summary["finished_runs"], summary["planned_runs"]
        if finished == planned:
            return f"All {planned} planned runs finished; median step {summary['median_step_s']:.2f} s."
        return (
            f"**Partial: {finished} of {planned} planned runs finished** (a rerun of the profile resumes the rest); "
            f"median step {summary['median_step_s']:.2f} s."
        )
    return (
        f"Wall-clock: prepare {summary['prepare_s']:.0f} s, training {summary['train_s']:.0f} s ({prof['jobs']} runs "
        f"at a time), total {summary['total_s']:.0f} s; median step {summary['median_step_s']:.2f} s."
    )


def summary_markdown(summary: dict[str, Any], tables: dict[str, str], manifest: dict[str, Any], data_dir: Path) -> str:
    """``summary.md``: the profile, the build, the wall-clock line, the tables and the accuracy curves by seed."""
    prof = summary["profile"]
    calibration = (data_dir / "calibration.md").read_text() if (data_dir / "calibration.md").is_file() else ""
    # keep the model table and the correlations of the calibration, not the per-cell table
    calibration = re.split(r"\n\| cell \|", calibration)[0].strip()
    selectors = prof["selectors"]
    family = prof.get("family", "arith")
    # arithmetic's accuracy is exact; the other families' is the sampled estimate (bots_verl/toy/families.md)
    how = "exact" if family == "arith" else f"canonical likelihood + {SAMPLES[family]} samples per prompt"
    pool = (
        [
            "## Training-pool accuracy (`" + TOY_POOL_METRIC + "`)\n\n" + tables["pool"].strip(),
            "Training-pool accuracy by step:\n\n" + _curves(summary["runs"], selectors, "pool_accuracy"),
        ]
        if "pool" in tables
        else []
    )
    return (
        "\n\n".join(
            [
                f"# Toy benchmark ({prof['name']}): BOTS and baselines with real GRPO in verl on CPU",
                f"Build `{prof['data_profile']}_s{prof.get('build_seed', 0)}`"
                + ("" if family == "arith" else f" of the {family} family")
                + f". {len(prof['selectors'])} selectors x {len(prof['seeds'])} seeds, {prof['steps']} GRPO steps of "
                f"{prof['prompts']} tasks x {prof['n']} rollouts, lr {prof['lr']}, held-out accuracy ({how}, "
                f"temperature 1, {manifest['data']['heldout_tasks']} prompts) every "
                f"{prof['eval_every']} steps. " + wall_clock(summary),
                "## Starting point (calibration)\n\n" + calibration,
                "## Main table (`python -m analysis.tables --metric "
                + family_heldout_metric(family)
                + "`)\n\n"
                + tables["main"].strip(),
                "## Held-out accuracy by step (mean [95% interval] over seeds)\n\n"
                + _curves(summary["runs"], selectors),
                "## Held-out accuracy by seed, step 0 → last step\n\n" + _gains_by_seed(summary["runs"], selectors),
                *pool,
                *([tables["paired"].strip()] if "paired" in tables else []),
                "## Selection overhead\n\n" + tables["overhead"].strip(),
                "Figures: `figures/toy_accuracy.png`, `figures/toy_etr.png`"
                + (", `figures/toy_paired.png`." if "paired" in tables else "."),
            ]
        )
        + "\n"
    )
