"""Per-step evidence for the posterior, read from TransferQueue.

In verl 0.9.1's V1 trainer a step's trajectories live in TransferQueue under keys ``{uid}_{session_id}_{output}``
(``uid`` per prompt, ``session_id`` in ``[0, rollout.n)``, several outputs per session for multi-output agent loops,
all carrying the session's final reward). Each trajectory stores every dataset field of its prompt (so the task id),
``rm_scores`` (per token; the scalar reward sits on the last response token) and ``extra_fields.reward_extra_info``
(``acc`` and friends from the reward function).

Rules applied here:

- rows tagged ``is_padding`` (synthetic rows verl appends for divisibility; they copy the first real row's
  metadata with a zero reward) are skipped;
- one outcome per ``(uid, session_id)``, read from the session's **final** output (the highest output index): verl
  scores a multi-output session once, on ``outputs[-1]``, and copies that reward to the earlier outputs
  (``AgentLoopWorkerTQ._agent_loop_postprocess``); where it does not (a colocated reward model scores every row on
  its own), the final output's reward is still the session's, and a session counts as one attempt however many
  outputs it has;
- a reward becomes a success in [0, 1] through :class:`SuccessRule`; a reward that cannot be mapped is a
  ``ValueError``, never a silent 0;
- ``acc`` is read where verl writes it: the streaming reward loop puts it in ``extra_fields.reward_extra_info``, a
  colocated reward model (``reward.reward_model.enable`` without its own resource pool) writes its extra keys as
  top-level fields (``PPOTrainer._compute_reward_colocate``), together with the ``rm_scores`` it overwrites; the
  top-level value wins.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from bots_verl.integration.evidence.task_index import TaskIndex, task_id_of
from bots_verl.rewards.success import SuccessRule

logger = logging.getLogger(__name__)

__all__ = ["Outcome", "SuccessRule", "aggregate_outcomes", "read_outcomes", "session_keys"]

# reward extra keys a colocated reward model writes as top-level TransferQueue fields that the success rule reads
TOP_LEVEL_REWARD_KEYS = ("acc",)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One rollout session's result."""

    task_id: int | str
    success: float
    score: float
    # the TransferQueue key it was read from (its session's final output): dates it in the asynchronous modes
    key: str = ""


def session_keys(keys: Sequence[str], tags: Sequence[Mapping[str, Any]]) -> list[str]:
    """The key of each ``(uid, session_id)``'s final output (highest output index), padding rows dropped.

    Sessions come in the order their first row appears in ``keys``; the rows of a session may come in any order
    (the replay buffer sorts them by response content).

    Raises:
        ValueError: for a key that is not ``uid_session_output`` with an integer output index.
    """
    final: dict[tuple[str, str], tuple[int, str]] = {}
    for key, tag in zip(keys, tags, strict=True):
        if tag.get("is_padding", False):
            continue
        parts = key.rsplit("_", 2)
        if len(parts) != 3 or not parts[2].isdigit():
            raise ValueError(f"unexpected TransferQueue trajectory key {key!r} (want uid_session_output)")
        session, output = (parts[0], parts[1]), int(parts[2])
        if session not in final or output > final[session][0]:
            final[session] = (output, key)
    return [key for _, key in final.values()]


def read_outcomes(
    keys: Sequence[str],
    tags: Sequence[Mapping[str, Any]],
    partition_id: str,
    *,
    task_path: Sequence[str],
    rule: SuccessRule,
) -> list[Outcome]:
    """Read one outcome per non-padding session (its final output's reward) from TransferQueue.

    Args:
        keys: trajectory keys (``KVBatchMeta.keys``).
        tags: their tags (``KVBatchMeta.tags``).
        partition_id: TransferQueue partition (``train``).
        task_path: the task id field path, e.g. ``("extra_info", "index")``.
        rule: the success rule.

    Returns:
        The outcomes, one per session.

    Raises:
        ValueError: for a missing task id or an unmappable reward.
    """
    import transfer_queue as tq

    chosen = session_keys(keys, tags)
    if not chosen:
        return []
    fields = [task_path[0], "rm_scores", "extra_fields", *TOP_LEVEL_REWARD_KEYS]
    # fields no trajectory has (top-level acc without a colocated reward model) are simply absent from the result
    data = tq.kv_batch_get(keys=chosen, partition_id=partition_id, select_fields=fields)
    roots = list(data[task_path[0]])
    scores = list(data["rm_scores"])
    extras = list(data["extra_fields"]) if "extra_fields" in data.keys() else [None] * len(chosen)
    top_level = {k: list(data[k]) for k in TOP_LEVEL_REWARD_KEYS if k in data.keys()}
    out = []
    for i, (key, root, score, extra) in enumerate(zip(chosen, roots, scores, extras, strict=True)):
        extra = getattr(extra, "data", extra)
        info = extra.get("reward_extra_info", None) if isinstance(extra, Mapping) else None
        if top_level:
            info = dict(info or {})
            info.update({k: getattr(v[i], "data", v[i]) for k, v in top_level.items()})
        value = float(score.sum().item())
        try:
            success = rule(value, info)
        except ValueError as exc:
            raise ValueError(f"trajectory {key}: {exc}") from exc
        out.append(Outcome(task_id=task_id_of({task_path[0]: root}, task_path), success=success, score=value, key=key))
    return out


def aggregate_outcomes(outcomes: Iterable[Outcome], index: TaskIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-task ``(positions, successes, attempts)``, positions ascending.

    Raises:
        ValueError: for a task id outside the pool.
    """
    outcomes = list(outcomes)
    if not outcomes:
        empty = np.zeros(0)
        return empty.astype(np.int64), empty, empty
    positions = index.positions(o.task_id for o in outcomes)
    succ = np.array([o.success for o in outcomes], dtype=float)
    uniq, inverse = np.unique(positions, return_inverse=True)
    successes = np.bincount(inverse, weights=succ, minlength=uniq.size)
    attempts = np.bincount(inverse, minlength=uniq.size).astype(float)
    return uniq.astype(np.int64), successes, attempts
