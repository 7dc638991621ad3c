"""One run per run folder: the driver holds a lock in each folder a run writes, from before Ray starts to its end.

The cluster claim (:mod:`bots_verl.integration.hooks.task_runner`) keeps two runs off one Ray cluster; two runs of one
experiment on two clusters with shared storage (a job submitted twice) would still both train into one checkpoint
folder and one run log. The run folders are ``trainer.default_local_dir`` (the checkpoints a resume starts from, and
the record of the experiment's settings, :mod:`bots_verl.integration.safety.training_record`) and ``bots.run_log.dir``
when set (``meta.json`` and ``metrics.jsonl``). Each gets :data:`LOCK_NAME` ``.lock``, the ``flock`` of
:class:`bots_verl.fileio.OutputLock` that names its holder (pid, host, start, command). The kernel drops it when the
driver exits however it exits, so a killed run's leftover lock file does not block the next one. On NFS, ``flock``
needs a working lock manager on the mount (:mod:`bots_verl.fileio`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from omegaconf import DictConfig

from bots_verl.fileio import OutputLock, describe_holder, lock_holder

__all__ = ["LOCK_NAME", "RunFolderInUse", "check_run_folders_free", "hold_run_folders", "run_folders"]

#: the lock of a run folder: ``<folder>/.bots_run.lock``
LOCK_NAME = ".bots_run"


class RunFolderInUse(RuntimeError):
    """Another live run holds a run folder of this one."""


def run_folders(config: DictConfig) -> list[Path]:
    """The folders this run writes: ``trainer.default_local_dir`` and ``bots.run_log.dir`` (when set), absolute."""
    folders = [Path(os.path.abspath(os.path.expanduser(str(config.trainer.default_local_dir))))]
    run_log = ((config.get("bots", None) or {}).get("run_log", None) or {}).get("dir", None)
    if run_log:
        path = Path(os.path.abspath(os.path.expanduser(str(run_log))))
        if path not in folders:
            folders.append(path)
    return folders


def _refusal(folder: Path, holder: dict) -> RunFolderInUse:
    return RunFolderInUse(
        f"{folder} is in use by another run: {describe_holder(holder)}. Two runs in one run folder would write the "
        "same checkpoints and run log (a job submitted twice, perhaps on another Ray cluster with the same storage); "
        f"wait for it, stop it, or give this run another trainer.default_local_dir / bots.run_log.dir. (Its lock, "
        f"{folder / LOCK_NAME}.lock, is freed automatically when that process exits.)"
    )


def check_run_folders_free(config: DictConfig) -> None:
    """Refuse (for the dry run, which takes nothing) when a live run holds a run folder of this config.

    Raises:
        RunFolderInUse: naming the folder and the holder.
    """
    for folder in run_folders(config):
        holder = lock_holder(folder / LOCK_NAME)
        if holder is not None:
            raise _refusal(folder, holder)


def hold_run_folders(config: DictConfig) -> list[OutputLock]:
    """Take the lock of every run folder (created if missing) for this process; release them with ``release()``.

    Raises:
        RunFolderInUse: another live process holds one; none is kept then.
    """
    command = " ".join(["python -m bots_verl.main", *sys.argv[1:]])
    held: list[OutputLock] = []
    for folder in run_folders(config):
        folder.mkdir(parents=True, exist_ok=True)
        lock = OutputLock(folder / LOCK_NAME, command=command)
        holder = lock.try_acquire()
        if holder is not None:
            for taken in held:
                taken.release()
            raise _refusal(folder, holder)
        held.append(lock)
    return held
