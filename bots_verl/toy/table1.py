"""The paper's Table 1 on the toy testbed, by one command: every task family's benchmark, then the table.

``python -m bots_verl.toy.table1 --out runs/toy_table1 [--families arith code logic] [--no-train]``
(or ``--summarize-finished``)

1. For each family (:mod:`bots_verl.toy.families`), the ``table1`` benchmark profile of that family
   (:data:`bots_verl.toy.arms.TABLE1_PROFILES`: the paper's five methods, 8 seeds) in ``<out>/<family>``, through
   :func:`bots_verl.toy.benchmark.run_benchmark`: only runs not yet finished train, one at a time; an interrupted one
   resumes; finished runs are reused only under their recorded settings. Arithmetic's settings are the ``full``
   profile's, so the archived runs of ``recipes/toy/results`` unpacked into ``<out>/arith`` are reused.
2. ``python -m analysis.table1`` on the families' runs: the main table of :mod:`analysis.paper_tables` (the code that
   tabulates a GPU recipe's run logs) with one column group per domain (:data:`bots_verl.toy.arms.FAMILY_DOMAINS`:
   arith's runs, which record ``toy``, are read as ``math``), the paper's 1.5B figures beside it and one sentence per
   domain on BOTS against Random, written to ``<out>/table1.md``.

``--no-train`` trains nothing: it refuses, naming them, when a family's runs are missing, and checks the finished ones
against the profile as a training run would. ``--summarize-finished`` trains nothing either and renders the table from
the runs that have finished (a grid still under way: the title counts the runs it holds and those it lacks, per
family), as the benchmark's own ``--summarize-finished`` does for one family.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
from pathlib import Path

from bots_verl.toy.arms import FAMILY_DOMAINS, RUN_LOG_DOMAINS, BenchmarkProfile, check_profile, profile_of
from bots_verl.toy.benchmark_summary import run_analysis
from bots_verl.toy.evaluate import family_heldout_metric
from bots_verl.toy.families import FAMILIES
from bots_verl.toy.run_records import check_recorded_settings, finished_record, planned_runs, read_build, run_dir_of

__all__ = ["main", "missing_runs", "render"]

logger = logging.getLogger(__name__)

#: the model name the table shows for the toy's runs (they record the policy's path)
TOY_MODEL = "toy"


def missing_runs(profile: BenchmarkProfile, root: Path) -> list[str]:
    """The profile's runs in ``root`` that have not finished (names like ``bots_s3``), its finished runs checked.

    Raises:
        ValueError: the profile, the folder's build or a finished run's settings differ from what is asked
            (:func:`~bots_verl.toy.run_records.check_recorded_settings`).
        RuntimeError: an unreadable build manifest.
    """
    check_profile(profile)
    plan = planned_runs(profile)
    if (root / "data" / "manifest.json").is_file():
        check_recorded_settings(read_build(profile, root), profile, root, plan)
    return [
        f"{arm}_s{seed}"
        for arm, seed in plan
        if finished_record(run_dir_of(root, arm, seed), profile.steps_of(arm)) is None
    ]


def render(out: Path, families: list[str], finished_only: bool = False) -> Path:
    """``<out>/table1.md`` from the families' planned runs (``python -m analysis.table1``); returns its path.

    Args:
        out: the root of the families' folders (``<out>/<family>``).
        families: the families, one column group each, in this order.
        finished_only: tabulate the finished runs only, the title counting them against the plan (the caller checked
            the folders: :func:`missing_runs`); else every planned run, all of which must have finished.

    Raises:
        RuntimeError: the analysis failed (its own ``error:`` line in the message); ``finished_only`` and a family
            without a finished run.
    """
    cmd = [sys.executable, "-m", "analysis.table1", "--model", TOY_MODEL]
    held: list[str] = []
    for family in families:
        cmd += ["--metric", f"{FAMILY_DOMAINS[family]}={family_heldout_metric(family)}"]
        profile = profile_of("table1", family)
        planned = plan = planned_runs(profile)
        if finished_only:
            plan = [(a, s) for a, s in planned if finished_record(run_dir_of(out / family, a, s), profile.steps_of(a))]
            if not plan:
                raise RuntimeError(f"no finished run of the {family} family in {out / family / 'runs'}")
        held.append(f"{family} {len(plan)} of {len(planned)}")
        cmd += ["--domain", FAMILY_DOMAINS[family], *[str(run_dir_of(out / family, a, s) / "run") for a, s in plan]]
        if RUN_LOG_DOMAINS[family] != FAMILY_DOMAINS[family]:
            cmd += ["--read-as", f"{RUN_LOG_DOMAINS[family]}={FAMILY_DOMAINS[family]}"]
    shown = ", ".join(f"{f} as {FAMILY_DOMAINS[f]}" for f in families)
    title = f"Table 1 on the toy testbed ({shown})"
    if finished_only:
        title += f": the finished runs only ({', '.join(held)} planned runs)"
    cmd += ["--title", title, "--out", str(out / "table1.md")]
    run_analysis(cmd, "Table 1")
    return out / "table1.md"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 with one ``toy table1 failed:`` line)."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.table1", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/toy_table1", help="root of the families' folders (<out>/<family>)")
    parser.add_argument("--families", nargs="+", choices=sorted(FAMILIES), default=list(FAMILIES))
    parser.add_argument(
        "--no-train",
        "--summarize-only",
        dest="no_train",
        action="store_true",
        help="train nothing: render the table from finished runs, refusing when any is missing",
    )
    parser.add_argument(
        "--summarize-finished",
        action="store_true",
        help="train nothing: render the table from the runs that have finished, counting those still missing",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per training process")
    args = parser.parse_args(argv)
    if args.no_train and args.summarize_finished:
        parser.error("--no-train and --summarize-finished: give one")
    families = list(dict.fromkeys(args.families))
    out = Path(args.out).resolve()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        for family in families:  # every family's settings before any family trains
            check_profile(profile_of("table1", family))
        if args.summarize_finished:
            for family in families:  # the folders' builds and finished runs checked as for training
                missing_runs(profile_of("table1", family), out / family)
        elif args.no_train:
            missing = {f: missing_runs(profile_of("table1", f), out / f) for f in families}
            missing = {f: names for f, names in missing.items() if names}
            if missing:
                named = "; ".join(f"{f} ({out / f}): {len(n)} runs: {' '.join(n)}" for f, n in missing.items())
                raise RuntimeError(
                    f"--no-train, and runs are missing: {named}. Nothing was trained or written: run without "
                    "--no-train to train them"
                )
        else:
            from bots_verl.toy.benchmark import run_benchmark

            for family in families:
                logger.info("Table 1, family %s: training what is missing in %s", family, out / family)
                run_benchmark(profile_of("table1", family), out / family, timeout=args.timeout)
        path = render(out, families, finished_only=args.summarize_finished)
    except (RuntimeError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"toy table1 failed: {exc}", file=sys.stderr)
        return 1
    print(path.read_text())
    print(f"toy table1 ok: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
