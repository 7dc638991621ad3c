"""The order of a step's trajectories that does not depend on rollout timing (the ``hf`` rollout's exact resume).

verl hands the PPO update a step's rows in arrival order, and its uids are random ``uuid4``s, so two runs that
generated the same responses can still train on them in another order. :func:`canonical_order` sorts by content
instead. It reads every response's tokens from TransferQueue, which is worth it only where the responses themselves
repeat: the CPU backend's ``hf`` rollout samples with per-row seeds and batch-independent numerics
(:mod:`bots_verl.verl_cpu.hf_server`), so a resumed run trains on exactly what the uninterrupted run trained on. vLLM
and SGLang are not batch-invariant by default, so there the sort would buy nothing and cost a copy of every response
token to the driver each step (:mod:`bots_verl.speed.canonical_order_cost` measures it);
:func:`wants_canonical_order` keeps them out of it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

logger = logging.getLogger(__name__)

__all__ = ["DETERMINISTIC_ROLLOUTS", "canonical_order", "wants_canonical_order"]

#: Rollouts whose responses are a function of the prompt and the step's weights alone, whatever the batching.
DETERMINISTIC_ROLLOUTS = ("hf",)


def wants_canonical_order(config: DictConfig) -> bool:
    """True when the run's rollout is deterministic, so sorting its rows makes a resume exact."""
    return str(config.actor_rollout_ref.rollout.get("name", "")) in DETERMINISTIC_ROLLOUTS


def canonical_order(
    keys: Sequence[str], tags: Sequence[Mapping[str, Any]], partition_id: str, dispatch_order: Mapping[str, int]
) -> tuple[list[str], list[Mapping[str, Any]]]:
    """Sort a step's trajectories by (prompt dispatch order, response tokens, session, output).

    Which session of a prompt finishes first, and which of its identical requests the rollout server answered with
    which sample, depend on timing; the *set* of a prompt's responses does not (see
    :mod:`bots_verl.verl_cpu.hf_server`). Sorting by content makes the rows that reach the PPO update, and their
    order, a function of that set: rows that tie are identical in everything the update reads.

    Args:
        keys: trajectory keys ``{uid}_{session}_{output}``.
        tags: their tags.
        partition_id: TransferQueue partition.
        dispatch_order: uid -> position in which the prompt was dispatched this step.

    Returns:
        ``(keys, tags)`` sorted.
    """
    import transfer_queue as tq

    if not keys:
        return list(keys), list(tags)
    data = tq.kv_batch_get(keys=list(keys), partition_id=partition_id, select_fields=["responses"])
    responses = [tuple(int(t) for t in row.tolist()) for row in data["responses"].unbind(0)]

    def sort_key(i: int) -> tuple:
        uid, session, output = keys[i].rsplit("_", 2)
        return (dispatch_order.get(uid, math.inf), uid, responses[i], int(session), int(output))

    order = sorted(range(len(keys)), key=sort_key)
    return [keys[i] for i in order], [tags[i] for i in order]
