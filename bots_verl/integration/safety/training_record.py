"""The training settings that define an experiment, recorded in the run folder at its start and checked on resume.

BOTS' own settings ride in the checkpoint's fingerprint (:mod:`bots_verl.integration.safety.fingerprint`); verl's
are recorded here. Without this, a rerun of a recipe with another ``TRAIN_BATCH_SIZE``, ``LR``, ``ROLLOUT_N`` or
``MAX_RESPONSE_LENGTH`` into the same run folder resumed the checkpoint under the new settings and the tables reported
the hybrid as one run (issue 47).

**The run folder** is ``trainer.default_local_dir``: where verl writes the checkpoints a resume starts from. The
driver (``bots_verl.main``) writes :data:`RECORD_FILE` there when a run starts fresh: every setting of
:func:`experiment_settings`. On resume it compares the record beside the checkpoint it resumes from with this launch's
settings before Ray starts and refuses every change (``training: <key> <old> -> <new>``) unless
``bots.resume.accept_changed`` names ``training`` (every training setting) or ``training.<key>`` (that one): lowering
the learning rate on purpose, say. An accepted change is appended to the record's ``history`` (and to the run log's
``meta.json``, ``extra.resumes``), and the record's ``settings`` then hold what the run continues with.

**What is recorded** is derived from verl's composed config, not listed by hand
(:mod:`~bots_verl.integration.safety.recorded_settings`): every setting under its sections (the data, the model, the
actor's loss and optimizer, the rollout's sampling, the reward, the algorithm), one verl adds or a user adds with
``+key=...`` included, except the harmless ones, each named with why it does not change what is trained
(parallelism, placement, memory, kernels, logging). A hand list missed ``reward.custom_reward_function``,
``reward.reward_manager``, the policy loss and ``actor.grad_clip``: another reward resumed without a word (issue 59).

**Files by content.** The data files, the reward function's module and the model are recorded by what they hold, not
where they lie (:func:`content_identity`, :func:`module_identity`): a run folder extracted from an archive, or a
benchmark copied to another disk, resumes; a file replaced or edited in place is a change.

**Older records.** A record written by an earlier bots-verl (an earlier :data:`RECORD_FILE` ``version``, with fewer
settings) is compared on the settings it holds, with a warning; the resume then rewrites it with every setting.

Left out on purpose: the schedule's length (``trainer.total_training_steps``, ``total_epochs``: extending a run is a
resume), where things are logged or saved, and the hardware layout (the harmless settings).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from bots_verl.fileio import write_json_atomic
from bots_verl.integration.safety.fingerprint import Change, same_value
from bots_verl.integration.safety.recorded_settings import MODULE_KEYS, PATH_KEYS, RECORDED_SECTIONS, harmless

logger = logging.getLogger(__name__)

__all__ = [
    "ACCEPT",
    "RECORD_FILE",
    "content_identity",
    "experiment_changes",
    "experiment_settings",
    "module_identity",
    "read_record",
    "record_experiment",
]

#: the record's name in the run folder (``trainer.default_local_dir``)
RECORD_FILE = "bots_experiment.json"
#: ``bots.resume.accept_changed`` value that accepts every training setting; ``training.<key>`` accepts one
ACCEPT = "training"
#: version 1 (before issue 59) held a hand list of settings; version 2 every setting of the recorded sections
_FORMAT, _VERSION = "bots-verl-experiment", 2


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not str(key).startswith("_"):  # _target_: verl's dataclass, not a setting
                _flatten(f"{prefix}.{key}", item, out)
    elif not harmless(prefix):
        out[prefix] = value


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime in the key: a file rewritten in place is read again
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def _model_digest(folder: str) -> str:
    # a checkpoint's weights can be tens of GB: its config.json in full and every file's name and size stand for it
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            digest.update(f"{rel}\0{os.path.getsize(path)}\0".encode())
            if rel == "config.json":
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()[:16]


def content_identity(value: Any) -> Any:
    """What a path setting names, independent of where it lies: ``sha256:<16 hex>`` of a local file's bytes,
    ``model:<16 hex>`` of a local folder (its ``config.json`` and every file's name and size), a list item by item;
    anything else (a hub id, a remote URL, unset) as given.

    Args:
        value: the setting's plain value (a path, a list of paths, or None).
    """
    if isinstance(value, list | tuple):
        return [content_identity(item) for item in value]
    if not isinstance(value, str) or not value:
        return value
    path = os.path.expanduser(value)
    if os.path.isfile(path):
        stat = os.stat(path)
        return "sha256:" + _file_digest(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if os.path.isdir(path):
        return "model:" + _model_digest(path)
    return value


def _package_digest(folder: str) -> str:
    # a package's code is every file in it (its modules, data tables), by relative name and bytes
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if not f.endswith((".pyc", ".pyo"))):
            path = os.path.join(root, name)
            digest.update(f"{os.path.relpath(path, folder)}\0".encode())
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()[:16]


def module_identity(value: Any) -> Any:
    """What a module path verl loads code from holds (``verl.utils.import_utils.load_module``'s forms):
    ``pkg://a.b`` of a module by its file's bytes (``sha256:<16 hex>``), of a package by every file in its folder
    (``package:<16 hex>``); ``file://x.py`` or a path by :func:`content_identity`; a module not importable here (it
    may exist only on the cluster) or unset, as given.

    Args:
        value: the setting's plain value.
    """
    if not isinstance(value, str) or not value.startswith("pkg://"):
        return content_identity(value.removeprefix("file://") if isinstance(value, str) else value)
    name = value.removeprefix("pkg://").replace("/", ".")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return value
    if spec.submodule_search_locations is not None:
        return "package:" + _package_digest(os.path.dirname(spec.origin))
    return content_identity(spec.origin)


def experiment_settings(config: DictConfig) -> dict[str, Any]:
    """Every setting of the recorded sections in ``config`` but the harmless ones
    (:mod:`~bots_verl.integration.safety.recorded_settings`), as ``{dotted key: plain value}`` (interpolations
    resolved; files, code and the model by content).

    Args:
        config: the composed trainer config, as the driver checks it.
    """
    out: dict[str, Any] = {}
    for section in RECORDED_SECTIONS:
        value = OmegaConf.select(config, section, default=None)
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        _flatten(section, value, out)
    for key in PATH_KEYS:
        if key in out:
            out[key] = content_identity(out[key])
    for key in MODULE_KEYS:
        if key in out:
            out[key] = module_identity(out[key])
    return out


def read_record(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The record in the run folder ``folder``, or None if it has none.

    Raises:
        ValueError: naming the file when it cannot be read or is not a record.
    """
    path = Path(folder) / RECORD_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it ({exc}); restore it or start a new run") from exc
    if not (isinstance(record, dict) and record.get("format") == _FORMAT and isinstance(record.get("settings"), dict)):
        raise ValueError(f"{path}: not a {_FORMAT} record; restore it or start a new run")
    version = record.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= _VERSION:
        raise ValueError(
            f"{path}: version {version!r}, this bots-verl reads versions 1 to {_VERSION}: resume with the bots-verl "
            "that wrote it, or start a new run"
        )
    return record


def _changed(record: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, list[Any]]:
    """``{key: [recorded, current]}`` of every setting that differs; an older record's on the settings it holds."""
    was = record["settings"]
    keys = set(was) | set(current) if record["version"] == _VERSION else set(was) & set(current)
    return {
        key: [was.get(key), current.get(key)] for key in sorted(keys) if not same_value(was.get(key), current.get(key))
    }


def experiment_changes(record: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[Change]:
    """Every training setting ``current`` has changed since ``record`` (:func:`read_record`) was written.

    A record-less run folder (a run started before the record existed) cannot be checked: said in a warning, and
    the resume then writes the record its later resumes are checked against. (Refusing it would stop every resume
    of a run started by an earlier bots-verl, for a check that has nothing to compare.) A record of an earlier
    version is compared on the settings it holds, with a warning; the resume rewrites it with every setting.
    """
    if record is None:
        logger.warning(
            "the run folder has no %s (a run started before it was written): its training settings cannot be "
            "checked on this resume; they are recorded now",
            RECORD_FILE,
        )
        return []
    if record["version"] != _VERSION:
        unchecked = len(set(current) - set(record["settings"]))
        logger.warning(
            "the run folder's %s was written by an earlier bots-verl (version %d, this one writes %d): %d training "
            "settings it did not record cannot be checked on this resume; they are recorded now",
            RECORD_FILE,
            record["version"],
            _VERSION,
            unchecked,
        )
    was = record["settings"]
    unset = "(unset)"
    return [
        Change(ACCEPT, f"{key} {was.get(key, unset)!r} -> {current.get(key, unset)!r}", ACCEPT, key=key)
        for key in _changed(record, current)
    ]


def record_experiment(config: DictConfig, settings: Mapping[str, Any], resumed_from: str | None) -> dict[str, Any]:
    """Write (fresh run) or extend (resume) the record in ``trainer.default_local_dir``; return the resume's entry.

    Call it after the resume check passed (:func:`~bots_verl.integration.safety.resume.check_resume`): on resume every
    change left is one the launch accepted.

    Args:
        config: the composed trainer config.
        settings: :func:`experiment_settings` of it.
        resumed_from: the checkpoint folder it resumes from, or None for a fresh start.

    Returns:
        ``{"at", "resumed_from", "changed": {key: [old, new]}, "accept_changed"}`` for a resume, else ``{}``.
    """
    folder = Path(os.path.abspath(config.trainer.default_local_dir))
    folder.mkdir(parents=True, exist_ok=True)
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    previous = read_record(os.path.dirname(resumed_from)) if resumed_from else None
    if previous is None:
        record = {"format": _FORMAT, "version": _VERSION, "started": now, "settings": dict(settings), "history": []}
        if resumed_from:
            record["resumed_from"] = resumed_from
        write_json_atomic(folder / RECORD_FILE, record, sort_keys=True, default=str)
        if not resumed_from:
            return {}
        accepted = list(config.bots.resume.accept_changed)
        return {"at": now, "resumed_from": resumed_from, "changed": {}, "accept_changed": accepted}
    changed = _changed(previous, settings)
    entry = {
        "at": now,
        "resumed_from": resumed_from,
        "changed": changed,
        "accept_changed": list(config.bots.resume.accept_changed),
    }
    if previous["version"] != _VERSION:
        entry["record_version"] = previous["version"]  # compared on that version's settings only
    history = [*previous.get("history", []), entry]
    record = {**previous, "version": _VERSION, "settings": dict(settings), "history": history}
    write_json_atomic(folder / RECORD_FILE, record, sort_keys=True, default=str)
    if changed:
        logger.warning("resuming with changed training settings, accepted: %s", changed)
    return entry
