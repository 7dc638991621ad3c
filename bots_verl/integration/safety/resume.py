"""Every check of what a launch resumes, behind one entry point: :func:`check_resume`.

verl decides at ``_load_checkpoint`` whether to resume (``trainer.resume_mode``: ``auto`` takes the latest
``global_step_N`` under ``trainer.default_local_dir``, ``resume_path`` takes ``trainer.resume_from_path``,
``disable`` never resumes). :func:`resume_folder` reads the same settings the same way, so the BOTS checks can run
before any worker starts.

:func:`check_resume_data_pt` refuses a checkpoint whose ``data.pt`` holds no BOTS posterior, and
:func:`check_resume_fingerprint` one whose posterior was built for another pool, reference columns or selector
(:mod:`bots_verl.integration.safety.fingerprint`): the driver (``bots_verl.main``, dry run included) compares what it
knows without the dataset (selector, hyperparameters, success rule, reference column names), ``BOTSTrainer``
everything, once verl built the train dataset and before any worker starts.

A run log's ``metrics.jsonl`` is moved aside as ``metrics.part<k>.jsonl`` on every start and ``analysis`` reads the
parts in order (:mod:`bots_verl.runlog`), so a fresh run in a directory holding an earlier run's metrics would show the
old run's later steps under the new run's label. :func:`check_run_log_dir` refuses that.

:func:`check_resume` runs them in order and is what the driver and the trainer call: the driver (dry run included)
with the fingerprint it knows without the dataset, ``BOTSTrainer.init`` before any worker starts; the trainer then
compares the full fingerprint on the :class:`ResumePoint` it got back, once verl built the train dataset.
``BOTSTrainer._load_checkpoint`` adds the one check only verl's own load can make (torchdata handed the sampler no
state: :func:`missing_data_pt_message`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from bots_verl.integration.safety.fingerprint import Change, check_fingerprint
from bots_verl.integration.safety.training_record import experiment_changes, read_record
from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.runlog import logged_metrics_files

__all__ = [
    "ResumePoint",
    "check_resume",
    "check_resume_data_pt",
    "check_resume_fingerprint",
    "check_run_log_dir",
    "missing_data_pt_message",
    "resume_folder",
]


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a launch resumes from, its BOTS state read and checked.

    Attributes:
        folder: the ``global_step_N`` folder.
        sampler_state: its ``data.pt``'s sampler state (:func:`check_resume_data_pt`).
    """

    folder: str
    sampler_state: dict[str, Any]

    def check_fingerprint(
        self, current: Mapping[str, Any], accept: Collection[str], also: Sequence[Change] = ()
    ) -> None:
        """Refuse this checkpoint if its posterior was built for another run (:func:`check_resume_fingerprint`)."""
        check_resume_fingerprint(self.folder, self.sampler_state, current, accept, also)


def check_resume(
    config: DictConfig,
    *,
    fingerprint: Mapping[str, Any] | None = None,
    accept: Collection[str] = (),
    require_data_pt: bool = True,
    experiment: Mapping[str, Any] | None = None,
) -> ResumePoint | None:
    """The resume checks, in order: the one entry point of the driver and the trainer.

    1. A fresh start (no checkpoint to resume from) may not continue an earlier run's log (:func:`check_run_log_dir`).
    2. A resume needs a ``data.pt`` holding a BOTS sampler state (:func:`check_resume_data_pt`); with
       ``require_data_pt=False`` (the driver, whose checkpoint may live on the cluster only) a missing ``data.pt`` is
       left to the trainer unless the checkpoint folder itself is here: then it is refused before any worker starts
       (on a GPU cluster that saves loading the model only to stop).
    3. With ``fingerprint``, the checkpoint's posterior must have been built for this run, and with ``experiment``
       the run folder's record of its training settings must hold them, ``accept`` aside
       (:func:`check_resume_fingerprint`, :mod:`bots_verl.integration.safety.training_record`).

    Args:
        config: the composed trainer config.
        fingerprint: what this process knows of the run's fingerprint, or None to compare later
            (:meth:`ResumePoint.check_fingerprint`).
        accept: ``bots.resume.accept_changed``.
        require_data_pt: refuse a missing ``data.pt`` here even when the checkpoint folder is not here either.
        experiment: this launch's :func:`~bots_verl.integration.safety.training_record.experiment_settings` (the
            driver), compared with the record in the checkpoint's run folder; only with ``fingerprint``.

    Returns:
        The checkpoint to resume from, or None for a fresh start (or a ``data.pt`` left to the trainer).

    Raises:
        FileNotFoundError: ``data.pt`` is missing (``require_data_pt``).
        ValueError: for every other refusal, naming what to do instead.
    """
    folder = resume_folder(config)
    if folder is None:
        check_run_log_dir(config)
        return None
    if not require_data_pt and not os.path.isdir(folder):
        return None
    point = ResumePoint(folder, check_resume_data_pt(folder))
    if fingerprint is not None:
        also = () if experiment is None else experiment_changes(read_record(os.path.dirname(folder)), experiment)
        point.check_fingerprint(fingerprint, accept, also)
    return point


def resume_folder(config: DictConfig) -> str | None:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` will resume from, or ``None`` for a fresh start.

    Relative paths are resolved in this process's working directory, as verl does in its own.

    Args:
        config: the composed trainer config.
    """
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    trainer = config.trainer
    if trainer.resume_mode == "auto":
        return find_latest_ckpt_path(os.path.abspath(trainer.default_local_dir))
    if trainer.resume_mode == "resume_path" and trainer.get("resume_from_path", None):
        return os.path.abspath(trainer.resume_from_path)
    return None


def check_run_log_dir(config: DictConfig) -> None:
    """Refuse a fresh run whose ``bots.run_log.dir`` already holds logged steps of another run.

    A directory with only ``meta.json`` (or an empty ``metrics.jsonl``) logged no step, so a new run may take it over;
    a resumed run may always continue its log.

    Args:
        config: the composed trainer config.

    Raises:
        ValueError: naming the directory, its metrics files and what to do instead.
    """
    run_dir = ((config.get("bots", None) or {}).get("run_log", None) or {}).get("dir", None)
    if not run_dir:
        return
    logged = logged_metrics_files(run_dir)
    if not logged or resume_folder(config) is not None:
        return
    trainer = config.trainer
    files = ", ".join(path.name for path in logged)
    raise ValueError(
        f"bots.run_log.dir={run_dir} already holds the metrics of an earlier run ({files}), but this run starts "
        f"fresh (trainer.resume_mode={trainer.resume_mode}, trainer.default_local_dir="
        f"{trainer.get('default_local_dir')}: no checkpoint to resume from): the run log would show the old run's "
        f"steps under this run's label. Pick a new bots.run_log.dir, or delete {run_dir}; only a run that resumes "
        "from a checkpoint may continue a run log"
    )


def check_resume_data_pt(folder: str | os.PathLike) -> dict[str, Any]:
    """Refuse to resume from the checkpoint ``folder`` unless its ``data.pt`` holds a BOTS sampler state.

    torchdata hands the sampler its state only when ``data.pt`` has one (``sampler_state``): without this check a
    ``data.pt`` written by plain verl or another sampler would resume the model while the posterior silently restarted
    from the prior. The file is read here once more than verl reads it, before any worker starts.

    Args:
        folder: the ``global_step_N`` folder verl will resume from.

    Returns:
        The sampler state (:func:`~bots_verl.integration.transport.sampler_state.checkpoint_sampler_state`), fingerprint
        included.

    Raises:
        FileNotFoundError: ``data.pt`` is missing.
        ValueError: ``data.pt`` cannot be read or holds no BOTS sampler state (the message names the file and what is
            missing).
    """
    folder = os.fspath(folder)
    if not os.path.isfile(os.path.join(folder, "data.pt")):
        raise FileNotFoundError(missing_data_pt_message(folder))
    try:
        return checkpoint_sampler_state(os.path.join(folder, "data.pt"))
    except ValueError as err:
        raise ValueError(
            f"resuming from {folder}, but {err}: the BOTS posterior lives there, and restarting it from the prior "
            "while the model resumes would silently change the run. Resume from a checkpoint of a BOTS run, or start "
            "a new run (trainer.resume_mode=disable or another trainer.default_local_dir)"
        ) from err


def check_resume_fingerprint(
    folder: str | os.PathLike,
    sampler_state: Mapping[str, Any],
    current: Mapping[str, Any],
    accept: Collection[str],
    also: Sequence[Change] = (),
) -> None:
    """Refuse to resume ``folder`` when its posterior was built for another run (``bots.resume.accept_changed`` aside).

    Args:
        folder: the checkpoint folder.
        sampler_state: what :func:`check_resume_data_pt` returned for it.
        current: this run's fingerprint (:func:`~bots_verl.integration.safety.fingerprint.run_fingerprint`); only what
            it holds is compared.
        accept: ``bots.resume.accept_changed``.
        also: changes found elsewhere (the training settings), refused or accepted with them.

    Raises:
        ValueError: listing each refused change with the override that accepts it, or why none can.
    """
    check_fingerprint(os.fspath(folder), sampler_state.get("fingerprint"), current, accept, also)


def missing_data_pt_message(folder: str) -> str:
    """The refusal of a resume whose ``data.pt`` is missing or empty."""
    return (
        f"resuming from {folder} but its data.pt is missing or empty: the BOTS posterior lives there, and restarting "
        "it from the prior while the model resumes would silently change the run. Restore data.pt, or start a new "
        "run (trainer.resume_mode=disable or another trainer.default_local_dir)"
    )
