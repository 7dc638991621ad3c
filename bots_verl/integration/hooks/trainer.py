"""``BOTSTrainer``: verl 0.9.1's sync V1 trainer with BOTS choosing the training tasks.

verl 0.9.1 has no sampler hook, so we extend it at these points, without patching verl's classes (the verl sources
they rely on are pinned in :mod:`bots_verl.integration.safety.verl_pins`):

1. ``_init_dataloader``: after verl built the datasets and its dataloader, map positions to task ids, read the
   reference columns (from the dataset's local copies of the files), create the selector actor and rebuild
   ``train_dataloader`` around :class:`BOTSSampler` with the arguments read off verl's own loader.
2. ``step``: bracket verl's step with the sampler's ``begin_step``/``end_step`` and, after verl's step (rollout,
   reward, update) and **before** ``fit`` writes the checkpoint, read the step's outcomes from TransferQueue,
   aggregate them per task and update the posterior. So ``data.pt`` of step N holds the posterior after step N, and
   the selection for step N+1 already sees step N's evidence.
3. ``_build_replay_buffer``: verl's built-in buffer instance becomes a
   :class:`~bots_verl.integration.hooks.replay_buffer.BOTSReplayBuffer` (dispatch-order tie-breaks; with the
   deterministic ``hf`` rollout, rows in :mod:`~bots_verl.integration.hooks.canonical_order`; with DAPO, the evicted
   groups reported to :meth:`BOTSTrainer._bots_observe_evicted`).
4. ``_fetch_one_gen_batch`` records the order in which prompts were dispatched (so it counts the step's prompts);
   ``_add_prompts_to_generate`` (verl's ``refill_fn``) refuses a refill past the step's generation-batch cap,
   ``algorithm.filter_groups.max_num_gen_batches`` (:mod:`~bots_verl.integration.safety.refill_cap`), which verl
   0.9.1's V1 replay buffer ignores: it would refill a step for ever.
5. ``init`` (before any worker starts) runs the resume checks
   (:func:`~bots_verl.integration.safety.resume.check_resume`: a missing ``data.pt``, or one with no BOTS sampler
   state, is refused) and ``_init_dataloader`` compares the checkpoint's fingerprint with the pool and reference
   columns verl just read (:mod:`bots_verl.integration.safety.fingerprint`), unless ``bots.resume.accept_changed``
   accepts the change; ``_load_checkpoint`` refuses a ``data.pt`` that torchdata found empty.

The run's BOTS settings come from the driver, resolved and checked there once (:mod:`bots_verl.config.settings`, handed
on by the task runner): the trainer reads no yaml, and hands the selector's settings to the selector's actor.

The task runner that builds it is :mod:`bots_verl.integration.hooks.task_runner`.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig
from torchdata.stateful_dataloader import StatefulDataLoader
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from bots_verl.config.bots_config import BOTSConfig
from bots_verl.config.settings import BOTSSettings
from bots_verl.config.verl_checks import check_data_subset, check_verl_compat, dapo_enabled
from bots_verl.integration.evidence.embeddings import (
    TaskEmbeddings,
    check_reference_values,
    load_task_embeddings,
    pool_task_ids,
)
from bots_verl.integration.evidence.outcomes import Outcome, SuccessRule, aggregate_outcomes, read_outcomes
from bots_verl.integration.evidence.task_index import (
    TaskIndex,
    dataset_data_files,
    dataset_task_ids,
    read_reference_columns,
)
from bots_verl.integration.hooks.canonical_order import wants_canonical_order
from bots_verl.integration.hooks.replay_buffer import adopt_replay_buffer
from bots_verl.integration.hooks.step_metrics import bots_metrics
from bots_verl.integration.safety.fingerprint import dataset_prompts_digest, run_fingerprint
from bots_verl.integration.safety.refill_cap import read_refill_cap
from bots_verl.integration.safety.resume import ResumePoint, check_resume, missing_data_pt_message
from bots_verl.integration.transport.placement import posterior_placement
from bots_verl.integration.transport.sampler import BOTSSampler
from bots_verl.integration.transport.selector_client import SelectorClient
from bots_verl.integration.transport.selector_service import create_selector_service
from bots_verl.runlog import (
    EVICTED_ROLLOUTS_STAT,
    PADDING_ROWS_STAT,
    POSTERIOR_ROLLOUTS_TOTAL_STAT,
    READ_MS_STAT,
    ROLLOUTS_STAT,
    SELECT_MS_STAT,
    SELECT_ROUNDTRIP_MS_STAT,
    UPDATE_MS_STAT,
    UPDATE_ROUNDTRIP_MS_STAT,
)

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

__all__ = ["BOTSTrainer"]


class BOTSTrainer(PPOTrainerSync):
    """``PPOTrainerSync`` whose training tasks are chosen by a BOTS selector living in a Ray actor.

    Args:
        config: the composed ``bots_trainer`` config.
        settings: the run's BOTS settings, resolved and checked once by the driver (``bots_verl.main.check_config``).

    Raises:
        ValueError: for incompatible verl settings.
    """

    def __init__(self, config: DictConfig, settings: BOTSSettings) -> None:
        self.bots_settings = settings
        self.bots: BOTSConfig = settings.section
        check_verl_compat(config)
        check_data_subset(config)
        self._bots_dapo = dapo_enabled(config)
        self._bots_refill_cap = read_refill_cap(config)
        # inside verl's step (the async warm-up, outside any step, is no step's refill); the step's prompts are its
        # dispatch order's entries
        self._bots_in_step = False
        self._bots_rule = SuccessRule(self.bots.success.rule, self.bots.success.threshold)
        # evidence gathered during the current step (DAPO evictions); flushed with the step's batch
        self._bots_evicted: list[Outcome] = []
        # uid -> dispatch position of the prompts of the current step (deterministic row order)
        self._bots_dispatch_order: dict[str, int] = {}
        self._bots_dispatch_counter: Iterator[int] = itertools.count()
        self.bots_sampler: BOTSSampler | None = None
        self.bots_task_index: TaskIndex | None = None
        # the checkpoint init() found to resume from, for the fingerprint check once the pool is known
        self._bots_resume: ResumePoint | None = None
        super().__init__(config)

    # -------------------------------------------------------------------------------------------- construction
    def _build_replay_buffer(self) -> ReplayBuffer:
        return adopt_replay_buffer(
            super()._build_replay_buffer(),
            dispatch_order=self._bots_dispatch_order,
            poll_interval=self.bots.replay_poll_interval,
            canonical=wants_canonical_order(self.config),
            observer=self._bots_observe_evicted if self._bots_dapo else None,
        )

    def _init_dataloader(self) -> None:
        super()._init_dataloader()
        path = self.bots.task_id_path
        self.bots_task_index = TaskIndex(dataset_task_ids(self.train_dataset, path), self.bots.task_id_field)
        reference = None
        if self.bots.reference_columns:
            # verl's dataset read local copies of data.train_files (copy_to_local); read the same files
            files = dataset_data_files(self.train_dataset)
            reference = read_reference_columns(files, self.bots.reference_columns, path, self.bots_task_index)
            labelled = check_reference_values(reference, self.bots.reference_columns, str(files))
            if labelled < len(self.bots_task_index):
                logger.info(
                    "BOTS: reference columns on %d of %d tasks; the rest are NaN (the selector's NaN policy applies)",
                    labelled,
                    len(self.bots_task_index),
                )
        embeddings = self._bots_read_embeddings()
        num_tasks = len(self.bots_task_index)
        fingerprint = self._bots_fingerprint(reference, embeddings)
        if self._bots_resume is not None:
            # verl built the dataset (the pool as the run sees it) and no worker has started: refuse a checkpoint
            # whose posterior means something else before the actor is loaded with it
            self._bots_resume.check_fingerprint(fingerprint, self.bots.resume.accept_changed)
        service = create_selector_service(
            self.bots.actor.name,
            self.bots.actor.namespace,
            placement=posterior_placement(self.bots.actor.node_resource),
            settings=self.bots_settings.selector,
            num_tasks=num_tasks,
            reference_pass_rates=reference,
            task_embeddings=None if embeddings is None else embeddings.vectors,
        )
        self.bots_sampler = BOTSSampler(
            SelectorClient(service),
            num_tasks,
            self.config.data.train_batch_size,
            self.bots_task_index.task_ids,
            fingerprint,
        )
        self.train_dataloader = _with_sampler(self.train_dataloader, self.bots_sampler)
        self.train_dataloader_it = None
        logger.info(
            "BOTS: selector=%s over %d tasks (reference columns %s, task embeddings %s)",
            self.bots.selector,
            num_tasks,
            list(self.bots.reference_columns),
            self.bots.task_embeddings or "none",
        )

    def _bots_read_embeddings(self) -> TaskEmbeddings | None:
        """``bots.task_embeddings`` aligned to the pool verl built (rows of tasks verl dropped are left out)."""
        if not self.bots.task_embeddings:
            return None
        files = dataset_data_files(self.train_dataset)
        return load_task_embeddings(
            self.bots.task_embeddings,
            self.bots_task_index.task_ids,
            pool_task_ids(files, self.bots.task_id_path),
        )

    def _bots_fingerprint(self, reference: Any, embeddings: TaskEmbeddings | None = None) -> dict[str, Any]:
        """This run's fingerprint: the pool verl built, the reference values and task embeddings read for it, the
        selector's hparams."""
        return run_fingerprint(
            task_ids=self.bots_task_index.task_ids,
            prompts_sha256=dataset_prompts_digest(self.train_dataset, self.config.data.get("prompt_key", "prompt")),
            reference_columns=self.bots.reference_columns,
            reference=reference,
            task_embeddings_sha256=None if embeddings is None else embeddings.sha256,
            selector=self.bots_settings.selector.name,
            hparams=dict(self.bots_settings.selector.effective),
            success_rule=self.bots.success.rule,
            success_threshold=self.bots.success.threshold,
        )

    def _fetch_one_gen_batch(self):
        batch = super()._fetch_one_gen_batch()
        for uid in list(batch["uid"]):
            self._bots_dispatch_order[str(uid)] = next(self._bots_dispatch_counter)
        return batch

    def _add_prompts_to_generate(self, num_prompts: int) -> int:
        """verl's ``refill_fn``: refused (``TooManyGenBatchesError``) past the step's generation-batch cap.

        Raised inside verl's ``ReplayBuffer.sample``, the error ends ``fit()`` before the step's posterior update and
        checkpoint (:mod:`~bots_verl.integration.safety.refill_cap`).
        """
        if self._bots_in_step:
            self._bots_refill_cap.check(self.global_steps, len(self._bots_dispatch_order), num_prompts)
        return super()._add_prompts_to_generate(num_prompts)

    def init(self) -> None:
        """verl's ``init``, after refusing at once a resume whose ``data.pt`` is missing or holds no BOTS state.

        The checkpoint's fingerprint is compared with this run's in ``_init_dataloader``, which verl's ``init`` calls
        first: the pool is known only once verl built the dataset, and workers start only after it.
        """
        self._bots_resume = check_resume(self.config)
        super().init()

    def _load_checkpoint(self):
        super()._load_checkpoint()
        # torchdata keeps a loaded state for the next iterator; none means data.pt was missing or empty
        if self.global_steps > 0 and getattr(self.train_dataloader, "next_iter_state", None) is None:
            raise FileNotFoundError(missing_data_pt_message(f"global_step_{self.global_steps}"))

    # -------------------------------------------------------------------------------------------- evidence
    def _bots_observe_evicted(self, keys: list[str], tags: list[dict], partition_id: str) -> None:
        self._bots_evicted.extend(
            read_outcomes(keys, tags, partition_id, task_path=self.bots.task_id_path, rule=self._bots_rule)
        )

    def update_from_trained_batch(self, batch: Any) -> dict[str, float]:
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
        select_ms, select_roundtrip_ms = self.bots_sampler.client.pop_timing()
        padding = float(sum(1 for tag in batch.tags if tag.get("is_padding", False)))
        if indices.size == 0:
            logger.warning("BOTS: step %s produced no outcomes; posterior not updated", self.global_steps)
            dispatch = self.bots_sampler.end_step()
            return bots_metrics(
                {},
                {ROLLOUTS_STAT: 0.0, SELECT_MS_STAT: select_ms, READ_MS_STAT: read_ms, PADDING_ROWS_STAT: padding}
                | dispatch,
            )
        t1 = time.perf_counter()
        # [async] the age of each task's evidence; None in sync mode (lag 0, the paper's update exactly)
        lags = self._bots_lags(batch, outcomes, indices)
        stats, update_ms = self.bots_sampler.forward_update(indices, successes, attempts, lags)
        update_roundtrip_ms = (time.perf_counter() - t1) * 1e3
        dispatch = self.bots_sampler.end_step()
        return bots_metrics(
            stats,
            {
                ROLLOUTS_STAT: float(attempts.sum()),
                POSTERIOR_ROLLOUTS_TOTAL_STAT: self.bots_sampler.rollouts_received,
                SELECT_MS_STAT: select_ms,
                UPDATE_MS_STAT: update_ms,
                SELECT_ROUNDTRIP_MS_STAT: select_roundtrip_ms,
                UPDATE_ROUNDTRIP_MS_STAT: update_roundtrip_ms,
                READ_MS_STAT: read_ms,
                EVICTED_ROLLOUTS_STAT: float(evicted),
                PADDING_ROWS_STAT: padding,
            }
            | dispatch,
        )

    def _bots_lags(self, batch: Any, outcomes: list[Outcome], indices: Any) -> Any:
        """Per-task policy lags of this step's evidence: None here (sync: every rollout is from the trained policy);
        the asynchronous trainers (:mod:`bots_verl.integration.hooks.async_trainer`) read them from the trajectory
        tags."""
        return None

    def step(self, metrics: dict, timing_raw: dict) -> Any:
        """verl's step between the sampler's step brackets, then the posterior update (before the checkpoint)."""
        self._bots_dispatch_order.clear()
        self._bots_dispatch_counter = itertools.count()
        self.bots_sampler.begin_step(self.global_steps)
        self._bots_in_step = True
        try:
            batch = super().step(metrics, timing_raw)
        finally:
            self._bots_in_step = False
        metrics.update(self.update_from_trained_batch(batch))
        return batch


def _with_sampler(loader: StatefulDataLoader, sampler: BOTSSampler) -> StatefulDataLoader:
    """A copy of verl's train dataloader (same dataset, batch size, collate function, ...) drawing from ``sampler``.

    The arguments are read off the loader verl built, so a change in how verl builds it carries over; only the
    sampler differs (a DataLoader's sampler cannot be replaced after construction).
    """
    if loader.num_workers != 0:
        raise ValueError(f"data.dataloader_num_workers={loader.num_workers}: BOTS needs 0")
    return StatefulDataLoader(
        dataset=loader.dataset,
        batch_size=loader.batch_size,
        sampler=sampler,
        num_workers=0,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
    )
