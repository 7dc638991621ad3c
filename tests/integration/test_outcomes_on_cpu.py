"""Outcome extraction from a real TransferQueue: padding, multi-output sessions, reward -> success mapping."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from conftest import put_trajectories

from bots_verl.integration.outcomes import SuccessRule, aggregate_outcomes, read_outcomes, session_keys
from bots_verl.integration.tasks import TaskIndex

PATH = ("extra_info", "index")


def _prompts(ids):
    return [{"uid": str(uuid.uuid4()), "index": tid, "extra_info": {"index": tid, "split": "train"}} for tid in ids]


def test_session_keys_skip_padding_and_repeat_outputs():
    keys = ["u1_0_0", "u1_0_1", "u1_1_0", "pad9_0_0"]
    tags = [{}, {}, {}, {"is_padding": True}]
    assert session_keys(keys, tags) == ["u1_0_0", "u1_1_0"]
    with pytest.raises(ValueError, match="unexpected"):
        session_keys(["nounderscore"], [{}])


def test_read_outcomes_from_transfer_queue(ray_tq):
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size

    prompts = _prompts([1003, 1007, 1011])
    # task 1003 all right, 1007 mixed, 1011 all wrong; math_dapo style +/-1 scores with a bool acc
    wins = [[1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 0]]
    scores = [[1.0 if w else -1.0 for w in row] for row in wins]
    keys, tags = put_trajectories(prompts[:2], wins[:2], scores=scores[:2], outputs_per_session=2)
    k3, t3 = put_trajectories(prompts[2:], wins[2:], scores=scores[2:])
    batch = KVBatchMeta(keys=keys + k3, tags=tags + t3, partition_id="train")
    # verl's own padding: synthetic rows copy the first sample's index (1003) with a zero reward
    batch = upsample_batch_to_divisible_size(batch, 7, eos_token_id=1)
    assert any(t.get("is_padding") for t in batch.tags)
    outcomes = read_outcomes(batch.keys, batch.tags, "train", task_path=PATH, rule=SuccessRule())
    assert len(outcomes) == 12  # 3 prompts x 4 sessions; 2 outputs per session counted once; padding skipped
    index = TaskIndex([1011, 1003, 1007, 1099])
    pos, succ, att = aggregate_outcomes(outcomes, index)
    np.testing.assert_array_equal(pos, [0, 1, 2])
    np.testing.assert_array_equal(succ, [0, 4, 2])
    np.testing.assert_array_equal(att, [4, 4, 4])
    import transfer_queue as tq

    tq.kv_clear(keys=batch.keys, partition_id="train")


def test_unmappable_reward_is_an_error(ray_tq):
    import transfer_queue as tq

    prompts = _prompts([5])
    keys, tags = put_trajectories(prompts, [[1, 0]], extra=lambda i, s, v: {"acc": float("nan")})
    with pytest.raises(ValueError, match="acc"):
        read_outcomes(keys, tags, "train", task_path=PATH, rule=SuccessRule())
    with pytest.raises(ValueError, match="no task id field"):
        read_outcomes(keys, tags, "train", task_path=("extra_info", "task"), rule=SuccessRule("threshold"))
    tq.kv_clear(keys=keys, partition_id="train")
