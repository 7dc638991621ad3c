"""BOTSTrainer's overrides on a partially built trainer (verl's own test pattern), with real hydra config, real
RLHFDataset from a local parquet + tokenizer, real StatefulDataLoader, Ray actor and TransferQueue.

Only the rollout and the PPO update need GPUs: ``agent_loop_manager.generate_sequences`` is replaced by a fake
that writes trajectories to TransferQueue like verl's AgentLoopWorkerTQ, and ``_step_once`` returns those
trajectories (padded by verl's real ``upsample_batch_to_divisible_size``) instead of training on them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import base_overrides, compose, make_pool, put_trajectories
from omegaconf import OmegaConf

from bots_verl.integration.trainer import BOTSReplayBuffer, BOTSTrainer

N_ROLLOUTS = 4


def _success(task_id: int, session: int) -> float:
    # deterministic "policy": tasks with larger ids are easier
    return float((task_id * 7 + session * 3) % 10 < (task_id - 1000) % 10)


class FakeRollout:
    """Stands in for the GPU agent loop: writes rollout.n trajectories per prompt to TransferQueue."""

    def __init__(self):
        self.keys, self.tags, self.task_ids = [], [], []

    def generate_sequences(self, batch):
        prompts = []
        for uid, extra in zip(list(batch["uid"]), list(batch["extra_info"]), strict=True):
            extra = dict(getattr(extra, "data", extra))
            prompts.append({"uid": uid, "index": extra["index"], "extra_info": extra, "global_steps": 1})
        wins = [[_success(p["index"], s) for s in range(N_ROLLOUTS)] for p in prompts]
        scores = [[1.0 if w else -1.0 for w in row] for row in wins]  # math_dapo style
        keys, tags = put_trajectories(prompts, wins, scores=scores)
        self.keys += keys
        self.tags += tags
        self.task_ids.append([p["index"] for p in prompts])


def _trainer(config, tokenizer_dir):
    from transfer_queue import KVBatchMeta
    from transformers import AutoTokenizer
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size

    trainer = BOTSTrainer.__new__(BOTSTrainer)
    trainer.config = config
    from bots_verl.integration.outcomes import SuccessRule
    from bots_verl.integration.settings import parse_bots_config

    trainer.bots = parse_bots_config(config)
    trainer._bots_rule = SuccessRule(trainer.bots.success_rule, trainer.bots.success_threshold)
    trainer._bots_evicted = []
    trainer.trainer_mode = "sync"
    trainer.parameter_sync_step = 1
    trainer.global_steps = 1
    trainer.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    trainer.processor = None
    trainer._init_dataloader()
    rollout = FakeRollout()
    trainer.agent_loop_manager = rollout

    def step_once(metrics, timing_raw, sample_batch_size):
        batch = KVBatchMeta(keys=list(rollout.keys), tags=list(rollout.tags), partition_id="train")
        rollout.keys, rollout.tags = [], []
        return upsample_batch_to_divisible_size(batch, 6, eos_token_id=1)  # real verl padding rows

    trainer._step_once = step_once
    return trainer, rollout


def _steps(trainer, rollout, n):
    import transfer_queue as tq

    out = []
    for _ in range(n):
        metrics = {}
        batch = trainer.step(metrics, {})  # verl's PPOTrainer.step + our posterior update
        tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)  # as fit() does
        out.append((rollout.task_ids[-1], metrics))
        trainer.global_steps += 1
    return out


@pytest.fixture()
def config(tmp_path, tokenizer_dir):
    path = tmp_path / "train.parquet"
    make_pool(path, 40)
    cfg = compose(base_overrides(str(path), tokenizer_dir, "data.train_max_samples=30", "data.seed=5"))
    OmegaConf.set_struct(cfg, True)
    return cfg


def test_step_updates_posterior_and_logs(ray_tq, config, tokenizer_dir):
    import ray

    trainer, rollout = _trainer(config, tokenizer_dir)
    assert len(trainer.train_dataset) == 30 and trainer.train_dataloader.num_workers == 0
    results = _steps(trainer, rollout, 3)
    ids, metrics = results[-1]
    assert len(set(ids)) == 4
    for key in (
        "bots/batch/effective_task_ratio",
        "bots/rollouts",
        "bots/select_ms",
        "bots/update_ms",
        "bots/tasks_ever_selected",
        "bots/implicit/capability_mu",
        "bots/posterior/ess_avg",
    ):
        assert key in metrics, key
    assert metrics["bots/rollouts"] == 4 * N_ROLLOUTS  # padding rows not counted
    assert metrics["bots/tasks_ever_selected"] == len({t for step_ids, _ in results for t in step_ids})
    # the evidence landed on the rows with those task ids, despite train_max_samples reordering positions
    alpha, beta = ray.get(trainer.bots_sampler.actor.posterior.remote())
    first_ids = results[0][0]
    positions = trainer.bots_task_index.positions(first_ids)
    wins = np.array([sum(_success(t, s) for s in range(N_ROLLOUTS)) for t in first_ids])
    untouched = np.setdiff1d(np.arange(30), trainer.bots_task_index.positions([t for r in results for t in r[0]]))
    assert np.all(alpha[positions] + beta[positions] > alpha[untouched[0]] + beta[untouched[0]])
    assert np.corrcoef(wins, alpha[positions] / (alpha[positions] + beta[positions]))[0, 1] > 0.5


def test_checkpoint_resume_matches_uninterrupted(ray_tq, config, tokenizer_dir, tmp_path):
    trainer, rollout = _trainer(config, tokenizer_dir)
    full = [ids for ids, _ in _steps(trainer, rollout, 4)]

    config.bots.actor.name = config.bots.actor.name + "_b"
    trainer, rollout = _trainer(config, tokenizer_dir)
    head = [ids for ids, _ in _steps(trainer, rollout, 2)]
    torch.save(trainer.train_dataloader.state_dict(), tmp_path / "data.pt")  # verl's _save_checkpoint

    config.bots.actor.name = config.bots.actor.name + "_c"
    resumed, rollout = _trainer(config, tokenizer_dir)
    # verl's _load_checkpoint
    resumed.train_dataloader.load_state_dict(torch.load(tmp_path / "data.pt", weights_only=False))
    resumed.global_steps = 3
    tail = [ids for ids, _ in _steps(resumed, rollout, 2)]
    assert head + tail == full


def test_dapo_evicted_groups_reach_the_posterior(ray_tq, config, tokenizer_dir):
    import transfer_queue as tq

    config.algorithm.filter_groups.enable = True
    config.algorithm.filter_groups.metric = "acc"
    trainer, rollout = _trainer(config, tokenizer_dir)
    trainer.global_steps = 1
    buffer = trainer._build_replay_buffer()  # verl's DAPO-configured buffer, class rebound
    assert isinstance(buffer, BOTSReplayBuffer) and buffer.filter_groups_metric == "acc"
    prompts = [{"uid": "evicted", "index": 1005, "extra_info": {"index": 1005}}]
    keys, tags = put_trajectories(prompts, [[1, 1, 1, 1]])
    buffer.partitions["train"].update(dict(zip(keys, tags, strict=True)))
    buffer._clear_groups("train", {"evicted"})  # what ReplayBuffer.sample does with all-1 groups
    assert [o.task_id for o in trainer._bots_evicted] == [1005] * 4
    assert not tq.kv_list("train").get("train", {}).keys() & set(keys)  # verl still deleted them
    metrics = trainer.bots_update(__import__("transfer_queue").KVBatchMeta(keys=[], tags=[], partition_id="train"))
    assert metrics["bots/rollouts"] == 4 and metrics["bots/evicted_rollouts"] == 4


def test_bad_settings_fail_in_constructor(config):
    config.data.dataloader_num_workers = 2
    with pytest.raises(ValueError, match="dataloader_num_workers"):
        BOTSTrainer(config)
