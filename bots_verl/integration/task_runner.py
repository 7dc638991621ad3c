"""``BOTSTaskRunner``: verl's own V1 task runner, building :class:`~bots_verl.integration.trainer.BOTSTrainer`.

``trainer.v1.trainer_mode`` stays ``sync``: verl string-compares the mode in several places, so the runner runs verl's
``TaskRunnerV1.run`` with ``BOTSTrainer`` registered for that mode in its own process (:func:`trainer_registered`),
after pointing verl's file logger at the run log (:func:`use_run_log`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from omegaconf import DictConfig
from verl.trainer.main_ppo import TaskRunnerV1
from verl.trainer.ppo.v1 import trainer_base

from bots_verl.integration.async_trainer import bots_trainer_class
from bots_verl.integration.resume import check_run_log_dir
from bots_verl.runlog import METRICS_FILE, rotate_metrics

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

__all__ = ["BOTSTaskRunner", "trainer_registered", "use_run_log"]


def use_run_log(config: DictConfig) -> None:
    """Point verl's file logger at ``<bots.run_log.dir>/metrics.jsonl`` in this process, keeping earlier steps.

    The driver made the directory absolute (``bots_verl.main``), so every process resolves it the same way.

    Raises:
        ValueError: for a fresh run in a directory holding an earlier run's metrics
            (:func:`~bots_verl.integration.resume.check_run_log_dir`); nothing is moved then.
    """
    run_dir = config.bots.run_log.get("dir", None)
    if not run_dir:
        return
    if not os.path.isabs(run_dir):
        raise ValueError(f"bots.run_log.dir={run_dir!r} must be absolute here (bots_verl.main resolves it)")
    # The driver checked this too, but relative checkpoint paths resolve here as in verl: refuse before rotating.
    check_run_log_dir(config)
    # verl's file logger reads this in this process (the driver's environment may not reach Ray workers)
    os.environ["VERL_FILE_LOGGER_PATH"] = os.path.join(run_dir, METRICS_FILE)
    # it also truncates the file: keep a resumed run's earlier steps as metrics.part<k>.jsonl
    rotated = rotate_metrics(run_dir)
    if rotated is not None:
        logger.info("kept the previous metrics of %s as %s", run_dir, rotated.name)


@contextlib.contextmanager
def trainer_registered(mode: str, trainer_cls: type) -> Iterator[None]:
    """Make verl's trainer registry return ``trainer_cls`` for ``mode`` in this process, for the duration."""
    registry = trainer_base.TRAINER_REGISTRY
    previous = registry.get(mode)
    registry[mode] = trainer_cls
    try:
        yield
    finally:
        if previous is None:
            registry.pop(mode, None)
        else:
            registry[mode] = previous


class BOTSTaskRunner(TaskRunnerV1.__ray_actor_class__):
    """verl's V1 task runner building :class:`BOTSTrainer` (wrap with ``ray.remote(num_cpus=1)``)."""

    def run(self, config: DictConfig) -> None:
        """verl's ``TaskRunnerV1.run`` (TransferQueue, trainer, agent loop, fit), with ``BOTSTrainer``."""
        use_run_log(config)
        mode = config.trainer.v1.trainer_mode
        with trainer_registered(mode, bots_trainer_class(mode)):
            super().run(config)
