"""Whether a launch resumes a checkpoint, and the run-log rule that follows: only a resumed run continues a run log.

verl decides at ``_load_checkpoint`` whether to resume (``trainer.resume_mode``: ``auto`` takes the latest
``global_step_N`` under ``trainer.default_local_dir``, ``resume_path`` takes ``trainer.resume_from_path``,
``disable`` never resumes). :func:`resume_folder` reads the same settings the same way, so the BOTS checks can run
before any worker starts.

A run log's ``metrics.jsonl`` is moved aside as ``metrics.part<k>.jsonl`` on every start and ``analysis`` reads the
parts in order (:mod:`bots_verl.runlog`), so a fresh run in a directory holding an earlier run's metrics would show the
old run's later steps under the new run's label. :func:`check_run_log_dir` refuses that.
"""

from __future__ import annotations

import os

from omegaconf import DictConfig

from bots_verl.runlog import logged_metrics_files

__all__ = ["check_run_log_dir", "resume_folder"]


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
    run_dir = (config.bots.get("run_log", None) or {}).get("dir", None)
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
