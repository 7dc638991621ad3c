"""Build every artifact the toy verl runs need, resumably: data, warmed-up models, reference columns, calibration.

Usage::

    python -m bots_verl.toy.prepare --out runs/toy/data [--seed 0] [--profile full|quick|ci] [--jobs 2]
        [--family arith|code|logic]

Stages (each skipped when its output exists for the same settings; a different setting in an existing output is an
error naming the file, never a silent overwrite):

1. ``data``: ``val.parquet`` (the held-out set, drawn first from the cells where the policy learns) and
   ``pool.parquet`` (the training pool over all 48 cells, held-out prompts excluded), verl RL layout.
2. ``warmups``: ``models/policy``, ``models/weak``, ``models/strong`` (``--policies K`` > 1 adds separately warmed-up
   ``models/policy_p<k>``); supervised warm-ups on CPU, ``--jobs`` at a time, one thread each, never on a pool or
   held-out prompt.
3. ``references``: ``python -m reference_eval collect --backend transformers`` for the weak and the strong model on
   the pool (n samples at temperature 1), then ``python -m reference_eval merge`` twice: ``train.parquet`` = the pool
   plus ``toy_weak_pass_rate`` and ``toy_strong_pass_rate``.
4. ``calibration``: exact pass rates (one forward pass, :mod:`bots_verl.toy.likelihood`) of the policy and both
   references on the pool and the held-out set; ``calibration.json`` / ``calibration.md`` with the pass-rate
   distribution, mixed-group shares, held-out accuracy +- SE, and the references' correlations with the policy
   (``reference_eval stats`` on ``calibration.parquet``).

``manifest.json`` records each stage's wall-clock and CPU seconds, the command line, and the paths a training run
needs (train/val files, model directories, reference column names).

The profiles are in :mod:`bots_verl.toy.build_profiles`, the stages in :mod:`bots_verl.toy.build_stages`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bots_verl.toy.build_profiles import (
    BUILD_PROFILES,
    REFERENCE_COLUMNS,
    BuildProfile,
    PrepareError,
    build_profile,
    seeded,
)
from bots_verl.toy.build_stages import (
    StageTimer,
    read_json,
    stage_calibration,
    stage_data,
    stage_references,
    stage_similarity,
    stage_warmups,
    write_json,
)
from bots_verl.toy.families import FAMILIES, family_of
from bots_verl.toy.similarity_inputs import manifest_artifacts
from bots_verl.toy.warmup import WarmupSpec, is_done

__all__ = ["main", "prepare", "shipped_artifacts"]

logger = logging.getLogger(__name__)

#: Prepared artifacts committed with the repository, one folder per ``<profile>_s<seed>``. A rebuild of the same specs
#: on another machine gives other models (thousands of AdamW steps amplify the CPU's float summation order: the policy's
#: held-out accuracy was 0.097 in one build and 0.121 in another, the strong reference's 0.784 and 0.504), so runs
#: are comparable only on one build: a fresh ``prepare`` starts from the shipped one when it exists and was made with
#: the profile's data settings and warm-up specs (a profile changed in the code builds afresh, saying what differs).
SHIPPED = Path(__file__).resolve().parents[2] / "recipes" / "toy" / "artifacts"


def shipped_artifacts(profile: str, seed: int, family: str = "arith") -> Path | None:
    """The committed build of ``profile`` and ``seed`` of ``family`` (:data:`SHIPPED`), or None."""
    folder = SHIPPED / (f"{profile}_s{seed}" if family == "arith" else f"{family}_{profile}_s{seed}")
    return folder if (folder / "manifest.json").is_file() else None


def _differs_from(shipped: Path, data_settings: dict[str, Any], specs: Mapping[str, WarmupSpec]) -> str | None:
    """What of a build's data settings and warm-up specs the shipped build ``shipped`` was made with differently
    (``"other held-out cells, ..."``), or None when it was made with these."""
    made = read_json(shipped / "data.json") or {}
    differs = [
        f"other {key.replace('_', ' ')}"
        for key, value in data_settings.items()
        if made.get("settings", {}).get(key) != value
    ]
    for name, spec in specs.items():
        try:
            done = is_done(shipped / "models" / name, spec)
        except ValueError:  # a finished warm-up of another spec
            done = False
        if not done:
            differs.append(f"another {name} warm-up")
    return ", ".join(differs) or None


def _not_a_build(out: Path) -> str | None:
    """Why ``out`` cannot take a build (files of something else in it), or None.

    The data stage writes its record (``data.json``) with its files, and every stage the manifest: a folder with
    files but neither is not a build's, and a build would write its ``val.parquet`` over what it holds.
    """
    if not out.is_dir() or (out / "manifest.json").exists() or (out / "data.json").exists() or not any(out.iterdir()):
        return None
    return (
        f"{out} holds files but no toy build (no manifest.json or data.json), and a build writes val.parquet, "
        "pool.parquet, train.parquet and models/ there; nothing written: use another --out, or empty that folder"
    )


def prepare(
    out_dir: str | os.PathLike,
    seed: int = 0,
    profile: str | BuildProfile = "full",
    jobs: int = 2,
    policies: int = 1,
    calibrate: bool = True,
    argv: list[str] | None = None,
    family: str = "arith",
) -> dict[str, Any]:
    """Build (or finish building) every artifact in ``out_dir``; returns the manifest.

    Args:
        out_dir: the artifact directory.
        seed: the benchmark seed: fixes the data and every warm-up (initial weights and data order).
        profile: a profile name of ``family`` (:data:`FAMILY_PROFILES`) or a :class:`BuildProfile` (its own family
            is used).
        jobs: warm-ups and reference collections run at a time (one thread each).
        policies: separately warmed-up policies (``models/policy`` plus ``models/policy_p1`` ...); training seed
            ``s`` uses policy ``s % policies``.
        calibrate: run the calibration stage.
        argv: the command line, recorded in the manifest.
        family: the task family (:mod:`bots_verl.toy.families`), recorded in the manifest: a build of another family
            in ``out_dir`` is refused.

    Raises:
        PrepareError: conflicting existing artifacts, files that are not a build's in ``out_dir``, or a failed stage.
    """
    prof = build_profile(family, profile) if isinstance(profile, str) else profile
    if jobs < 1 or policies < 1:
        raise PrepareError(f"--jobs and --policies must be >= 1, got {jobs} and {policies}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    foreign = _not_a_build(out)
    if foreign:
        raise PrepareError(foreign)
    policy_names = ["policy"] + [f"policy_p{k}" for k in range(1, policies)]
    specs = {name: seeded(prof.policy, seed, "policy", k) for k, name in enumerate(policy_names)}
    specs["weak"] = seeded(prof.weak, seed, "weak")
    specs["strong"] = seeded(prof.strong, seed, "strong")
    shipped = shipped_artifacts(prof.name, seed, prof.family) if policies == 1 else None
    if shipped is not None and not manifest_path.exists() and not any(out.iterdir()):
        differs = _differs_from(shipped, prof.data_settings(seed), specs)
        if differs:
            # a profile changed in the code (a recalibration): its own build, never the shipped one's files
            logger.warning("the shipped build %s has %s: building afresh", shipped, differs)
        else:
            # every stage below finds its output done and checks it against the specs
            logger.info("starting from the shipped build %s", shipped)
            shutil.copytree(shipped, out, dirs_exist_ok=True)
    manifest = read_json(manifest_path) or {}
    if manifest.get("profile", prof.name) != prof.name or manifest.get("seed", seed) != seed:
        raise PrepareError(f"{out} holds profile {manifest['profile']!r} seed {manifest['seed']}; use another --out")
    # a manifest without a family is an arithmetic build (every build made before the families existed)
    if manifest and manifest.get("family", "arith") != prof.family:
        raise PrepareError(
            f"{out} holds a {manifest.get('family', 'arith')} build, not {prof.family}; use another --out"
        )
    manifest.update(profile=prof.name, seed=seed, command=argv or manifest.get("command"))
    if prof.family != "arith":
        manifest["family"] = prof.family

    def run(name: str, fn: Callable[[StageTimer], Any]) -> Any:
        with StageTimer(manifest, name) as stage:
            result = fn(stage)
        write_json(manifest_path, manifest)
        return result

    manifest["data"] = run("data", lambda s: stage_data(out, prof, seed, s))
    manifest["warmups"] = run("warmups", lambda s: stage_warmups(out, specs, jobs, s))
    manifest["references"] = run("references", lambda s: stage_references(out, prof, seed, jobs, s))
    manifest["similarity"] = run("similarity", lambda s: stage_similarity(out, prof, seed, s))
    if calibrate:
        summary = run(
            "calibration", lambda s: stage_calibration(out, policy_names, s, prof.family, prof.max_tokens, seed)
        )
        manifest["calibration"] = {"pool": summary["pool"], "heldout": summary["heldout"]}
    manifest["artifacts"] = {
        "train_files": str(out / "train.parquet"),
        "val_files": str(out / "val.parquet"),
        "policy_models": {str(k): str(out / "models" / name) for k, name in enumerate(policy_names)},
        "reference_columns": list(REFERENCE_COLUMNS),
        "task_id_field": "task_id",
        "max_response_length": prof.max_tokens,
        # verl's data.max_prompt_length for another family (arithmetic's manifests are unchanged: 16)
        **({} if prof.family == "arith" else {"max_prompt_length": family_of(prof.family).max_prompt_length}),
        **manifest_artifacts(out, REFERENCE_COLUMNS),
    }
    write_json(manifest_path, manifest)
    return manifest


def _dry_run(prof: BuildProfile, out: Path, seed: int, jobs: int, policies: int, calibration: bool) -> int:
    """``--dry-run`` (``DRY_RUN=1 bash recipes/toy/prepare.sh``): check the settings, print the plan; 0 if valid."""
    for name, value in (("jobs", jobs), ("policies", policies)):
        if value < 1:
            print(f"toy prepare dry run: --{name} must be at least 1, got {value}", file=sys.stderr)
            return 2
    warmups = ", ".join(
        f"{name} {spec.steps} x {spec.batch_size}"
        for name, spec in (("policy", prof.policy), ("weak", prof.weak), ("strong", prof.strong))
    )
    foreign = _not_a_build(out)
    if foreign:
        print(f"toy prepare dry run: {foreign}", file=sys.stderr)
        return 2
    state = "resumes the build there" if (out / "manifest.json").is_file() else "a new build"
    level = "{}-digit" if prof.family == "arith" else "level {}"
    pool = ", ".join(f"{level.format(k)} {v}" for k, v in sorted(prof.pool_per_cell.items()))
    family = "" if prof.family == "arith" else f"family {prof.family}, "
    print(
        f"toy prepare dry run: {family}profile {prof.name}, seed {seed}; pool tasks per cell {pool}; "
        f"{prof.heldout_size} held-out prompts; warm-ups {warmups}, policies {policies}; reference columns "
        f"n = {prof.reference_n}; calibration {'yes' if calibration else 'no'}; {jobs} jobs"
    )
    print(f"toy prepare dry run: config OK ({out.resolve()}: {state}; nothing created)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 on a :class:`PrepareError`)."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.prepare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="artifact directory (a rerun resumes it)")
    parser.add_argument("--seed", type=int, default=0, help="benchmark seed (data, initial weights, data order)")
    parser.add_argument("--profile", choices=sorted(BUILD_PROFILES), default="full", help="sizes: full, quick or ci")
    parser.add_argument(
        "--family", choices=sorted(FAMILIES), default="arith", help="task family: arith (default), code or logic"
    )
    parser.add_argument("--quick", action="store_true", help="shorthand for --profile quick")
    parser.add_argument("--jobs", type=int, default=2, help="warm-ups / reference collections at a time")
    parser.add_argument("--policies", type=int, default=1, help="separately warmed-up policies (seed s uses s %% K)")
    parser.add_argument("--no-calibration", action="store_true", help="skip the calibration stage")
    parser.add_argument("--dry-run", action="store_true", help="check the settings, print the plan, create nothing")
    args = parser.parse_args(argv)
    # SIGTERM (a killed make, a scheduler) unwinds like Ctrl-C, so that running workers are terminated, not orphaned.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    profile = "quick" if args.quick else args.profile
    try:
        prof = build_profile(args.family, profile)
    except PrepareError as err:
        print(f"toy prepare: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        return _dry_run(prof, Path(args.out), args.seed, args.jobs, args.policies, not args.no_calibration)
    try:
        manifest = prepare(
            args.out,
            args.seed,
            prof,
            args.jobs,
            args.policies,
            not args.no_calibration,
            argv=sys.argv if argv is None else ["python -m bots_verl.toy.prepare", *argv],
        )
    except PrepareError as err:
        logger.error("%s", err)
        return 1
    for name, stage in manifest["stages"].items():
        logger.info("stage %-12s %7.1f s wall %7.1f s CPU", name, stage["wall_s"], stage["cpu_s"])
    if "calibration" in manifest:
        print((Path(args.out) / "calibration.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
