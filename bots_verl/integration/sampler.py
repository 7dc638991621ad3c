"""A torchdata-``Stateful`` sampler that yields the posterior actor's selections.

``BOTSSampler`` asks the actor for one batch of ``select_size`` unique tasks (``data.train_batch_size``) whenever its
buffer is empty, and yields the indices one by one; torchdata's ``BatchSampler`` groups them into dataloader batches
(``data.gen_batch_size``, or 1 under DAPO). Selection is lazy, so with ``num_workers=0`` the batch of step t+1 is
drawn after step t's evidence reached the posterior: zero lag.

Checkpointing rides on torchdata: ``StatefulDataLoader.state_dict()`` stores ``sampler.state_dict()`` because the
sampler has ``state_dict``/``load_state_dict``. The state holds the actor's whole selector state (RNG included), the
buffered indices and the pool's task ids, so verl's ``global_step_N/data.pt`` restores exactly; torchdata does not
fast-forward a Stateful sampler, so no selection is replayed. ``load_state_dict`` is applied lazily by
``StatefulDataLoader`` at the next ``iter()``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from bots_verl.integration.actor import from_torch_safe, to_torch_safe

logger = logging.getLogger(__name__)

__all__ = ["BOTSSampler", "PosteriorLostError"]

STATE_VERSION = 1


class PosteriorLostError(RuntimeError):
    """The posterior actor died or was re-created with another state; resume from the last checkpoint."""


class BOTSSampler(torch.utils.data.Sampler[int]):
    """Yields the posterior actor's selections; Stateful for torchdata checkpoints.

    Args:
        actor: handle of the :class:`~bots_verl.integration.actor.PosteriorService` actor.
        num_tasks: pool size (dataset length).
        select_size: tasks per selection (``data.train_batch_size``).
        task_ids: the task id of each dataset position; stored in checkpoints to detect a changed pool.

    Raises:
        ValueError: if ``select_size`` is not in ``[1, num_tasks]`` or ``task_ids`` has the wrong length.
    """

    def __init__(self, actor: Any, num_tasks: int, select_size: int, task_ids: Sequence[int | str]) -> None:
        if not 1 <= select_size <= num_tasks:
            raise ValueError(f"select_size={select_size} must be in [1, {num_tasks}] (train_batch_size vs pool size)")
        if len(task_ids) != num_tasks:
            raise ValueError(f"{len(task_ids)} task ids for {num_tasks} tasks")
        self.actor = actor
        self.num_tasks = int(num_tasks)
        self.select_size = int(select_size)
        self.task_ids = list(task_ids)
        self._pending: list[int] = []
        self._incarnation: str | None = None
        self.select_ms = 0.0  # actor-side selection time since the last ``pop_timing``
        self.select_roundtrip_ms = 0.0  # the same including the Ray round trip

    def __len__(self) -> int:
        # nominal epoch (verl computes steps_per_epoch from the dataset length, not from here)
        return self.num_tasks

    def __iter__(self) -> Iterator[int]:
        # Endless: verl re-creates the iterator on StopIteration anyway, and the posterior has no notion of epochs.
        # Reads self._pending on every step so a load_state_dict between iterators is honoured.
        while True:
            if not self._pending:
                self._refill()
            yield self._pending.pop(0)

    # ------------------------------------------------------------------------------------------------ actor calls
    def _call(self, method: str, *args: Any) -> Any:
        import ray

        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except ray.exceptions.RayActorError as exc:
            raise PosteriorLostError(
                "the BOTS posterior actor died; its state is lost for this process. Resume from the last "
                "checkpoint (trainer.resume_mode=auto) to restore it from data.pt"
            ) from exc

    def _check_incarnation(self, token: str) -> None:
        if self._incarnation is None:
            self._incarnation = token
        elif token != self._incarnation:
            raise PosteriorLostError(
                "the BOTS posterior actor was re-created (restarted with the prior?) behind the trainer's back; "
                "refusing to continue from a reset posterior. Resume from the last checkpoint"
            )

    def _refill(self) -> None:
        t0 = time.perf_counter()
        indices, token, ms = self._call("select", self.select_size)
        self._check_incarnation(token)
        self.select_ms += ms
        self.select_roundtrip_ms += (time.perf_counter() - t0) * 1e3
        self._pending = [int(i) for i in np.asarray(indices)]

    def update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> tuple[dict, float]:
        """Send one step's evidence to the actor.

        Returns:
            ``(stats, update_ms)``: the selector's statistics after the update and the actor-side update time.

        Raises:
            ValueError: for invalid evidence (the posterior is unchanged).
            PosteriorLostError: if the actor died or was re-created.
        """
        stats, token, ms = self._call("update", indices, successes, attempts)
        self._check_incarnation(token)
        return stats, ms

    def pop_timing(self) -> tuple[float, float]:
        """``(select_ms, select_roundtrip_ms)`` accumulated since the last call, then reset."""
        out = (self.select_ms, self.select_roundtrip_ms)
        self.select_ms = self.select_roundtrip_ms = 0.0
        return out

    # ------------------------------------------------------------------------------------------------ Stateful
    def state_dict(self) -> dict[str, Any]:
        """The selector state (pulled from the actor), buffered indices and task ids; torch-loadable."""
        selector_state, token = self._call("state_dict")
        self._check_incarnation(token)
        return {
            "version": STATE_VERSION,
            "selector_state": to_torch_safe(selector_state),
            "pending": list(self._pending),
            "select_size": self.select_size,
            "task_ids": list(self.task_ids),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Push a checkpointed state into the actor.

        Raises:
            ValueError: for another state version, a different pool (task ids) or a selector state the actor
                rejects; nothing changes then.
        """
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported BOTS sampler state version {state.get('version')!r}")
        if list(state["task_ids"]) != self.task_ids:
            raise ValueError(
                "the checkpoint's task pool differs from this run's (bots.task_id_field values or their order "
                "changed, e.g. other data files, train_max_samples or filtering); refusing to resume"
            )
        if int(state["select_size"]) != self.select_size:
            logger.warning("train_batch_size changed from %s to %s on resume", state["select_size"], self.select_size)
        token = self._call("load_state_dict", from_torch_safe(state["selector_state"]))
        self._incarnation = token
        self._pending = [int(i) for i in state["pending"]]
