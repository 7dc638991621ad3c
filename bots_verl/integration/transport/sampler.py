"""A torchdata-``Stateful`` sampler that yields the selector service's selections, one training step at a time.

verl fetches prompts from the dataloader at the start of every step (``train_batch_size`` of them, in chunks of
``data.gen_batch_size``) and, with DAPO (``algorithm.filter_groups``) or ``sync_refill_failed_groups``, again in the
middle of the step, one prompt per fetch, to replace evicted groups. The trainer brackets each step with
:meth:`BOTSSampler.begin_step` and :meth:`BOTSSampler.end_step`, and the sampler guarantees:

- **Zero lag.** Every index served in step t was selected after step t-1's evidence reached the posterior: a
  posterior update drops the selections not served yet (DAPO refills may leave some), and selection is lazy
  (``num_workers=0``), so nothing is drawn ahead.
- **No task twice in a step.** Between two posterior updates a refill asks the service for ``d + select_size`` tasks
  (``d`` = tasks already dispatched since the update) and keeps, in the selector's rank order, those not dispatched
  yet. For the Thompson-sampling selectors this is "the best ``k`` of a fresh draw among the tasks not yet
  dispatched". Only when every task of the pool was dispatched in one step does a task come twice (counted in
  ``bots/repeat_dispatches``). A refill therefore never re-dispatches a task that DAPO evicted in the same step.
- Without refills a step asks the service for exactly ``select_size`` tasks, as an uninterrupted selection would.

The selections come from the selector service through a
:class:`~bots_verl.integration.transport.selector_client.SelectorClient` (the Ray hop, the incarnation check and the
timings live there); this module decides only which of them to serve, in which order, and when they go stale.

Checkpointing rides on torchdata: ``StatefulDataLoader.state_dict()`` stores ``sampler.state_dict()`` because the
sampler has ``state_dict``/``load_state_dict``. The state holds the service's whole selector state (RNG included), the
pool's task ids, the run's fingerprint (:mod:`bots_verl.integration.safety.fingerprint`: what the posterior means,
checked on resume), the number of updates and rollouts the posterior has received, and the per-step log of dispatched
positions (:meth:`BOTSSampler.dispatch_log`), so verl's ``global_step_N/data.pt`` restores exactly; torchdata does
not fast-forward a Stateful sampler, so no selection is replayed. ``load_state_dict`` is applied lazily by
``StatefulDataLoader`` at the next ``iter()``. The state's versions and encoding:
:mod:`bots_verl.integration.transport.sampler_state`.

In verl's asynchronous modes the sampler also holds an
:class:`~bots_verl.integration.transport.inflight.InflightLedger`: tasks whose groups are still in flight sit out the
next selection while the pool allows (see that module), and the ledger is part of the state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from bots_verl.integration.transport.inflight import InflightLedger
from bots_verl.integration.transport.sampler_state import READABLE_STATE_VERSIONS, STATE_VERSION
from bots_verl.integration.transport.selector_client import SelectorClient
from bots_verl.runlog import (
    DISPATCHED_STAT,
    INFLIGHT_FALLBACKS_STAT,
    INFLIGHT_GROUPS_STAT,
    REPEAT_DISPATCHES_STAT,
    STALE_DISPATCHES_STAT,
)

logger = logging.getLogger(__name__)

__all__ = ["BOTSSampler"]


class BOTSSampler(torch.utils.data.Sampler[int]):
    """Yields the selector service's selections; Stateful for torchdata checkpoints.

    Args:
        client: the client of the run's selector service.
        num_tasks: pool size (dataset length).
        select_size: tasks per selection (``data.train_batch_size``).
        task_ids: the task id of each dataset position; stored in checkpoints to detect a changed pool.
        fingerprint: what the posterior means (pool, reference columns, selector;
            :func:`~bots_verl.integration.safety.fingerprint.run_fingerprint`), stored in checkpoints for the resume
            check.
        inflight: the in-flight ledger of an asynchronous run (None: synchronous, nothing is in flight between
            steps).
        registered_prompts: returns the prompt uids TransferQueue still holds (pending, running, or finished and
            not trained); the ledger forgets the others before each selection, update and checkpoint.

    Raises:
        ValueError: if ``select_size`` is not in ``[1, num_tasks]`` or ``task_ids`` has the wrong length.
    """

    def __init__(
        self,
        client: SelectorClient,
        num_tasks: int,
        select_size: int,
        task_ids: Sequence[int | str],
        fingerprint: dict[str, Any] | None = None,
        inflight: InflightLedger | None = None,
        registered_prompts: Callable[[], Collection[str]] | None = None,
    ) -> None:
        if not 1 <= select_size <= num_tasks:
            raise ValueError(f"select_size={select_size} must be in [1, {num_tasks}] (train_batch_size vs pool size)")
        if len(task_ids) != num_tasks:
            raise ValueError(f"{len(task_ids)} task ids for {num_tasks} tasks")
        self.client = client
        self.num_tasks = int(num_tasks)
        self.select_size = int(select_size)
        self.task_ids = list(task_ids)
        self.fingerprint = fingerprint
        self.inflight = inflight
        self._registered_prompts = registered_prompts
        self._inflight_fallbacks = 0  # in-flight tasks selected again because the rest of the pool could not fill
        self._pending: list[int] = []
        self._pending_version = 0  # number of posterior updates when _pending was selected
        self._updates = 0  # posterior updates sent through this sampler (restored from checkpoints)
        self._rollouts_received = 0.0  # rollouts the posterior received in those updates
        self._step: int | None = None
        self._dispatched: list[int] = []  # positions served in the current step, in order
        self._exclude: set[int] = set()  # positions served since the last posterior update
        self._stale = 0
        self._repeats = 0
        self._log: list[tuple[int, list[int]]] = []

    def __len__(self) -> int:
        # nominal epoch (verl computes steps_per_epoch from the dataset length, not from here)
        return self.num_tasks

    def __iter__(self) -> Iterator[int]:
        # Endless: verl re-creates the iterator on StopIteration anyway, and the posterior has no notion of epochs.
        # Reads self._pending on every step so a load_state_dict or begin_step between iterators is honoured.
        while True:
            if not self._pending:
                self._refill()
            index = self._pending.pop(0)
            if self._pending_version != self._updates:
                self._stale += 1
            if index in self._exclude:
                self._repeats += 1
            self._exclude.add(index)
            self._dispatched.append(index)
            if self.inflight is not None:
                self.inflight.dispatched(index)
            yield index

    # ------------------------------------------------------------------------------------------------ steps
    def begin_step(self, step: int) -> None:
        """Start training step ``step`` (labels the dispatch log and resets the step's figures)."""
        self._step = int(step)
        self._dispatched = []
        self._stale = 0
        self._repeats = 0
        self._inflight_fallbacks = 0
        if self.inflight is not None:
            self.inflight.tick(step)

    def end_step(self) -> dict[str, float]:
        """Close the current step: log its dispatched positions; returns the step's dispatch figures.

        Returns:
            ``dispatched`` (prompts served this step, refills included), ``stale_dispatches`` (served from a
            selection made before the latest posterior update; 0 by construction) and ``repeat_dispatches`` (a task
            served again within the step; only when the whole pool was dispatched).
        """
        if self._step is not None:
            self._log.append((self._step, list(self._dispatched)))
        figures = {
            DISPATCHED_STAT: float(len(self._dispatched)),
            STALE_DISPATCHES_STAT: float(self._stale),
            REPEAT_DISPATCHES_STAT: float(self._repeats),
        }
        if self.inflight is not None:
            figures[INFLIGHT_GROUPS_STAT] = float(len(self.inflight))
            figures[INFLIGHT_FALLBACKS_STAT] = float(self._inflight_fallbacks)
        return figures

    def track_inflight(self, ledger: InflightLedger, registered_prompts: Callable[[], Collection[str]] | None) -> None:
        """Switch on the in-flight rule of the asynchronous modes (before the first selection or state load).

        Args:
            ledger: the (empty) ledger; a checkpoint's ledger is loaded into it by :meth:`load_state_dict`.
            registered_prompts: returns the prompt uids TransferQueue still holds.
        """
        self.inflight = ledger
        self._registered_prompts = registered_prompts

    def bind_uids(self, uids: Sequence[str], step: int) -> None:
        """verl gave the prompts just fetched (the last ``len(uids)`` positions yielded) these uids at ``step``.

        Only the in-flight ledger of an asynchronous run needs them; a synchronous sampler ignores the call.
        """
        if self.inflight is not None:
            self.inflight.bind(uids, step)

    def _reconcile_inflight(self) -> None:
        """Forget in-flight groups whose prompt TransferQueue no longer holds (trained or evicted)."""
        if self.inflight is not None and self._registered_prompts is not None:
            self.inflight.retain(set(self._registered_prompts()))

    def dispatch_log(self) -> list[tuple[int, list[int]]]:
        """``(step, positions)`` for every closed step, in order (restored from checkpoints)."""
        return [(step, list(positions)) for step, positions in self._log]

    @property
    def updates(self) -> int:
        """Posterior updates received so far (across resumes)."""
        return self._updates

    @property
    def rollouts_received(self) -> float:
        """Rollouts the posterior received so far (across resumes)."""
        return self._rollouts_received

    # ------------------------------------------------------------------------------------------------ selections
    def _refill(self) -> None:
        exclude = self._exclude
        if len(exclude) >= self.num_tasks:
            logger.warning("every task of the pool was dispatched in step %s; tasks now come a second time", self._step)
            exclude = set()
        # Async modes: tasks with a group in flight sit out too (empty in sync mode, so sync selects as before).
        self._reconcile_inflight()
        blocked = [] if self.inflight is None else [p for p in self.inflight.blocking() if p not in exclude]
        want = min(self.num_tasks, len(exclude) + len(blocked) + self.select_size)
        ranked = self.client.select(want)
        sitting_out = set(blocked)
        self._pending = [i for i in ranked if i not in exclude and i not in sitting_out]
        short = self.select_size - len(self._pending)
        if blocked and short > 0:
            # The pool without the in-flight tasks cannot fill a selection: the selector's best-ranked in-flight
            # tasks fill it, rather than stalling training (their earlier groups' evidence is still to come).
            fill = [i for i in ranked if i in sitting_out][:short]
            self._pending.extend(fill)
            self._inflight_fallbacks += len(fill)
        self._pending_version = self._updates

    def forward_update(
        self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray, lags: np.ndarray | None = None
    ) -> tuple[dict[str, float], float]:
        """Forward one step's evidence to the selector service and drop the selections made before it.

        Args:
            indices, successes, attempts: per task trained this step (see ``Selector.update``).
            lags: per task, how many policy versions old its rollouts are (asynchronous modes); None: all 0.

        Returns:
            ``(stats, update_ms)``: the selector's statistics after the update and the service-side update time.

        Raises:
            ValueError: for invalid evidence (the posterior is unchanged).
            PosteriorLostError: if the actor died or was re-created.
        """
        stats, ms = self.client.remote_update(indices, successes, attempts, lags)
        self._updates += 1
        self._rollouts_received += float(np.sum(attempts))
        # selections made before this update are stale: never serve them
        self._pending = []
        self._exclude = set()
        self._reconcile_inflight()
        return stats, ms

    # ------------------------------------------------------------------------------------------------ Stateful
    def state_dict(self) -> dict[str, Any]:
        """The selector state (pulled from the service), counters, dispatch log, task ids and this run's fingerprint
        (a resumed run stores its own: the resume check accepted it); torch-loadable."""
        selector_state = self.client.pull_state()
        self._reconcile_inflight()
        return {
            "version": STATE_VERSION,
            "selector_state": selector_state,
            "pending": list(self._pending),
            "select_size": self.select_size,
            "task_ids": list(self.task_ids),
            "updates": self._updates,
            # stored as "attempts": the key every data.pt written so far carries
            "attempts": self._rollouts_received,
            "dispatch_log": [[step, list(positions)] for step, positions in self._log],
            "fingerprint": self.fingerprint,
            "inflight": None if self.inflight is None else self.inflight.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Push a checkpointed state into the selector service.

        Raises:
            ValueError: for another state version, a different pool (task ids) or a selector state the service
                rejects; nothing changes then.
        """
        if state.get("version") not in READABLE_STATE_VERSIONS:
            raise ValueError(f"unsupported BOTS sampler state version {state.get('version')!r}")
        if list(state["task_ids"]) != self.task_ids:
            raise ValueError(
                "the checkpoint's task pool differs from this run's (bots.task_id_field values or their order "
                "changed, e.g. other data files, train_max_samples or filtering); refusing to resume"
            )
        if int(state["select_size"]) != self.select_size:
            logger.warning("train_batch_size changed from %s to %s on resume", state["select_size"], self.select_size)
        log = [(int(step), [int(p) for p in positions]) for step, positions in state.get("dispatch_log", [])]
        inflight_state = state.get("inflight", None)
        if self.inflight is not None:
            # checked before the service is touched; a synchronous checkpoint (none) resumes with nothing in flight
            ledger = InflightLedger(self.inflight.stale_after)
            if inflight_state is not None:
                ledger.load_state_dict(inflight_state, self.num_tasks)
        elif inflight_state is not None and inflight_state.get("entries"):
            logger.warning(
                "the checkpoint has %d groups in flight (an asynchronous run) and this run is synchronous: verl does "
                "not restore them, so their evidence never arrives",
                len(inflight_state["entries"]),
            )
        self.client.push_state(state["selector_state"])
        self._pending = [int(i) for i in state["pending"]]
        self._exclude = set()
        self._updates = int(state.get("updates", 0))
        self._pending_version = self._updates
        self._rollouts_received = float(state.get("attempts", 0.0))
        self._log = log
        if self.inflight is not None:
            self.inflight = ledger
