"""The toy benchmark's bookkeeping: where a run lives, its checked ``done.json`` record, which runs finished, and
whether a run folder holds a run of the settings asked for (:func:`check_recorded_settings`)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bots_verl import runlog
from bots_verl.toy.arms import BenchmarkProfile, arm_settings, training_overrides

__all__ = [
    "COMMAND_FILE",
    "check_recorded_settings",
    "finished_record",
    "finished_runs",
    "median",
    "planned_runs",
    "read_build",
    "read_done",
    "run_dir_of",
    "write_command",
]

#: a run's training command (``python -m bots_verl.main`` and its overrides), written before it trains: the record of
#: every setting that defines the run, compared when a later benchmark would reuse or resume it
COMMAND_FILE = "command.txt"
_ENTRY = ("python", "-m", "bots_verl.main")
#: overrides that name a run rather than set it: they carry the profile's name, and the profiles that share a folder
#: (headline, full, beyond, claims) reuse each other's runs
_LABELS = ("trainer.experiment_name", "bots.run_log.run_id")
#: the horizon is :func:`finished_record`'s: a longer one extends a finished run, a shorter one is refused
_HORIZON = "trainer.total_training_steps"
_OUT = "<out>"


def run_dir_of(root: Path, arm: str, seed: int) -> Path:
    """The directory of one run of the benchmark in ``root``."""
    return root / "runs" / f"{arm}_s{seed}"


def planned_runs(profile: BenchmarkProfile) -> list[tuple[str, int]]:
    """The profile's ``(arm, seed)`` runs in the order they are trained and summarised: seed by seed, arms in order."""
    return [(arm, seed) for seed in profile.seeds for arm in profile.selectors]


def read_build(profile: BenchmarkProfile, root: Path) -> dict[str, Any]:
    """The manifest of the build in ``<root>/data``, checked to be the profile's: its family, profile and seed.

    For what reads a folder without preparing it (a summary, a dry run's plan); a benchmark that trains runs
    ``prepare``, which refuses another build in ``data/`` itself.

    Raises:
        RuntimeError: no readable manifest, or one that names no build.
        ValueError: the build is another family's, profile's or seed's (both named; nothing is written).
    """
    manifest_file = root / "data" / "manifest.json"
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise RuntimeError(f"{manifest_file}: cannot read the benchmark's prepared data ({exc})") from exc
    built, seed = manifest.get("profile"), manifest.get("seed")
    if built is None or seed is None:
        raise RuntimeError(f"{manifest_file}: names no build (profile, seed): not a manifest of bots_verl.toy.prepare")
    # a manifest without a family is an arithmetic build (every build made before the families existed)
    family = manifest.get("family", "arith")
    if family != profile.family:
        raise ValueError(
            f"{root / 'data'} holds a build of the {family} family; asked: --family {profile.family}: give --family "
            f"{family} or another --out (each family's runs have a folder of their own); nothing written"
        )
    if (built, seed) != (profile.data_profile, profile.build_seed):
        asked = f"{profile.data_profile}_s{profile.build_seed}"
        raise ValueError(
            f"{root / 'data'} holds the build {built}_s{seed}; asked: {asked} (--profile {profile.name}, --build-seed "
            f"{profile.build_seed}): give --build-seed {seed} and a profile of build {built}; nothing written"
        )
    return manifest


def read_done(done_file: Path) -> dict[str, Any]:
    """A run's ``done.json`` record, checked: an object with the run's ``selector``, integer ``seed`` and ``steps``,
    and an ``accuracy`` curve of finite values in [0, 1] at integer steps.

    Raises:
        ValueError: naming the file, for a truncated, unreadable or hand-edited record, with what to do about it.
    """
    try:
        record = json.loads(done_file.read_text())
        if not isinstance(record, dict):
            raise ValueError(f"it holds a {type(record).__name__}, not an object")
        missing = [key for key in ("selector", "seed", "steps", "accuracy") if key not in record]
        if missing:
            raise ValueError(f"it lacks {missing}")
        for key in ("seed", "steps"):
            record[key] = runlog.parse_int(record[key], key)
        if record["steps"] < 0:
            raise ValueError(f"steps must not be negative, got {record['steps']}")
        for key in ("accuracy", "pool_accuracy"):
            curve = record.get(key, {})
            if not isinstance(curve, dict):
                raise ValueError(f"{key} is a {type(curve).__name__}, not an object of step -> accuracy")
            for step, value in curve.items():
                runlog.check_accuracy(value, f"{key} at step {runlog.parse_int(step, f'{key} step key')}")
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise ValueError(
            f"{done_file}: not a readable run record ({exc}); it is written atomically, so it was cut or edited "
            f"outside the benchmark: restore it, or remove the run's directory {done_file.parent} to train it again"
        ) from exc
    return record


def finished_record(run_dir: Path, steps: int) -> dict[str, Any] | None:
    """The ``done.json`` record of the run in ``run_dir`` if it finished at ``steps`` steps, else None.

    A run finished at fewer steps has no record here: a benchmark with a longer horizon extends it.

    Raises:
        ValueError: the run finished at more steps than ``steps`` (a checkpoint cannot be shortened: use another
            ``--out``), or its ``done.json`` cannot be read (:func:`read_done`).
    """
    done_file = run_dir / "done.json"
    if not done_file.is_file():
        return None
    record = read_done(done_file)
    if record["steps"] > steps:
        raise ValueError(
            f"{run_dir.name} finished at step {record['steps']}, the profile asks for {steps}: a run cannot be "
            "shortened; give this profile another --out"
        )
    return record if record["steps"] == steps else None


def finished_runs(root: Path) -> list[Path]:
    """The runs under ``<root>/runs`` that finished (a ``done.json``), in name order.

    A run that was stopped, or is still training in another sitting, has no ``done.json`` and may have logged nothing
    yet; the tables and figures hold finished runs only, as ``--summarize-finished`` does.

    Raises:
        RuntimeError: when no run has finished.
    """
    runs = (
        sorted(d for d in (root / "runs").iterdir() if (d / "done.json").is_file()) if (root / "runs").is_dir() else []
    )
    if not runs:
        raise RuntimeError(f"no finished run in {root / 'runs'}")
    return runs


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (0 for none): a run's median step time, and the runs' median of those."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2) if ordered else 0.0


def write_command(run_dir: Path, overrides: Sequence[str]) -> None:
    """Write the run's training command to ``<run_dir>/command.txt``, shell-quoted (a path with a space reads back)."""
    (run_dir / COMMAND_FILE).write_text(shlex.join([*_ENTRY, *overrides]) + "\n")


def _command_overrides(run_dir: Path) -> dict[str, str]:
    """The overrides of the run's recorded command, key -> value.

    Raises:
        ValueError: naming the file, when there is none or it holds no ``bots_verl.main`` command.
    """
    path = run_dir / COMMAND_FILE
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path}: cannot read the run's recorded command ({exc}), so its settings cannot be checked against the "
            f"ones asked for: restore it, or remove the run's directory {run_dir} to train it again"
        ) from exc
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()  # written unquoted before the command was shell-quoted
    if _ENTRY[-1] not in words:
        raise ValueError(f"{path}: not a `python -m bots_verl.main` command; restore it or remove {run_dir}")
    return _by_key(words[words.index(_ENTRY[-1]) + 1 :])


def _by_key(overrides: Iterable[str]) -> dict[str, str]:
    """Hydra overrides as key -> value (the key with its ``+``, as written)."""
    return dict(o.split("=", 1) if "=" in o else (o, "") for o in overrides)


def _placed(settings: dict[str, str], roots: Iterable[str]) -> dict[str, str]:
    """``settings`` with the benchmark folder written as ``<out>``: a folder moved, copied or unpacked from an archive
    holds the same runs."""
    prefixes = sorted({r.rstrip("/") + "/" for r in roots if r}, key=len, reverse=True)
    placed = {}
    for key, value in settings.items():
        for prefix in prefixes:
            value = value.replace(prefix, _OUT + "/")
        placed[key] = value
    return placed


def _roots_of(overrides: dict[str, str]) -> list[str]:
    """The benchmark folder as a run's overrides name it: above ``runs/<arm>_s<seed>/ckpt`` and ``data/val.parquet``."""
    roots = []
    for key, depth in (("trainer.default_local_dir", 3), ("data.val_files", 2)):
        if key in overrides:
            path = Path(overrides[key])
            roots.append(str(path.parents[depth - 1]) if len(path.parents) >= depth else "")
    return roots


def _content_differences(run_dir: Path, asked: dict[str, str]) -> list[str]:
    """The files the run trained on, by the content its run log recorded (``meta.json``, ``extra.experiment``: data
    files and the model), against those of ``asked`` (the run's overrides, paths in the benchmark folder checked):
    runs of another build bear the same paths."""
    from bots_verl.integration.safety.training_record import content_identity

    meta = run_dir / "run" / "meta.json"
    try:
        experiment = json.loads(meta.read_text()).get("extra", {}).get("experiment") or {}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return []  # a run log from before the record, or none: the command's paths are all there is to compare
    out = []
    for key, was in sorted(experiment.items()):
        if isinstance(was, str) and was.startswith(("sha256:", "model:")) and key in asked:
            now = content_identity(asked[key])
            if now != was:
                out.append(f"{key} (by content): recorded {was}, asked {now} ({asked[key]})")
    return out


def _differences(
    run_dir: Path, root: Path, asked_overrides: Sequence[str], arm: str, seed: int, profile: BenchmarkProfile
) -> list[str]:
    """Each setting in which the run recorded in ``run_dir`` differs from the run asked for, ``recorded vs asked``."""
    out = []
    done_file = run_dir / "done.json"
    if done_file.is_file():
        record = read_done(done_file)
        out += [
            f"{name} in done.json: recorded {record[name]}, asked {value}"
            for name, value in (("selector", arm), ("seed", seed))
            if record[name] != value
        ]
    recorded = _command_overrides(run_dir)
    asked = _by_key(asked_overrides)
    # an arm's own verl settings (VARIANTS) are what its name means in this code, and its name and selector are
    # compared: the oracle's archived full_s0 runs name its truth source by the module's path before a rename
    arm_own = set(_by_key(arm_settings(arm)[1])) - set(_by_key(profile.extra))
    skipped = {*_LABELS, _HORIZON, *arm_own}
    was = _placed(recorded, _roots_of(recorded))
    # the build's manifest may still name the folder this one was copied from (a summary runs no prepare)
    now = _placed(asked, (str(root), str(root.absolute()), str(root.resolve()), *_roots_of(asked)))
    out += [
        f"{key}: recorded {was.get(key, '(unset)')}, asked {now.get(key, '(unset)')}"
        for key in sorted((set(was) | set(now)) - skipped)
        if was.get(key) != now.get(key)
    ]
    here = {key: value.replace(_OUT + "/", f"{root.absolute()}/") for key, value in now.items()}
    return out + _content_differences(run_dir, here)


def check_recorded_settings(
    manifest: dict[str, Any], profile: BenchmarkProfile, root: Path, plan: Sequence[tuple[str, int]]
) -> None:
    """Refuse a plan whose runs the folder holds with other settings than ``profile`` asks for.

    A planned run that finished (``done.json``) would be reused and one with a checkpoint resumed, so each is
    compared with the run asked for, setting by setting: its recorded command (:data:`COMMAND_FILE`, every override
    but the run's labels and horizon and its arm's own :data:`~bots_verl.toy.arms.VARIANTS` settings, the benchmark
    folder's place aside), its ``done.json``, and the content of the files it trained on (its run log's record).
    Nothing is written.

    Args:
        manifest: the build's ``manifest.json`` in ``<root>/data`` (the paths a run trains on).
        profile: the settings asked for.
        root: the benchmark folder.
        plan: the planned ``(arm, seed)`` runs.

    Raises:
        ValueError: naming the run folder and each differing setting (recorded vs asked), and how many other planned
            runs differ; or a run record that cannot be read.
    """
    from bots_verl.toy.evaluate import checkpoint_steps

    differing = []
    for arm, seed in plan:
        run_dir = run_dir_of(root, arm, seed)
        if not (run_dir / "done.json").is_file() and not checkpoint_steps(run_dir / "ckpt"):
            continue  # nothing to reuse or resume: it trains from the start under the settings asked for
        diffs = _differences(
            run_dir, root, training_overrides(manifest, profile, arm, seed, run_dir), arm, seed, profile
        )
        if diffs:
            differing.append((run_dir, diffs))
    if differing:
        run_dir, diffs = differing[0]
        others = [d.name for d, _ in differing[1:]]
        more = f"; {len(others)} more planned run{'s differ' if len(others) > 1 else ' differs'} too: " * bool(others)
        raise ValueError(
            f"{run_dir} holds a run of other settings than asked ({'; '.join(diffs)}){more}{', '.join(others)}. No "
            "run was trained or changed: ask for the recorded settings, or give these settings another --out"
        )
