"""The replay buffer BOTS rebinds: row order by content only for the deterministic ``hf`` rollout (A11), the poll
interval from the config or verl's, DAPO only with verl's own buffer.

No Ray: TransferQueue is replaced by a recorder.
"""

from __future__ import annotations

import pytest
import torch
import transfer_queue
from omegaconf import OmegaConf
from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from bots_verl.integration.hooks.canonical_order import wants_canonical_order
from bots_verl.integration.hooks.replay_buffer import BOTSReplayBuffer, adopt_replay_buffer

VERL_POLL = 2.0  # verl's ReplayBuffer default


class RecordingTQ:
    """Stands in for TransferQueue: ``kv_clear`` does nothing, ``kv_batch_get`` records what was read."""

    def __init__(self, responses: dict[str, list[int]]):
        self.responses = responses
        self.reads: list[list[str]] = []

    def kv_clear(self, **kwargs):
        pass

    def kv_batch_get(self, keys, partition_id, select_fields):
        self.reads.append(list(keys))
        return {"responses": torch.tensor([self.responses[k] for k in keys])}


def _verl_buffer() -> ReplayBuffer:
    return ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
    )


@pytest.fixture()
def recorder(monkeypatch):
    # the session of each prompt that arrived first gave the "later" response: content order differs from arrival
    responses = {"u0_1_0": [9, 9], "u0_0_0": [1, 2], "u1_0_0": [5, 5], "u1_1_0": [3, 3]}
    fake = RecordingTQ(responses)
    monkeypatch.setattr(verl_replay_buffer, "tq", fake)
    monkeypatch.setattr(transfer_queue, "kv_batch_get", fake.kv_batch_get)
    return fake


def _materialize(buffer: ReplayBuffer, recorder: RecordingTQ) -> list[str]:
    snapshot = {key: {"status": "success"} for key in recorder.responses}  # arrival order
    return buffer._materialize_batch("train", ["u1", "u0"], snapshot).keys


def _config(rollout: str):
    return OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": rollout}}})


@pytest.mark.parametrize("rollout", ["vllm", "sglang"])
def test_a_gpu_rollout_reads_no_response_and_keeps_verls_order(recorder, rollout):
    buffer = adopt_replay_buffer(
        _verl_buffer(),
        dispatch_order={"u0": 0, "u1": 1},
        poll_interval=None,
        canonical=wants_canonical_order(_config(rollout)),
        observer=None,
    )
    assert isinstance(buffer, BOTSReplayBuffer)
    keys = _materialize(buffer, recorder)
    assert recorder.reads == []  # not one response token pulled to the driver
    assert keys == list(recorder.responses)
    assert buffer.poll_interval == VERL_POLL


def test_the_hf_rollout_gets_rows_sorted_by_dispatch_and_content(recorder):
    buffer = adopt_replay_buffer(
        _verl_buffer(),
        dispatch_order={"u0": 0, "u1": 1},
        poll_interval=0.05,
        canonical=wants_canonical_order(_config("hf")),
        observer=None,
    )
    keys = _materialize(buffer, recorder)
    assert len(recorder.reads) == 1
    assert keys == ["u0_0_0", "u0_1_0", "u1_1_0", "u1_0_0"]
    assert buffer.poll_interval == 0.05


def test_dapo_needs_verls_own_buffer_and_a_custom_one_is_left_alone():
    class Custom(ReplayBuffer):
        pass

    custom = Custom(trainer_mode="sync", trainer_config={}, max_off_policy_threshold=None,
                    max_off_policy_strategy="drop", sampler_kwargs={})  # fmt: skip
    assert adopt_replay_buffer(custom, dispatch_order={}, poll_interval=0.05, canonical=True, observer=None) is custom
    assert custom.poll_interval == VERL_POLL and type(custom) is Custom
    with pytest.raises(ValueError, match="filter_groups"):
        adopt_replay_buffer(custom, dispatch_order={}, poll_interval=None, canonical=False, observer=lambda *a: None)
