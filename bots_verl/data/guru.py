"""Convert GURU (LLM360/guru-RL-92k) parquet files into verl RL datasets with stable task ids.

Usage::

    python -m bots_verl.data.guru --guru-dir /data/guru-RL-92k --out-dir /data/bots [--domains math code logic]
        [--drop weak_gt_strong --drop duplicate_prompt ...] [--skip-eval]

``--guru-dir`` is a local copy of the hub dataset (``train/``, ``online_eval/``, ``offline_eval/``). For each domain the
tool writes ``<out-dir>/<domain>/train.parquet``, one ``val_<name>.parquet`` per evaluation set, and
``<out-dir>/<domain>/prep_report.json`` (counts per source file and per issue).

A domain's outputs appear all together or not at all, and never mix with an earlier run's: they are built in a hidden
staging folder ``<out-dir>/.<domain>.tmp-<host>-<pid>`` and the finished folder replaces ``<out-dir>/<domain>`` as a
whole (:func:`bots_verl.fileio.publishing`: rename the old folder aside, rename the new one in, delete the old one), so
a file of an older run (a ``val_*`` set no longer converted, say) is never left beside new ones. A run that fails leaves
``<out-dir>/<domain>`` exactly as it was and writes its report to ``<out-dir>/<domain>.prep_report.failed.json``. A run
killed half-way leaves only hidden folders; the next run removes them, and puts the previous outputs back if the kill
came between the two renames (:func:`bots_verl.fileio.clean_stale_temps`). Because the folder is replaced as a whole,
a file in it that the prep did not write stops the run (move it elsewhere).

Output schema (one schema per domain, whatever the source files' schemas are):

- ``data_source`` (string), ``prompt`` (list of ``{role, content}``), ``ability`` (string): copied from GURU.
- ``reward_model``: ``{style: "rule", ground_truth: string}``. Structured ground truths (zebra grids, ordering lists,
  ARC grids) are JSON-encoded, because one parquet column cannot hold GURU's per-file ground-truth types; the reward
  functions in :mod:`bots_verl.rewards` decode them.
- ``task_id`` (int64): the task id, dense ``0..N-1`` in output row order, so a selector can index arrays with it.
  The same value is ``extra_info.index`` (verl puts it into every batch as ``index``).
- ``extra_info``: ``{split, index, original_index, source_file}`` (+ ``prefix`` for code: LeetCode's import header,
  prepended before running the tests). ``original_index`` is GURU's ``extra_info.index|id|idx`` as a string.
- ``qwen2.5_7b_pass_rate`` and ``qwen3_30b_pass_rate`` (float64): GURU's weak and strong reference pass rates. Required
  in train files; kept in evaluation files when present.

Validation (counted per file in the report). Rows are never silently dropped or zero-filled:

- fatal unless dropped with ``--drop``: ``malformed_row`` (missing data source/prompt/ability), ``unknown_data_source``
  (no reward function), ``bad_ground_truth`` (unexpected type for the data source), ``missing_pass_rate`` (null or NaN),
  ``pass_rate_out_of_range`` (outside [0, 1]). If any remain, no output is written and the tool exits with status 1.
- kept with a warning unless dropped: ``weak_gt_strong`` (weak pass rate > strong; GURU leaves some in and BOTS's
  interpolation tolerates them), ``duplicate_prompt`` (same prompt text as an earlier row of the same output; the first
  one is kept when dropping). These two are dropped from train files only: evaluation files repeat prompts on purpose
  (AIME 8x, i.e. mean@8) and are benchmarks, so there they are only counted.

An input that cannot be read (a missing, empty, truncated or garbage parquet file, a directory where a file belongs)
or an output folder that cannot be written stops the run with a :class:`PrepError` naming the file.

Files are read with pyarrow, column-selected (including nested ``extra_info`` fields) and streamed in record batches;
the LiveCodeBench train file is 3.3 GB.

The rows are read and checked in :mod:`bots_verl.data.guru_rows`.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bots_verl.data.guru_rows import ISSUES, PrepError, write_output
from bots_verl.fileio import (
    clean_stale_temps,
    publishing,
    write_json_atomic,
)

__all__ = ["DOMAINS", "DomainSpec", "find_file", "main", "prepare", "prepare_domain"]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))


@dataclass(frozen=True)
class DomainSpec:
    """Which GURU files make up one domain.

    Attributes:
        train: train file names without the ``_<size>`` suffix, looked up in ``train/``.
        evals: evaluation set name -> file name without the size suffix, looked up in ``online_eval/`` then
            ``offline_eval/``.
    """

    train: tuple[str, ...]
    evals: dict[str, str] = field(default_factory=dict)


# Evaluation sets (the paper names only MATH500 and AIME24, for math; guru.md §1, paper.md §2):
# - math: MATH500 and AIME24 (GURU's AIME24 file repeats each of the 30 problems 8 times: mean@8 with val n=1).
# - code: LiveCodeBench (GURU's held-out, later-dated contest problems: same stdin/stdout format as the training mix
#   and the one code benchmark a BOTS summary names) plus HumanEval (functional tests; cheap, fast sanity signal).
# - logic: GURU's three logic online-eval sets, zebra, ordering and ARC-AGI-1, i.e. the in-domain puzzle families of the
#   training mix (graph search has no eval file). ARC-AGI is in the GURU leaderboard; a 1.5B model scores ~0 there,
#   like AIME for math, so zebra and ordering carry the signal.
DOMAINS: dict[str, DomainSpec] = {
    "math": DomainSpec(
        train=("math__combined",),
        evals={"math500": "math__math", "aime24": "math__aime_repeated_8x"},
    ),
    "code": DomainSpec(
        train=("codegen__leetcode2k", "codegen__livecodebench", "codegen__primeintellect", "codegen__taco"),
        evals={"livecodebench": "codegen__livecodebench", "humaneval": "codegen__humaneval"},
    ),
    "logic": DomainSpec(
        train=(
            "logic__arcagi1",
            "logic__arcagi2",
            "logic__barc",
            "logic__graph_logical",
            "logic__ordering_puzzle",
            "logic__zebra_puzzle",
        ),
        evals={
            "zebra": "logic__zebra_puzzle_dataset",
            "ordering": "logic__ordering_puzzle_dataset",
            "arcagi1": "logic__arcagi1",
        },
    ),
}

_SIZE_SUFFIX = re.compile(r"_[0-9]+(?:\.[0-9]+)?k?\.parquet$")
# What a domain folder may hold: the prep's own outputs, and temp files of versions that wrote them in place.
_OWN_OUTPUT = re.compile(r"^(train\.parquet|val_[^/]+\.parquet|prep_report\.json|\..+\.tmp-[0-9]+)$")


def find_file(folder: Path, name: str) -> Path:
    """Resolve ``<folder>/<name>_<size>.parquet`` (the size suffix differs between GURU releases).

    Args:
        folder: e.g. ``<guru>/train``.
        name: the file name without the size suffix, e.g. ``math__combined``.

    Returns:
        The one matching path.

    Raises:
        PrepError: when none or several files match, or the match is not a regular file.
    """
    matches = sorted(p for p in folder.glob(f"{name}_*.parquet") if _SIZE_SUFFIX.sub("", p.name) == name)
    if len(matches) != 1:
        found = sorted(p.name for p in folder.glob("*.parquet")) if folder.is_dir() else "no such folder"
        what = "no file" if not matches else f"several files {[p.name for p in matches]}"
        raise PrepError(f"{what} named {name}_<size>.parquet in {folder}; present: {found}")
    if not matches[0].is_file():
        kind = "a directory" if matches[0].is_dir() else "not a regular file"
        raise PrepError(f"{matches[0]} is {kind}, not a parquet file")
    return matches[0]


def _check_replaceable(domain_dir: Path) -> None:
    """Refuse to replace a domain folder that holds anything the prep did not write (it is replaced as a whole)."""
    if domain_dir.is_symlink() or (domain_dir.exists() and not domain_dir.is_dir()):
        raise PrepError(f"{domain_dir} exists and is not a plain directory; the prep replaces that folder as a whole")
    if not domain_dir.exists():
        return
    foreign = sorted(p.name for p in domain_dir.iterdir() if not _OWN_OUTPUT.match(p.name))
    if foreign:
        raise PrepError(
            f"{domain_dir} holds files the prep did not write: {foreign}. Each run replaces the folder as a whole "
            "(so that no file of an older run is left beside new ones); move them elsewhere first"
        )


def _recover(domain_dir: Path) -> None:
    """Deal with what a killed run left beside ``domain_dir``: put the previous outputs back, remove staging folders.

    Raises:
        PrepError: if a leftover belongs to a run that may still be going (another host, or a live process).
    """
    removed, running = clean_stale_temps(domain_dir)
    for path in removed:
        logger.warning("%s: cleaned up %s, left behind by a killed run", domain_dir, path)
    if running:
        raise PrepError(
            f"{running[0]} belongs to another prep of {domain_dir.name} that may still be running (another host, or a "
            f"live process); wait for it, or remove {running[0]} if that run is gone"
        )


def _describe_output(entry: dict[str, Any]) -> str:
    text = f"{entry['rows_in']} rows in"
    if "blocking" in entry:
        return f"{text}, fatal issues {entry['blocking']}; all issues {entry['issues']}"
    return f"{text}, {entry['rows_out']} kept, {entry['dropped']} dropped; issues {entry['issues'] or 'none'}"


def prepare_domain(
    guru_dir: Path,
    out_dir: Path,
    domain: str,
    drop: frozenset[str] = frozenset(),
    with_eval: bool = True,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Convert one domain's train file(s) and evaluation sets, and publish them together.

    Args:
        guru_dir: local GURU copy with ``train/``, ``online_eval/``, ``offline_eval/``.
        out_dir: output root; files go to ``<out_dir>/<domain>/``, which is replaced as a whole.
        domain: ``math``, ``code`` or ``logic``.
        drop: issue names (see :data:`ISSUES`) whose rows are dropped (and counted) instead of kept or fatal; the
            warnings (``weak_gt_strong``, ``duplicate_prompt``) are dropped from the train file only.
        with_eval: also convert the evaluation sets.
        batch_size: rows per record batch when streaming.

    Returns:
        The domain report (also written to ``<out_dir>/<domain>/prep_report.json``).

    Raises:
        PrepError: missing or unreadable inputs, an output folder that cannot be written, or fatal issues not named
            in ``drop``. ``<out_dir>/<domain>`` is then left as it was; a fatal-issue report goes to
            ``<out_dir>/<domain>.prep_report.failed.json``.
    """
    if domain not in DOMAINS:
        raise PrepError(f"unknown domain {domain!r}; choose from {sorted(DOMAINS)}")
    unknown = set(drop) - set(ISSUES)
    if unknown:
        raise PrepError(f"unknown issue names {sorted(unknown)}; choose from {list(ISSUES)}")
    spec = DOMAINS[domain]
    domain_dir = out_dir / domain
    jobs: list[tuple[str, list[Path], bool]] = [
        ("train", [find_file(guru_dir / "train", name) for name in spec.train], True)
    ]
    if with_eval:
        for eval_name, file_name in spec.evals.items():
            candidates = [guru_dir / "online_eval", guru_dir / "offline_eval"]
            path = None
            for folder in candidates:
                try:
                    path = find_file(folder, file_name)
                    break
                except PrepError:
                    continue
            if path is None:
                raise PrepError(f"evaluation set {eval_name}: no {file_name}_<size>.parquet in {candidates}")
            jobs.append((f"val_{eval_name}", [path], False))
    failed_report = out_dir / f"{domain}.prep_report.failed.json"
    cannot_write = f"cannot write in the output directory {out_dir}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        _recover(domain_dir)
        _check_replaceable(domain_dir)
    except OSError as err:
        raise PrepError(f"{cannot_write}: {err.strerror or err}") from err
    try:
        # the domain's outputs are built in a hidden staging folder that replaces the domain folder as a whole
        with publishing(domain_dir) as staging:
            try:
                staging.mkdir()
            except OSError as err:
                raise PrepError(f"{cannot_write}: {err.strerror or err}") from err
            report: dict[str, Any] = {"domain": domain, "drop": sorted(drop), "outputs": {}}
            for name, sources, is_train in jobs:
                split = "train" if is_train else "test"
                entry = write_output(sources, staging / f"{name}.parquet", domain, split, is_train, drop, batch_size)
                entry["path"] = str(domain_dir / f"{name}.parquet")
                report["outputs"][name] = entry
                logger.info("%s/%s: %s", domain, name, _describe_output(entry))
            blocked = {name: e["blocking"] for name, e in report["outputs"].items() if "blocking" in e}
            report["written"] = not blocked
            if blocked:
                _write_json(failed_report, report)
                kept = f"{domain_dir} is unchanged" if domain_dir.exists() else f"{domain_dir} was not created"
                raise PrepError(
                    f"{domain}: fatal row issues {blocked}; nothing written ({kept}); report: {failed_report}. "
                    f"Fix the input or pass --drop <issue> to drop and count those rows."
                )
            _write_json(staging / "prep_report.json", report)
        failed_report.unlink(missing_ok=True)
    except OSError as err:
        raise PrepError(f"{domain}: cannot write the outputs in {out_dir}: {err.strerror or err}") from err
    files = ", ".join(f"{name}.parquet ({e['rows_out']} rows)" for name, e in report["outputs"].items())
    logger.info("%s: wrote %s and prep_report.json to %s", domain, files, domain_dir)
    return report


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, payload, sort_keys=True)


def prepare(
    guru_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    domains: list[str] | tuple[str, ...] = ("math", "code", "logic"),
    drop: frozenset[str] | set[str] = frozenset(),
    with_eval: bool = True,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Convert several domains (see :func:`prepare_domain`); returns ``{domain: report}``.

    Each domain is published on its own: if a later domain fails, the earlier ones are already complete.
    """
    guru, out = Path(guru_dir), Path(out_dir)
    if not guru.is_dir():
        raise PrepError(f"--guru-dir {guru} is not a directory")
    return {d: prepare_domain(guru, out, d, frozenset(drop), with_eval, batch_size) for d in domains}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 on bad input or an unwritable output, with one message)."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.data.guru", description=__doc__.split("\n\n")[0])
    parser.add_argument("--guru-dir", required=True, help="local GURU copy (train/, online_eval/, offline_eval/)")
    parser.add_argument("--out-dir", required=True, help="output root; writes <out-dir>/<domain>/*.parquet")
    parser.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=list(DOMAINS))
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        choices=list(ISSUES) + ["all"],
        help="drop (and count) rows with this issue instead of failing or keeping them; repeatable. The warnings "
        "weak_gt_strong and duplicate_prompt are dropped from train files only (evaluation repeats are intended)",
    )
    parser.add_argument("--skip-eval", action="store_true", help="convert only the train files")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per streamed record batch")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (with tracebacks of errors)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    drop = frozenset(ISSUES) if "all" in args.drop else frozenset(args.drop)
    try:
        prepare(args.guru_dir, args.out_dir, args.domains, drop, not args.skip_eval, args.batch_size)
    except (PrepError, OSError) as err:  # OSError: a backstop; reads and writes are wrapped into PrepError
        logger.debug("traceback of the error below", exc_info=True)
        logger.error("%s", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
