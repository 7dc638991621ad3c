"""``BOTSTrainer``: verl 0.9.1's sync V1 trainer with BOTS choosing the training tasks, and its task runner.

verl 0.9.1 has no sampler hook, so we extend it at three points, without patching verl's classes:

1. ``_init_dataloader``: after verl built the datasets, map positions to task ids, read the reference columns,
   create the posterior actor and rebuild ``train_dataloader`` around :class:`BOTSSampler` (``num_workers=0``).
2. ``step``: after verl's step (rollout, reward, update) and **before** ``fit`` writes the checkpoint, read the
   step's outcomes from TransferQueue, aggregate them per task and update the posterior. So ``data.pt`` of step N
   holds the posterior after step N, and the selection for step N+1 already sees step N's evidence.
3. ``_build_replay_buffer`` (DAPO only): the built-in buffer's class is rebound to :class:`BOTSReplayBuffer`, which
   reads the all-0/all-1 groups that dynamic sampling evicts before they are deleted, so they still reach the
   posterior (within the same step's update).

``trainer.v1.trainer_mode`` stays ``sync``: verl string-compares the mode in several places, so we pick our class in
:class:`BOTSTaskRunner` instead of registering a new mode.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader
from verl.trainer.main_ppo import TaskRunnerV1
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.dataset.rl_dataset import collate_fn

from bots_verl.integration.actor import create_posterior_actor
from bots_verl.integration.outcomes import Outcome, SuccessRule, aggregate_outcomes, read_outcomes
from bots_verl.integration.sampler import BOTSSampler
from bots_verl.integration.settings import BOTSSettings, check_verl_compat, parse_bots_config, train_files
from bots_verl.integration.tasks import TaskIndex, dataset_task_ids, read_reference_columns
from bots_verl.runlog import METRICS_FILE, rotate_metrics

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

__all__ = ["BOTSReplayBuffer", "BOTSTaskRunner", "BOTSTrainer", "bots_metrics"]


def bots_metrics(stats: dict[str, float], **extra: float) -> dict[str, float]:
    """Namespace selector statistics and step figures under ``bots/`` for verl's tracker."""
    return {f"bots/{k}": float(v) for k, v in {**stats, **extra}.items()}


class BOTSReplayBuffer(ReplayBuffer):
    """verl's sync ``ReplayBuffer`` that reports groups it evicts (DAPO filtering, surplus) before deleting them.

    Only the ``_clear_groups`` step is extended; everything else, including the DAPO keyword arguments verl passes
    to its built-in buffer, is verl's. ``bots_observer(keys, tags)`` receives the trajectory keys of the evicted
    train groups whose rollouts finished (failed rollouts carry no reward and are skipped).
    """

    bots_observer: Any = None

    def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
        if self.bots_observer is not None and partition_id == "train" and uids:
            failed = self.failure_keys[partition_id]
            keys = [
                key
                for key, tag in self.partitions[partition_id].items()
                if key.split("_")[0] in uids and key.split("_")[0] not in failed and tag.get("status") == "success"
            ]
            if keys:
                self.bots_observer(keys, [self.partitions[partition_id][k] for k in keys], partition_id)
        super()._clear_groups(partition_id, uids)


class BOTSTrainer(PPOTrainerSync):
    """``PPOTrainerSync`` whose training tasks are chosen by a BOTS selector living in a Ray actor.

    Args:
        config: the composed ``bots_trainer`` config.

    Raises:
        ValueError: for an invalid ``bots:`` section or incompatible verl settings.
    """

    def __init__(self, config: DictConfig) -> None:
        self.bots: BOTSSettings = parse_bots_config(config)
        check_verl_compat(config)
        self._bots_rule = SuccessRule(self.bots.success_rule, self.bots.success_threshold)
        # evidence gathered during the current step (DAPO evictions); flushed with the step's batch
        self._bots_evicted: list[Outcome] = []
        self.bots_sampler: BOTSSampler | None = None
        self.bots_task_index: TaskIndex | None = None
        super().__init__(config)

    # -------------------------------------------------------------------------------------------- construction
    def _build_replay_buffer(self) -> ReplayBuffer:
        buffer = super()._build_replay_buffer()
        filter_groups = self.config.algorithm.get("filter_groups", None)
        if filter_groups is not None and filter_groups.get("enable", False):
            if type(buffer) is not ReplayBuffer:
                raise ValueError(
                    f"algorithm.filter_groups with BOTS needs verl's built-in ReplayBuffer, got {type(buffer)}; "
                    "evicted groups would never reach the posterior"
                )
            # Rebinding our own instance (not verl's class) keeps every DAPO argument verl computed.
            buffer.__class__ = BOTSReplayBuffer
            buffer.bots_observer = self._bots_observe_evicted
        return buffer

    def _init_dataloader(self) -> None:
        super()._init_dataloader()
        path = self.bots.task_id_path
        self.bots_task_index = TaskIndex(dataset_task_ids(self.train_dataset, path), self.bots.task_id_field)
        reference = None
        if self.bots.reference_columns:
            reference = read_reference_columns(
                train_files(self.config), self.bots.reference_columns, path, self.bots_task_index
            )
        num_tasks = len(self.bots_task_index)
        actor = create_posterior_actor(
            self.bots.actor_name,
            self.bots.actor_namespace,
            selector=self.bots.selector,
            num_tasks=num_tasks,
            reference_pass_rates=reference,
            seed=self.bots.seed,
            hparams=self.bots.hparams,
        )
        self.bots_sampler = BOTSSampler(
            actor, num_tasks, self.config.data.train_batch_size, self.bots_task_index.task_ids
        )
        gen_batch_size = self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size
        # same arguments as verl's own train dataloader, except the sampler and no workers
        self.train_dataloader = StatefulDataLoader(
            dataset=self.train_dataset,
            batch_size=gen_batch_size,
            num_workers=0,
            drop_last=True,
            collate_fn=collate_fn,
            sampler=self.bots_sampler,
        )
        self.train_dataloader_it = None
        logger.info(
            "BOTS: selector=%s over %d tasks (reference columns %s)",
            self.bots.selector,
            num_tasks,
            list(self.bots.reference_columns),
        )

    # -------------------------------------------------------------------------------------------- evidence
    def _bots_observe_evicted(self, keys: list[str], tags: list[dict], partition_id: str) -> None:
        self._bots_evicted.extend(
            read_outcomes(keys, tags, partition_id, task_path=self.bots.task_id_path, rule=self._bots_rule)
        )

    def bots_update(self, batch: Any) -> dict[str, float]:
        """Read ``batch``'s outcomes (plus this step's evicted groups) and update the posterior.

        Args:
            batch: the step's ``KVBatchMeta``.

        Returns:
            ``bots/...`` metrics.

        Raises:
            ValueError: for unmappable rewards or unknown task ids (the posterior is unchanged).
        """
        t0 = time.perf_counter()
        outcomes = read_outcomes(
            batch.keys, batch.tags, batch.partition_id, task_path=self.bots.task_id_path, rule=self._bots_rule
        )
        evicted = len(self._bots_evicted)
        outcomes = self._bots_evicted + outcomes
        self._bots_evicted = []
        indices, successes, attempts = aggregate_outcomes(outcomes, self.bots_task_index)
        read_ms = (time.perf_counter() - t0) * 1e3
        select_ms, select_roundtrip_ms = self.bots_sampler.pop_timing()
        if indices.size == 0:
            logger.warning("BOTS: step %s produced no outcomes; posterior not updated", self.global_steps)
            return bots_metrics({}, rollouts=0.0, select_ms=select_ms, read_ms=read_ms)
        t1 = time.perf_counter()
        stats, update_ms = self.bots_sampler.update(indices, successes, attempts)
        update_roundtrip_ms = (time.perf_counter() - t1) * 1e3
        return bots_metrics(
            stats,
            rollouts=float(attempts.sum()),
            select_ms=select_ms,
            update_ms=update_ms,
            select_roundtrip_ms=select_roundtrip_ms,
            update_roundtrip_ms=update_roundtrip_ms,
            read_ms=read_ms,
            evicted_rollouts=float(evicted),
        )

    def step(self, metrics: dict, timing_raw: dict) -> Any:
        """verl's step, then the posterior update (before ``fit`` saves the checkpoint)."""
        batch = super().step(metrics, timing_raw)
        metrics.update(self.bots_update(batch))
        return batch


class BOTSTaskRunner(TaskRunnerV1.__ray_actor_class__):
    """verl's V1 task runner building :class:`BOTSTrainer` (wrap with ``ray.remote(num_cpus=1)``)."""

    def run(self, config: DictConfig) -> None:
        """Run training with :class:`BOTSTrainer` (mirrors ``TaskRunnerV1.run``)."""
        import transfer_queue as tq
        from verl.utils.logging_utils import configure_verl_logging

        configure_verl_logging()
        run_dir = config.bots.run_log.get("dir", None)
        if run_dir:
            # verl's file logger reads this in this process (the driver's environment may not reach Ray workers)
            os.environ["VERL_FILE_LOGGER_PATH"] = os.path.join(os.path.abspath(run_dir), METRICS_FILE)
            # it also truncates the file: keep a resumed run's earlier steps as metrics.part<k>.jsonl
            rotated = rotate_metrics(run_dir)
            if rotated is not None:
                logger.info("kept the previous metrics of %s as %s", run_dir, rotated.name)
        config.transfer_queue.enable = True
        OmegaConf.resolve(config)
        self.config = config
        tq.init(config.transfer_queue)
        succeeded = False
        try:
            self.trainer = BOTSTrainer(config=config)
            self.trainer.init()
            self.init_agent_loop_manager()
            self.trainer.fit(self.agent_loop_manager)
            succeeded = True
        finally:
            try:
                tracking = getattr(self.trainer, "logger", None)
                if tracking is not None:
                    tracking.finish(exit_code=0 if succeeded else 1)
            finally:
                tq.close()
