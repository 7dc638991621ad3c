"""``make quickstart``: BOTS against Random inside verl's real trainer, on a CPU, in a few minutes.

``python -m bots_verl.quickstart [--steps 12] [--out runs/quickstart]`` trains the toy testbed's shipped policy (a
1M-parameter arithmetic model, ``recipes/toy/artifacts/full_s0``; nothing is downloaded) with real GRPO in verl's
trainer on the CPU backend, once with Random selection and once with BOTS (the paper's rules, the two shipped
reference columns), the same seed and settings as the testbed's headline (16 tasks x 8 rollouts per step). Then it
prints, step by step, the share of each batch's groups that were mixed (some rollouts right, some wrong: the only
groups that give GRPO a gradient), and the posterior BOTS ends with, by problem size, beside the policy's exact pass
rates. Each run leaves its run log (``meta.json``, ``metrics.jsonl`` with every ``bots/`` metric) under ``--out``.

The testbed is the shipped build, copied into ``--out``'s ``data/`` on the first run and reused after; the quickstart
never builds one (about 25 minutes, and other models on another CPU). A rerun into the same ``--out`` replaces the two
run folders (``random/``, ``bots/``). It writes into and deletes only folders the quickstart wrote (each holds its
:data:`MARKER` file): an ``--out`` whose ``random/``, ``bots/`` or ``data/`` holds anything else is refused before
anything is written or deleted.

What it shows is the mechanism, not the training benefit: the benefit is measured over 8 paired seeds x 90 steps in
the toy testbed (``make toy``, README "Results").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bots_verl.runlog import ETR_METRIC, metrics_by_step

logger = logging.getLogger(__name__)

__all__ = [
    "MARKER",
    "check_out_dir",
    "main",
    "posterior_by_size",
    "run_quickstart",
    "shipped_testbed",
    "summarise",
    "train_arms",
]

ARMS = ("random", "bots")
#: written into each folder the quickstart creates: the only folders a later quickstart writes into or deletes
MARKER = ".bots_quickstart_run"
#: the folders the quickstart writes under ``--out``, and what it does to each
_FOLDERS = {
    **{arm: ("run folder", "a quickstart run replaces it") for arm in ARMS},
    "data": ("data folder", "the quickstart copies the shipped toy testbed into it"),
}


def check_out_dir(out: Path) -> None:
    """Refuse an ``--out`` whose folders the quickstart would write into or delete but did not write.

    A run folder (``out/random``, ``out/bots``) or the testbed's ``out/data`` may be absent, empty, or hold
    :data:`MARKER` (an earlier quickstart's); anything else (another run's checkpoints, the user's own data, a file, a
    link) is refused and nothing is written or deleted.

    Raises:
        ValueError: naming the folder.
    """
    for name, (label, fate) in _FOLDERS.items():
        folder = out / name
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            kind = "a link" if folder.is_symlink() else "a file"
            raise ValueError(f"{folder} is {kind}, not a quickstart {label}; nothing deleted: use another --out")
        if folder.is_dir() and not (folder / MARKER).is_file() and any(folder.iterdir()):
            raise ValueError(
                f"{folder} was not written by the quickstart (no {MARKER}), and {fate}; nothing deleted or written: "
                "use another --out, or move that folder away"
            )


def shipped_testbed(data_dir: Path) -> dict[str, Any]:
    """The shipped toy testbed build (``recipes/toy/artifacts/full_s0``) in ``data_dir``, its manifest; never a build.

    An absent or empty ``data_dir`` gets a copy (written whole or not at all, marked with :data:`MARKER`); one that
    holds every file of the shipped build is reused, and :func:`~bots_verl.toy.prepare.prepare` finds every stage
    done. Call :func:`check_out_dir` first.

    Raises:
        RuntimeError: the shipped build is missing (saying how to get it), or ``data_dir`` lacks one of its files.
    """
    from bots_verl.toy.prepare import SHIPPED, prepare, shipped_artifacts

    shipped = shipped_artifacts("full", 0)
    if shipped is None:
        raise RuntimeError(
            f"the shipped toy testbed build {SHIPPED / 'full_s0'} is missing, and the quickstart never builds one "
            "(about 25 minutes on 2 cores, other models on another CPU): it comes with the repository, so run the "
            "quickstart from a git clone of bots-verl, or restore the folder with "
            "`git checkout -- recipes/toy/artifacts/full_s0`"
        )
    if not data_dir.is_dir() or not any(data_dir.iterdir()):
        # copied beside it and renamed into place: an interrupted copy leaves no half build that a rerun would finish
        # by building the rest
        partial = data_dir.with_name(f".{data_dir.name}.copying-{os.getpid()}")
        try:
            shutil.copytree(shipped, partial)
            (partial / MARKER).write_text("written by python -m bots_verl.quickstart: the shipped toy testbed\n")
            if data_dir.is_dir():
                data_dir.rmdir()  # empty (checked above)
            partial.rename(data_dir)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    files = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*") if p.is_file())
    missing = [name for name in files if not (data_dir / name).is_file()]
    if missing:
        raise RuntimeError(
            f"{data_dir} lacks {', '.join(missing[:3])}{' ...' * (len(missing) > 3)} of the shipped toy testbed, and "
            f"the quickstart never builds one: remove {data_dir} (the quickstart wrote it) and rerun to copy it again"
        )
    return prepare(data_dir, seed=0, profile="full", jobs=1)


def _train(manifest: dict[str, Any], arm: str, steps: int, out: Path, timeout: float) -> Path:
    from bots_verl.toy.arms import PROFILES, training_overrides
    from bots_verl.verl_cpu.smoke import run_training

    profile = dataclasses.replace(PROFILES["headline"], steps=steps, eval_every=steps)
    run_dir = out / arm
    check_out_dir(out)  # checked for both arms before anything is written; again here, just before deleting
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    (run_dir / MARKER).write_text("written by python -m bots_verl.quickstart, which replaces this folder on a rerun\n")
    start = time.monotonic()
    run_training(training_overrides(manifest, profile, arm, 0, run_dir), out, run_dir / "train.log", timeout)
    print(f"  {arm}: {steps} steps in {time.monotonic() - start:.0f} s (log: {run_dir / 'train.log'})", flush=True)
    return run_dir


def train_arms(manifest: dict[str, Any], out: Path, steps: int, timeout: float) -> dict[str, Path]:
    """Train Random, then BOTS, ``steps`` GRPO steps each on the testbed build of ``manifest``; their run folders.

    Raises:
        ValueError: for an ``out`` holding run folders the quickstart did not write (:func:`check_out_dir`).
        RuntimeError: when a training run fails.
    """
    print(f"quickstart: Random, then BOTS, {steps} GRPO steps each in verl's trainer on CPU", flush=True)
    return {arm: _train(manifest, arm, steps, out, timeout) for arm in ARMS}


def summarise(runs: dict[str, Path], data_dir: Path) -> dict[str, Any]:
    """What the report prints, from the finished run folders of both arms (any toy run folder: the quickstart's or the
    benchmark's ``runs/<arm>_s<seed>``) and the testbed build they trained on.

    Returns:
        ``steps`` (BOTS's last checkpointed step), ``mixed`` (per arm, the mixed-group share of each trained step),
        ``posterior`` (:func:`posterior_by_size` of BOTS's last checkpoint) and ``runs`` (the run logs).
    """
    # trained steps only: a benchmark's run log also holds the evaluation of step 0
    mixed = {
        arm: {step: line.get(ETR_METRIC) for step, line in sorted(metrics_by_step(run_dir / "run").items()) if step}
        for arm, run_dir in runs.items()
    }
    ckpt = runs["bots"] / "ckpt"
    steps = int((ckpt / "latest_checkpointed_iteration.txt").read_text().strip())
    return {
        "steps": steps,
        "mixed": mixed,
        "posterior": posterior_by_size(ckpt / f"global_step_{steps}" / "data.pt", data_dir),
        "runs": {arm: str(run_dir / "run") for arm, run_dir in runs.items()},
    }


def posterior_by_size(data_pt: Path, data_dir: Path) -> list[dict[str, Any]]:
    """BOTS's final posterior summarised by problem size (the larger operand's digits), beside the exact pass rates.

    Returns:
        One row per size: ``digits``, ``tasks``, ``selected`` (selections of the size's tasks), ``posterior_mean``
        (mean over the size's tasks of alpha / (alpha + beta)) and ``exact_pass_rate`` (the starting policy's).
    """
    import numpy as np
    import pyarrow.parquet as pq

    from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state

    state = checkpoint_sampler_state(data_pt)["selector_state"]
    alpha, beta = (np.asarray(state["extra"]["posterior"][k], dtype=float) for k in ("alpha", "beta"))
    times = np.asarray(state["times_selected"], dtype=float)
    pool = pq.read_table(data_dir / "train.parquet", columns=["task_id", "extra_info"]).to_pylist()
    calibration = pq.read_table(data_dir / "calibration.parquet").to_pandas().set_index("task_id")
    rows = []
    digits = np.array([max(r["extra_info"]["digits_a"], r["extra_info"]["digits_b"]) for r in pool])
    exact = calibration.loc[[r["task_id"] for r in pool], "policy_exact_pass_rate"].to_numpy(dtype=float)
    for size in sorted(set(digits.tolist())):
        mask = digits == size
        rows.append(
            {
                "digits": int(size),
                "tasks": int(mask.sum()),
                "selected": int(times[mask].sum()),
                "posterior_mean": float(np.mean(alpha[mask] / (alpha[mask] + beta[mask]))),
                "exact_pass_rate": float(np.mean(exact[mask])),
            }
        )
    return rows


def run_quickstart(out: Path, steps: int, timeout: float = 900.0) -> dict[str, Any]:
    """Train Random and BOTS for ``steps`` steps each in ``out`` on the shipped testbed and return what the report
    prints.

    Raises:
        ValueError: for an ``out`` holding folders the quickstart did not write (:func:`check_out_dir`).
        RuntimeError: when the shipped testbed is missing or incomplete (:func:`shipped_testbed`), or a training run
            fails.
    """
    check_out_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"quickstart: the shipped toy testbed in {out / 'data'}", flush=True)
    manifest = shipped_testbed(out / "data")
    return summarise(train_arms(manifest, out, steps, timeout), out / "data")


def report(result: dict[str, Any]) -> str:
    """The printed report: the mixed-group share per step, its mean, and the posterior by problem size."""
    lines = [
        "",
        "Share of mixed groups per step (some of the 8 rollouts right, some wrong; the rest give no gradient):",
    ]
    lines.append("  step  Random  BOTS")
    steps = sorted(set(result["mixed"]["random"]) | set(result["mixed"]["bots"]))
    for step in steps:
        cells = [result["mixed"][arm].get(step) for arm in ARMS]
        lines.append(f"  {step:4d}  " + "  ".join(f"{c:6.2f}" if c is not None else "     -" for c in cells))
    means = {arm: [v for v in result["mixed"][arm].values() if v is not None] for arm in ARMS}
    lines.append("  mean  " + "  ".join(f"{sum(v) / len(v):6.2f}" if v else "     -" for v in means.values()))
    lines += ["", "BOTS's posterior after the last step, by problem size (digits of the larger operand):"]
    lines.append("  digits  tasks  selected  posterior mean  exact pass rate at the start")
    for row in result["posterior"]:
        lines.append(
            f"  {row['digits']:6d}  {row['tasks']:5d}  {row['selected']:8d}  {row['posterior_mean']:14.3f}  "
            f"{row['exact_pass_rate']:.3f}"
        )
    lines += ["", "Run logs (meta.json, metrics.jsonl): " + ", ".join(result["runs"].values())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line (``make quickstart``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12, help="GRPO steps per run")
    parser.add_argument("--out", default="runs/quickstart", help="working directory (runs and the testbed's data)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per training process")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    logging.basicConfig(level=logging.WARNING)
    start = time.monotonic()
    try:
        result = run_quickstart(Path(args.out).resolve(), args.steps, args.timeout)
    except (RuntimeError, ValueError) as exc:
        print(f"quickstart failed: {exc}", file=sys.stderr)
        return 1
    print(report(result))
    (Path(args.out) / "quickstart.json").write_text(json.dumps(result, indent=1))
    print(f"\nquickstart ok in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
