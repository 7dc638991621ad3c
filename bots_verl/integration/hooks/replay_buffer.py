"""verl's sync replay buffer, rebound for BOTS: dispatch-order tie-breaks, canonical rows, DAPO evictions reported.

verl builds the buffer (with every DAPO argument it computed); :func:`adopt_replay_buffer` rebinds that instance's
class to :class:`BOTSReplayBuffer` and sets what the run asks for. The private steps overridden here are pinned in
:mod:`bots_verl.integration.safety.verl_pins`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping

from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from bots_verl.integration.hooks.canonical_order import canonical_order

logger = logging.getLogger(__name__)

__all__ = ["BOTSReplayBuffer", "EvictionObserver", "adopt_replay_buffer"]

#: ``observer(keys, tags, partition_id)``: receives the trajectories of groups DAPO evicts, before verl deletes them.
EvictionObserver = Callable[[list[str], list[dict], str], None]


def _uid(key: str) -> str:
    return key.split("_")[0]


class BOTSReplayBuffer(ReplayBuffer):
    """verl's sync ``ReplayBuffer`` with deterministic batches and DAPO evictions reported.

    Only three private steps change:

    - ``_select_prompt_uids``: verl orders the finished groups by their prompt's step and then by set order (random
      per process); here ties are broken by the order in which the trainer dispatched the prompts (metadata only).
    - ``_materialize_batch``: with ``bots_canonical_order`` set (a deterministic rollout), the train batch's rows are
      sorted by :func:`~bots_verl.integration.hooks.canonical_order.canonical_order`; otherwise verl's order is kept and
      no response is read.
    - ``_clear_groups``: ``bots_observer(keys, tags, partition_id)`` receives the trajectory keys of the evicted
      and surplus train groups, before verl deletes them: every completed session, also those of a group in which
      another session failed (a failed session wrote no trajectory, so it counts nowhere).
    """

    bots_observer: EvictionObserver | None = None
    bots_dispatch_order: Mapping[str, int] | None = None
    bots_canonical_order: bool = False

    def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
        if self.bots_observer is not None and partition_id == "train" and uids:
            # A group with a failed session stays sampleable in verl's sync buffer: when selected, verl trains on its
            # completed sessions (they reach update_from_trained_batch in the batch). Discarded as DAPO surplus, it must
            # count the same way, so only the trajectories themselves are filtered: a failed session wrote none.
            keys = [
                key
                for key, tag in self.partitions[partition_id].items()
                if _uid(key) in uids and tag.get("status") == "success"
            ]
            if keys:
                self.bots_observer(keys, [self.partitions[partition_id][k] for k in keys], partition_id)
        super()._clear_groups(partition_id, uids)

    def _select_prompt_uids(
        self, partition_id: str, sampleable_keys: set[str], batch_size: int
    ) -> tuple[list[str], dict[str, dict], dict[str, int]]:
        steps = dict(self.prompt_global_steps[partition_id])
        order = self.bots_dispatch_order or {}
        ordered = sorted(sampleable_keys, key=lambda uid: (steps.get(uid, 0), order.get(uid, math.inf), uid))
        return ordered[:batch_size], dict(self.partitions[partition_id]), steps

    def _materialize_batch(
        self, partition_id: str, selected_prompt_uids: list[str], partition_snapshot: dict[str, dict]
    ) -> KVBatchMeta:
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        if partition_id != "train" or not self.bots_canonical_order:
            return batch
        keys, tags = canonical_order(batch.keys, batch.tags, partition_id, self.bots_dispatch_order or {})
        return KVBatchMeta(partition_id=partition_id, keys=keys, tags=tags)


def adopt_replay_buffer(
    buffer: ReplayBuffer,
    *,
    dispatch_order: Mapping[str, int],
    poll_interval: float | None,
    canonical: bool,
    observer: EvictionObserver | None,
) -> ReplayBuffer:
    """Turn the buffer verl built into a :class:`BOTSReplayBuffer` (the same instance).

    Args:
        buffer: what verl's ``_build_replay_buffer`` returned.
        dispatch_order: uid -> dispatch position of the current step's prompts (the trainer keeps it up to date).
        poll_interval: seconds between TransferQueue polls, or None for verl's own.
        canonical: sort the train batch's rows by content (a deterministic rollout).
        observer: receives DAPO-evicted groups (None: DAPO is off).

    Returns:
        The buffer; a custom buffer comes back unchanged when DAPO is off.

    Raises:
        ValueError: for DAPO with a custom buffer (its evictions would never reach the posterior).
    """
    if type(buffer) is not ReplayBuffer:
        if observer is not None:
            raise ValueError(
                f"algorithm.filter_groups with BOTS needs verl's built-in ReplayBuffer, got {type(buffer)}; "
                "evicted groups would never reach the posterior"
            )
        logger.warning("custom replay buffer %s: row order and poll interval are left to it", type(buffer))
        return buffer
    # Rebinding this instance (not verl's class) keeps every DAPO argument verl computed.
    buffer.__class__ = BOTSReplayBuffer
    assert isinstance(buffer, BOTSReplayBuffer)
    if poll_interval is not None:
        buffer.poll_interval = poll_interval
    buffer.bots_dispatch_order = dispatch_order
    buffer.bots_canonical_order = canonical
    buffer.bots_observer = observer
    return buffer
