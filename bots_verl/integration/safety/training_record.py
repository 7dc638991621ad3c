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

**Files by content.** The data files, the reward function's file and the model are recorded by what they hold, not
where they lie (:func:`content_identity`): a run folder extracted from an archive, or a benchmark copied to another
disk, resumes; a file replaced in place is a change.

Left out on purpose: the schedule's length (``trainer.total_training_steps``, ``total_epochs``: extending a run is a
resume), where things are logged or saved, and the hardware layout.
"""

from __future__ import annotations

import functools
import hashlib
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

logger = logging.getLogger(__name__)

__all__ = [
    "ACCEPT",
    "EXPERIMENT_KEYS",
    "content_identity",
    "RECORD_FILE",
    "experiment_changes",
    "experiment_settings",
    "read_record",
    "record_experiment",
]

#: the record's name in the run folder (``trainer.default_local_dir``)
RECORD_FILE = "bots_experiment.json"
#: ``bots.resume.accept_changed`` value that accepts every training setting; ``training.<key>`` accepts one
ACCEPT = "training"
_FORMAT, _VERSION = "bots-verl-experiment", 1

#: the verl keys that define an experiment; a section (a mapping) stands for each of its keys
EXPERIMENT_KEYS = (
    "data.train_files",
    "data.val_files",
    "data.train_batch_size",
    "data.max_prompt_length",
    "data.max_response_length",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout.temperature",
    "actor_rollout_ref.rollout.top_p",
    "actor_rollout_ref.rollout.top_k",
    "actor_rollout_ref.actor.optim",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_epochs",
    "actor_rollout_ref.actor.clip_ratio",
    "actor_rollout_ref.actor.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high",
    "actor_rollout_ref.actor.entropy_coeff",
    "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.actor.kl_loss_coef",
    "actor_rollout_ref.actor.kl_loss_type",
    "actor_rollout_ref.actor.loss_agg_mode",
    "algorithm",
    "custom_reward_function",
)
#: the settings that name a file or a model folder: recorded by content (:func:`content_identity`)
_PATH_KEYS = (
    "data.train_files",
    "data.val_files",
    "actor_rollout_ref.model.path",
    "custom_reward_function.path",
)
# written by verl itself during a run (the optimizer's schedule length), or no setting at all
_SKIPPED = ("actor_rollout_ref.actor.optim.total_training_steps",)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not str(key).startswith("_"):  # _target_: verl's dataclass, not a setting
                _flatten(f"{prefix}.{key}", item, out)
    elif prefix not in _SKIPPED:
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


def experiment_settings(config: DictConfig) -> dict[str, Any]:
    """Every setting of :data:`EXPERIMENT_KEYS` in ``config``, as ``{dotted key: plain value}`` (sections flattened;
    files and the model by :func:`content_identity`).

    Args:
        config: the composed trainer config, as the driver checks it.
    """
    out: dict[str, Any] = {}
    for key in EXPERIMENT_KEYS:
        value = OmegaConf.select(config, key, default=None)
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        _flatten(key, value, out)
    for key in _PATH_KEYS:
        if key in out:
            out[key] = content_identity(out[key])
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
    return record


def experiment_changes(record: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[Change]:
    """Every training setting ``current`` has changed since ``record`` (:func:`read_record`) was written.

    A record-less run folder (a run started before the record existed) cannot be checked: said in a warning, and
    the resume then writes the record its later resumes are checked against. (Refusing it would stop every resume
    of a run started by an earlier bots-verl, for a check that has nothing to compare.)
    """
    if record is None:
        logger.warning(
            "the run folder has no %s (a run started before it was written): its training settings cannot be "
            "checked on this resume; they are recorded now",
            RECORD_FILE,
        )
        return []
    was = record["settings"]
    changes = []
    for key in sorted(set(was) | set(current)):
        if not same_value(was.get(key), current.get(key)):
            what = f"{key} {was.get(key, '(unset)')!r} -> {current.get(key, '(unset)')!r}"
            changes.append(Change(ACCEPT, what, ACCEPT, key=key))
    return changes


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
    changed = {
        key: [previous["settings"].get(key), settings.get(key)]
        for key in sorted(set(previous["settings"]) | set(settings))
        if not same_value(previous["settings"].get(key), settings.get(key))
    }
    entry = {
        "at": now,
        "resumed_from": resumed_from,
        "changed": changed,
        "accept_changed": list(config.bots.resume.accept_changed),
    }
    record = {**previous, "settings": dict(settings), "history": [*previous.get("history", []), entry]}
    write_json_atomic(folder / RECORD_FILE, record, sort_keys=True, default=str)
    if changed:
        logger.warning("resuming with changed training settings, accepted: %s", changed)
    return entry
