"""Outcome extraction from a real TransferQueue: padding, multi-output sessions, reward -> success mapping."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import torch
from integration_helpers import put_trajectories

from bots_verl.integration.evidence.outcomes import SuccessRule, aggregate_outcomes, read_outcomes, session_keys
from bots_verl.integration.evidence.task_index import TaskIndex

PATH = ("extra_info", "index")


def _prompts(ids):
    return [{"uid": str(uuid.uuid4()), "index": tid, "extra_info": {"index": tid, "split": "train"}} for tid in ids]


def test_session_keys_skip_padding_and_keep_each_sessions_final_output():
    keys = ["u1_0_0", "u1_0_1", "u1_1_0", "pad9_0_0"]
    tags = [{}, {}, {}, {"is_padding": True}]
    assert session_keys(keys, tags) == ["u1_0_1", "u1_1_0"]
    # the replay buffer sorts a session's rows by response content, so the final output may come first
    keys = ["u1_0_2", "u1_1_0", "u1_0_0", "u1_0_1"]
    assert session_keys(keys, [{}] * 4) == ["u1_0_2", "u1_1_0"]
    for bad in ("nounderscore", "u1_0_x"):
        with pytest.raises(ValueError, match="unexpected"):
            session_keys([bad], [{}])


def test_a_multi_output_session_counts_once_with_its_final_outputs_reward(ray_tq):
    """verl scores a session on its final output (``outputs[-1]``); earlier outputs may carry other rewards (a
    colocated reward model scores each row), and a session is one attempt however many outputs it has."""
    import transfer_queue as tq

    prompts = _prompts([31, 32])
    wins = [[1, 1], [0, 1]]  # the session's final reward, per prompt and session

    def output_score(i, s, o, score):
        return score if o == 2 else 1.0 - score  # earlier outputs: the opposite of the final reward

    keys, tags = put_trajectories(prompts, wins, outputs_per_session=3, output_score=output_score)
    # prompt 31's rows in output order, prompt 32's with the final output first (the replay buffer sorts by content)
    split = 2 * 3
    keys, tags = keys[:split] + keys[split:][::-1], tags[:split] + tags[split:][::-1]
    outcomes = read_outcomes(keys, tags, "train", task_path=PATH, rule=SuccessRule("threshold", 0.5))
    assert sorted((o.task_id, o.success) for o in outcomes) == [(31, 1.0), (31, 1.0), (32, 0.0), (32, 1.0)]
    pos, succ, att = aggregate_outcomes(outcomes, TaskIndex([31, 32]))
    np.testing.assert_array_equal(succ, [2, 1])
    np.testing.assert_array_equal(att, [2, 2])
    tq.kv_clear(keys=keys, partition_id="train")


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


class ColocatedRewardModel:
    """A reward model's output as verl's RewardLoopManager.compute_rm_score returns it (the model itself needs a
    GPU): a score of 0.2 on the last response token and ``acc`` among the reward extra keys."""

    def __init__(self, acc: list[int]):
        self.acc = acc

    def compute_rm_score(self, data):
        from tensordict import TensorDict
        from verl import DataProto

        responses = data.batch["responses"]
        scores = torch.zeros(responses.shape, dtype=torch.float32)
        scores[:, -1] = 0.2
        return DataProto(
            batch=TensorDict({"rm_scores": scores}, batch_size=len(self.acc)),
            non_tensor_batch={"acc": np.array(self.acc, dtype=object)},
            meta_info={"reward_extra_keys": ["acc"]},
        )


@pytest.mark.parametrize("acc", [[0, 0, 1], [1, 1, 0]])
def test_acc_of_a_colocated_reward_model_is_read_where_verl_writes_it(ray_tq, acc):
    """Without a streaming reward the trajectories carry no reward_extra_info; verl's own ``_compute_reward_colocate``
    then writes rm_scores and ``acc`` as top-level fields. A score of 0.2 with acc=0 is a failure."""
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    prompts = [{**p, "raw_prompt": [{"role": "user", "content": "what is 1 plus 2 ?"}]} for p in _prompts([21])]
    keys, tags = put_trajectories(prompts, [[0, 0, 0]], extra=lambda i, s, v: {})
    trainer = PPOTrainerSync.__new__(PPOTrainerSync)  # only the reward step runs; it needs these two attributes
    trainer.reward_loop_manager = ColocatedRewardModel(acc)
    trainer.tokenizer = type("Tokenizer", (), {"pad_token_id": 0})()
    trainer._compute_reward_colocate(KVBatchMeta(keys=keys, tags=tags, partition_id="train"))
    for rule in (SuccessRule(), SuccessRule("acc")):
        outcomes = read_outcomes(keys, tags, "train", task_path=PATH, rule=rule)
        assert [o.success for o in outcomes] == [float(a) for a in acc]
        assert all(o.score == pytest.approx(0.2) for o in outcomes)
    tq.kv_clear(keys=keys, partition_id="train")
