"""Tasks whose rollouts are still in flight, for verl's asynchronous trainers.

In ``colocate_async`` and ``separate_async`` modes verl asks the dataloader for prompts ahead of the rewards of the
earlier ones: a warm-up batch before the first step, one batch per step, and one prompt for each group it evicts (too
stale, failed, or DAPO-filtered). When the sampler selects, tasks dispatched earlier may still be generating. Their
evidence has not reached the posterior, so their posterior is what it was when they were chosen, and Thompson
sampling would likely choose them again: the same task twice in flight, both groups drawn on the same information.

**The rule** (:class:`InflightLedger`): a task with a group in flight is left out of the next selection, as a task
already dispatched in the same step is; a group stops blocking its task once it has left TransferQueue's prompt
registry (trained, or evicted by verl's replay buffer), or once it is older than verl's
``trainer.v1.sampler.max_off_policy_threshold`` (verl's ``drop`` strategy would evict it when it finishes; a rollout
that never returns must not block its task for ever). When the pool without the blocked tasks cannot fill a
selection, the selector's best-ranked blocked tasks fill it (``bots/inflight_fallbacks``): training never stalls on
the exclusion. Given the seed and the order of events, the choice is deterministic (the actor's ranking, then the
ledger's dispatch order).

The ledger only shapes selection. Which evidence reaches the posterior is decided elsewhere, by the trainer: the
outcomes of the groups verl trains on, each weighed by its age (:mod:`bots_verl.integration.evidence.staleness`),
nothing else.

**Checkpoints.** The ledger rides in the sampler's state (``data.pt``). verl saves TransferQueue beside it in the async
modes, with the same prompt uids (pending and running prompts are re-issued under their uid on resume), so after a
resume the ledger still names exactly the groups in flight; their evidence arrives when verl trains them, once.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from bots_verl.core.validation import check_count

logger = logging.getLogger(__name__)

__all__ = ["InflightLedger"]


class InflightLedger:
    """Groups dispatched and not yet trained or evicted: prompt uid -> (dataset position, step dispatched).

    Args:
        stale_after: a group dispatched at step ``d`` stops blocking its task at step ``t`` once
            ``t - d + 1 > stale_after`` (verl's span convention for ``max_off_policy_threshold``); None: never.

    Raises:
        ValueError: for a ``stale_after`` that is not a positive integer or None.
    """

    def __init__(self, stale_after: int | None = None) -> None:
        if stale_after is not None and (
            isinstance(stale_after, bool) or not isinstance(stale_after, int) or stale_after < 1
        ):
            raise ValueError(f"stale_after must be a positive integer or None, got {stale_after!r}")
        self.stale_after = stale_after
        self._entries: dict[str, tuple[int, int]] = {}
        # positions yielded by the sampler whose prompt uid verl has not assigned yet (it does so right after a fetch)
        self._unbound: list[int] = []
        self.clock = 0  # the latest training step the ledger heard of

    def __len__(self) -> int:
        return len(self._entries)

    def dispatched(self, position: int) -> None:
        """The sampler yielded ``position``; its uid comes with the next :meth:`bind`."""
        self._unbound.append(int(position))

    def bind(self, uids: Iterable[str], step: int) -> None:
        """verl assigned ``uids`` to the last yielded positions, in order, at training step ``step``.

        Raises:
            ValueError: if more uids come than positions were yielded, or a uid is already in flight.
        """
        uids = [str(u) for u in uids]
        if len(uids) > len(self._unbound):
            raise ValueError(f"{len(uids)} prompt uids for {len(self._unbound)} dispatched positions")
        repeated = [u for u in uids if u in self._entries]
        if repeated:
            raise ValueError(f"prompt uids already in flight: {repeated[:5]}")
        step = int(step)
        self.clock = max(self.clock, step)
        positions, self._unbound = self._unbound[: len(uids)], self._unbound[len(uids) :]
        for uid, position in zip(uids, positions, strict=True):
            self._entries[uid] = (position, step)

    def tick(self, step: int) -> None:
        """Training step ``step`` began."""
        self.clock = max(self.clock, int(step))

    def retain(self, registered: Collection[str]) -> int:
        """Keep only the groups whose prompt is still registered in TransferQueue; returns how many left.

        verl deletes a prompt's key when the replay buffer takes its group into a training batch and when it evicts
        the group (stale, failed, DAPO-filtered), so what is left is exactly what is pending, running, or finished
        and waiting to be trained.
        """
        gone = [uid for uid in self._entries if uid not in registered]
        for uid in gone:
            del self._entries[uid]
        return len(gone)

    def blocking(self) -> list[int]:
        """Positions that should sit out the next selection, in dispatch order (a position once)."""
        out: dict[int, None] = {}
        for position, step in self._entries.values():
            if self.stale_after is None or self.clock - step + 1 <= self.stale_after:
                out[position] = None
        return list(out)

    def positions(self) -> dict[str, int]:
        """uid -> position of every group in flight (for logs and tests)."""
        return {uid: position for uid, (position, _) in self._entries.items()}

    # ------------------------------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Plain lists and ints (torch-loadable); positions yielded but not bound yet are not kept (verl binds them
        in the same fetch, so there are none between steps, where checkpoints are written)."""
        if self._unbound:
            logger.warning("checkpointing %d dispatched positions without a prompt uid", len(self._unbound))
        return {
            "entries": [[uid, position, step] for uid, (position, step) in self._entries.items()],
            "clock": self.clock,
        }

    def load_state_dict(self, state: Mapping[str, Any], num_tasks: int) -> None:
        """Restore :meth:`state_dict`, checked whole first.

        Raises:
            ValueError: for a malformed entry, a position outside ``[0, num_tasks)`` or a repeated uid; nothing
                changes then.
        """
        if not isinstance(state, Mapping) or "entries" not in state:
            raise ValueError(f"in-flight ledger state must be a dict with 'entries', got {state!r}")
        clock = check_count("in-flight ledger clock", state.get("clock", 0))
        entries: dict[str, tuple[int, int]] = {}
        for entry in state["entries"]:
            if not isinstance(entry, list | tuple) or len(entry) != 3 or not isinstance(entry[0], str):
                raise ValueError(f"in-flight ledger entry must be [uid, position, step], got {entry!r}")
            uid = entry[0]
            position = check_count("in-flight ledger position", entry[1], num_tasks - 1)
            step = check_count("in-flight ledger step", entry[2])
            if uid in entries:
                raise ValueError(f"in-flight ledger repeats uid {uid!r}")
            entries[uid] = (position, step)
        self._entries, self._unbound, self.clock = entries, [], clock
