"""BOTSTrainer's overrides on a trainer built by its real ``__init__``, ``_init_tokenizer`` and ``_init_dataloader``
(real hydra config, RLHFDataset, StatefulDataLoader, posterior actor, TransferQueue), with the rollout faked.

These check what a real run cannot show directly (``test_e2e_on_cpu.py`` runs the real thing): which task each
outcome is credited to when positions and task ids differ, which selections DAPO refills are served from, and
reading a pool whose files verl copied from a remote path. ``agent_loop_manager.generate_sequences`` is a fake that
writes trajectories to TransferQueue as verl's AgentLoopWorkerTQ does (with outcomes the test knows), and
``_step_once`` returns them instead of training on them; everything else in ``trainer.step`` is verl's and ours.
"""

from __future__ import annotations

import os
import stat
import uuid

import numpy as np
import pytest
import transfer_queue as tq
from integration_helpers import base_overrides, compose, make_pool, put_trajectories
from omegaconf import OmegaConf
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.settings import resolve_settings
from bots_verl.integration.hooks.canonical_order import canonical_order
from bots_verl.integration.hooks.trainer import BOTSTrainer
from bots_verl.integration.safety.refill_cap import TooManyGenBatchesError

N_ROLLOUTS = 4


def _success(task_id: int, session: int) -> float:
    # deterministic "policy": how often a task succeeds depends on its id
    return float((task_id * 7 + session * 3) % 10 < (task_id - 1000) % 10)


class FakeRollout:
    """Stands in for the agent loop: writes rollout.n trajectories per dispatched prompt to TransferQueue."""

    def __init__(self):
        self.keys, self.tags, self.dispatched = [], [], []

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
        self.dispatched += [p["index"] for p in prompts]


def _built(config) -> BOTSTrainer:
    """A BOTSTrainer given the settings the driver resolves from ``config`` (as the task runner hands them on)."""
    return BOTSTrainer(config, resolve_settings(read_bots_config(config)))


def _trainer(config, refills: tuple[int, ...] = ()):
    """A BOTSTrainer whose step dispatches the batch, then ``refills`` extra prompts (as DAPO's refill_fn does)."""
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size

    trainer = _built(config)
    trainer._init_tokenizer()
    trainer.global_steps = 1
    trainer._init_dataloader()
    rollout = FakeRollout()
    trainer.agent_loop_manager = rollout

    def step_once(metrics, timing_raw, sample_batch_size):
        for count in refills:
            trainer._add_prompts_to_generate(count)  # verl's refill path: more prompts mid-step
        batch = KVBatchMeta(keys=list(rollout.keys), tags=list(rollout.tags), partition_id="train")
        rollout.keys, rollout.tags = [], []
        return upsample_batch_to_divisible_size(batch, 32, eos_token_id=1)  # real verl padding rows

    trainer._step_once = step_once
    return trainer, rollout


def _steps(trainer, rollout, n):
    out = []
    for _ in range(n):
        metrics = {}
        start = len(rollout.dispatched)
        batch = trainer.step(metrics, {})  # verl's PPOTrainer.step + our brackets and posterior update
        tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)  # as fit() does
        out.append((rollout.dispatched[start:], metrics))
        trainer.global_steps += 1
    return out


@pytest.fixture()
def config(tmp_path, tokenizer_dir):
    path = tmp_path / "train.parquet"
    make_pool(path, 40)
    cfg = compose(base_overrides(str(path), tokenizer_dir, "data.train_max_samples=30", "data.seed=5"))
    OmegaConf.set_struct(cfg, True)
    return cfg


def test_evidence_lands_on_task_ids_despite_reordered_positions(ray_tq, config):
    import ray

    trainer, rollout = _trainer(config)
    assert len(trainer.train_dataset) == 30 and trainer.train_dataloader.num_workers == 0
    # bots.replay_poll_interval: null keeps verl's poll; the rollout is not hf, so no row is sorted by its tokens
    assert trainer.replay_buffer.poll_interval == 2.0 and not trainer.replay_buffer.bots_canonical_order
    results = _steps(trainer, rollout, 3)
    ids, metrics = results[-1]
    assert len(set(ids)) == 4 and metrics["bots/rollouts"] == 4 * N_ROLLOUTS
    assert metrics["bots/padding_rows"] == 32 - 4 * N_ROLLOUTS  # padding rows were there and were skipped
    assert metrics["bots/tasks_ever_selected"] == len({t for step_ids, _ in results for t in step_ids})
    # the evidence landed on the rows with those task ids, although train_max_samples reordered the positions
    positions = trainer.bots_task_index.positions(results[0][0])
    assert list(positions) != [t - 1000 for t in results[0][0]]
    alpha, beta = ray.get(trainer.bots_sampler.client.actor.posterior.remote())
    wins = np.array([sum(_success(t, s) for s in range(N_ROLLOUTS)) for t in results[0][0]])
    untouched = np.setdiff1d(np.arange(30), trainer.bots_task_index.positions([t for r in results for t in r[0]]))
    assert np.all(alpha[positions] + beta[positions] > alpha[untouched[0]] + beta[untouched[0]])
    assert np.corrcoef(wins, alpha[positions] / (alpha[positions] + beta[positions]))[0, 1] > 0.5


class RecordingActor:
    """Forwards every call to the real posterior actor and records selections and updates, in order."""

    def __init__(self, actor, events: list):
        self._actor, self._events = actor, events

    def __getattr__(self, method):
        target = getattr(self._actor, method)
        events = self._events

        class Method:
            @staticmethod
            def remote(*args):
                ref = target.remote(*args)
                if method in ("select", "update_selector"):
                    import ray

                    result = ray.get(ref)
                    kind = "select" if method == "select" else "update"
                    events.append((kind, [int(i) for i in np.asarray(result[0])] if method == "select" else None))
                    return ray.put(result)
                return ref

        return Method


def test_dapo_refills_are_selected_after_the_last_update_and_never_repeat_a_task(ray_tq, config):
    config.algorithm.filter_groups.enable = True
    config.algorithm.filter_groups.metric = "acc"
    trainer, rollout = _trainer(config, refills=(3, 2, 4))
    assert trainer.train_dataloader.batch_size == 1  # verl forced gen_batch_size=1; the rebuilt loader follows it
    events: list = []
    trainer.bots_sampler.client.actor = RecordingActor(trainer.bots_sampler.client.actor, events)
    results = _steps(trainer, rollout, 4)
    updates = [i for i, (kind, _) in enumerate(events) if kind == "update"]
    assert len(updates) == 4
    for step, (task_ids, metrics) in enumerate(results):
        assert len(task_ids) == 4 + 3 + 2 + 4
        assert len(set(task_ids)) == len(task_ids), f"step {step + 1} dispatched a task twice: {task_ids}"
        # zero lag: every position served in this step was selected after the previous step's update
        begin = updates[step - 1] if step else -1
        fresh = {p for kind, chosen in events[begin + 1 : updates[step]] if kind == "select" for p in chosen}
        served = set(trainer.bots_task_index.positions(task_ids).tolist())
        assert served <= fresh, f"step {step + 1} served stale selections {sorted(served - fresh)}"
        assert metrics["bots/dispatched"] == 13 and metrics["bots/stale_dispatches"] == 0
        assert metrics["bots/repeat_dispatches"] == 0 and metrics["bots/rollouts"] == 13 * N_ROLLOUTS


def test_a_refill_past_the_generation_batch_cap_stops_the_step_before_the_posterior_update(ray_tq, config):
    """``algorithm.filter_groups.max_num_gen_batches`` (ignored by verl 0.9.1's V1 buffer): at most 2 x 4 prompts a
    step; the refill asking for a 9th raises in verl's refill path and the posterior stays step 1's."""
    import ray

    config.algorithm.filter_groups.enable = True
    config.algorithm.filter_groups.metric = "acc"
    config.algorithm.filter_groups.max_num_gen_batches = 2
    plan = [3, 1]  # the batch (4) and refills of 3 and 1: exactly 2 generation batches
    trainer, rollout = _trainer(config, refills=plan)
    ((task_ids, metrics),) = _steps(trainer, rollout, 1)
    assert len(task_ids) == 8 and metrics["bots/dispatched"] == 8
    posterior = ray.get(trainer.bots_sampler.client.actor.posterior.remote())
    plan.append(1)
    with pytest.raises(TooManyGenBatchesError, match=r"max_num_gen_batches=2: step 2 dispatched 8 prompts"):
        trainer.step({}, {})
    # nothing of step 2 reached the posterior or the sampler's log; the trainer is out of the step
    after = ray.get(trainer.bots_sampler.client.actor.posterior.remote())
    assert all(np.array_equal(a, b) for a, b in zip(posterior, after, strict=True))
    assert trainer.bots_sampler.updates == 1 and [s for s, _ in trainer.bots_sampler.dispatch_log()] == [1]
    assert not trainer._bots_in_step
    tq.kv_clear(keys=rollout.keys, partition_id="train")


class _OnlyTheseGroups:
    """verl's replay buffer module's ``tq`` seeing only the given prompt groups (other tests' leftovers in the
    session's TransferQueue, e.g. prompts still pending, would make the buffer wait for them)."""

    def __init__(self, uids):
        self.uids = set(uids)

    def __getattr__(self, name):
        return getattr(tq, name)

    def kv_list(self):
        listed = tq.kv_list() or {}
        return {
            partition: {key: tag for key, tag in items.items() if key.split("_")[0] in self.uids}
            for partition, items in listed.items()
        }


@pytest.mark.parametrize("selected", ["mixed", "failed"])
def test_a_dapo_group_with_a_failed_session_is_counted_as_verl_trains_on_it(ray_tq, monkeypatch, selected):
    """A group with a failed session (status ``failure``) is never DAPO-filtered and stays sampleable: verl trains
    on its completed sessions when it selects it (they reach ``update_from_trained_batch`` in the batch) and discards it
    as surplus otherwise. Either way its completed sessions count once and its failed session not at all, like every
    other group's rollouts (a DAPO-evicted group counts too)."""
    from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer

    from bots_verl.integration.hooks.replay_buffer import BOTSReplayBuffer

    tag = uuid.uuid4().hex[:8]
    mixed, failed, all_wrong = (f"{name}{tag}" for name in ("mixed", "failed", "wrong"))
    uids = {"mixed": mixed, "failed": failed}
    prompts = [{"uid": u, "index": 1000 + i, "extra_info": {"index": 1000 + i}} for i, u in enumerate(uids.values())]
    keys, _ = put_trajectories(prompts[:1], [[1, 0, 1, 0]])
    # sessions 2 and 3 of the failed group raised: only sessions 0 and 1 wrote trajectories
    failed_keys, _ = put_trajectories(prompts[1:], [[1, 0]])
    wrong_keys, _ = put_trajectories([{"uid": all_wrong, "index": 1002, "extra_info": {"index": 1002}}], [[0] * 4])
    statuses = {mixed: "finished", failed: "failure", all_wrong: "finished"}
    tq.kv_batch_put(
        keys=list(statuses),
        tags=[{"is_prompt": True, "status": status, "global_steps": 1} for status in statuses.values()],
        partition_id="train",
    )
    monkeypatch.setattr(verl_replay_buffer, "tq", _OnlyTheseGroups(statuses))

    buffer = ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        poll_interval=0.01,
        refill_fn=lambda n: pytest.fail(f"no refill expected, asked for {n}"),
        filter_groups_metric="acc",
        train_batch_size=1,
        gen_batch_size=1,
    )
    buffer.__class__ = BOTSReplayBuffer  # as adopt_replay_buffer does
    observed: list[str] = []
    buffer.bots_observer = lambda k, t, partition_id: observed.extend(k)
    other = "failed" if selected == "mixed" else "mixed"
    buffer.bots_dispatch_order = {uids[selected]: 0, uids[other]: 1, all_wrong: 2}
    batch, _ = buffer.sample(global_steps=1, partition_id="train", batch_size=1)

    by_group = {"mixed": keys, "failed": failed_keys}
    # verl trains on the selected group, a failure group's completed sessions included
    assert sorted(batch.keys) == sorted(by_group[selected])
    # the all-0 group (DAPO-evicted) and the surplus group reach the posterior before verl deletes them
    assert sorted(observed) == sorted(wrong_keys + by_group[other])
    tq.kv_clear(keys=batch.keys, partition_id="train")


def test_rows_reach_the_update_in_an_order_independent_of_arrival(ray_tq):
    prompts = [{"uid": f"u{i}", "index": 1000 + i, "extra_info": {"index": 1000 + i}} for i in range(3)]
    wins = [[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]]
    first = put_trajectories(prompts, wins, partition_id="canon_a")
    # the same responses, arriving in another order and answered to other sessions
    shuffled = [dict(p, uid=f"v{i}") for i, p in enumerate(prompts)][::-1]
    second = put_trajectories(shuffled, [row[::-1] for row in wins[::-1]], partition_id="canon_b")
    order_a = {f"u{i}": i for i in range(3)}
    order_b = {f"v{i}": i for i in range(3)}
    keys_a, _ = canonical_order(*first, "canon_a", order_a)
    keys_b, _ = canonical_order(*second, "canon_b", order_b)

    def rows(keys, partition):
        data = tq.kv_batch_get(keys=keys, partition_id=partition, select_fields=["index", "rm_scores"])
        return [(int(i), float(s.sum())) for i, s in zip(list(data["index"]), data["rm_scores"].unbind(0), strict=True)]

    assert rows(keys_a, "canon_a") == rows(keys_b, "canon_b")
    assert [k.split("_")[0] for k in keys_a] == ["u0"] * 4 + ["u1"] * 4 + ["u2"] * 4
    tq.kv_clear(keys=first[0], partition_id="canon_a")
    tq.kv_clear(keys=second[0], partition_id="canon_b")


def test_reference_columns_are_read_from_the_local_copies_of_remote_files(ray_tq, tmp_path, tokenizer_dir, monkeypatch):
    """``data.train_files=hdfs://...``: verl copies the file (copy_to_local); the reference columns come from the copy.

    There is no HDFS here, so a stand-in ``hdfs`` command line (``hdfs dfs -get SRC DST`` copies from a local
    "remote" directory) is put where verl's hdfs_io looks for the binary; verl's own copy code runs unchanged.
    """
    import verl.utils.hdfs_io as hdfs_io

    remote = tmp_path / "remote"
    remote.mkdir()
    frame = make_pool(remote / "train.parquet", 12)
    cli = tmp_path / "hdfs"
    cli.write_text(f'#!/bin/sh\n# hdfs dfs -get SRC DST\nsrc="$3"; cp "{remote}/${{src##*/}}" "$4"\n')
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(hdfs_io, "_HDFS_BIN_PATH", str(cli))
    overrides = base_overrides("hdfs://cluster/data/train.parquet", tokenizer_dir, f"+data.cache_dir={tmp_path}/cache")
    cfg = compose(overrides)
    trainer = _built(cfg)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    local = list(trainer.train_dataset.data_files)
    assert local != ["hdfs://cluster/data/train.parquet"] and os.path.isfile(local[0])
    assert sorted(trainer.bots_task_index.task_ids) == sorted(frame["extra_info"].map(lambda e: e["index"]))


class WorkersWouldStart(Exception):
    """Raised where verl's init starts creating worker resource pools (after the dataset and the resume checks)."""


def test_a_resume_into_another_pool_or_reference_is_refused_before_workers_start(
    ray_tq, tmp_path, tokenizer_dir, monkeypatch
):
    """The fingerprint in data.pt against the pool and reference columns the trainer reads (real RLHFDataset,
    StatefulDataLoader, torch.save'd data.pt): swapped or changed reference columns and regenerated prompts under the
    same ids resumed silently before; now ``init`` refuses them, naming the override, before any worker starts."""
    import pandas as pd
    import ray
    import torch
    from verl.trainer.ppo.v1 import trainer_base

    path, ckpt = tmp_path / "train.parquet", tmp_path / "ckpt"
    frame = make_pool(path, 40)

    def cfg(train=path, *extra):
        config = compose(base_overrides(str(train), tokenizer_dir, f"trainer.default_local_dir={ckpt}", *extra))
        OmegaConf.set_struct(config, True)
        return config

    # the checkpoint of a run, written as verl's _save_checkpoint writes data.pt
    first = _built(cfg())
    first._init_tokenizer()
    first._init_dataloader()
    next(iter(first.train_dataloader))
    (ckpt / "global_step_1").mkdir(parents=True)
    torch.save(first.train_dataloader.state_dict(), ckpt / "global_step_1" / "data.pt")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    ray.kill(first.bots_sampler.client.actor)

    def workers_would_start(self):
        raise WorkersWouldStart

    monkeypatch.setattr(trainer_base.PPOTrainer, "_init_resource_pool_mgr", workers_would_start)

    def resume(config, refused: str | None = None) -> None:
        trainer = _built(config)
        try:
            with pytest.raises(ValueError if refused else WorkersWouldStart) as raised:
                trainer.init()
            if refused:
                assert refused in str(raised.value)
                assert trainer.bots_sampler is None  # no posterior actor was created either
        finally:
            if trainer.bots_sampler is not None:
                ray.kill(trainer.bots_sampler.client.actor)

    swapped = "bots.reference_columns=[strong_pass_rate,weak_pass_rate]"
    resume(cfg())  # the same run resumes
    resume(cfg(path, swapped), "reference_columns: names ['weak_pass_rate', 'strong_pass_rate'] -> ['strong_pass_rate'")
    resume(cfg(path, swapped, "bots.resume.accept_changed=[reference_columns]"))
    # regenerated data: the same ids with other prompts, or other reference values
    regenerated = tmp_path / "regenerated" / "train.parquet"
    regenerated.parent.mkdir()
    frame.assign(prompt=[[{"role": "user", "content": "now " + p[0]["content"]}] for p in frame["prompt"]]).to_parquet(
        regenerated
    )
    resume(cfg(regenerated), "pool: the same 40 task ids with other prompts")
    resume(cfg(regenerated, "bots.resume.accept_changed=[pool]"))
    rescored = tmp_path / "rescored" / "train.parquet"
    rescored.parent.mkdir()
    frame.assign(weak_pass_rate=frame["weak_pass_rate"] / 2).to_parquet(rescored)
    resume(cfg(rescored), "reference_columns: values")
    # a changed hyperparameter: the one that lives in the posterior can never change
    resume(cfg(path, "+bots.hparams.lam=0.3"), "hparams: lam 0.1 -> 0.3 (accept with bots.resume.accept_changed")
    resume(cfg(path, "+bots.hparams.alpha0=2.0", "bots.resume.accept_changed=[hparams]"), "alpha0 1.0 -> 2.0 (no")
    # the success rule: what the posterior's successes mean (issue 59)
    resume(cfg(path, "bots.success.rule=acc"), "success: rule 'auto' threshold 0.0 -> rule 'acc' threshold 0.0 (accept")
    assert isinstance(pd.read_parquet(path), pd.DataFrame)  # the checkpoint's own data is untouched


def test_bad_settings_fail_in_constructor(config):
    config.data.dataloader_num_workers = 2
    with pytest.raises(ValueError, match="dataloader_num_workers"):
        _built(config)
    config.data.dataloader_num_workers = 0
    config.data.seed = None  # train_max_samples=30 with shuffle and no seed: another subset in every process
    with pytest.raises(ValueError, match="data.seed"):
        _built(config)
    config.data.seed = 5
    config.bots.replay_poll_interval = 0
    with pytest.raises(ValueError, match="replay_poll_interval"):
        _built(config)  # refused where the driver resolves the settings, before any trainer


def test_resume_without_the_posterior_is_refused(ray_tq, config, tmp_path):
    """A checkpoint whose data.pt is missing (or empty) would resume the model with the posterior back at the prior."""
    import torch

    ckpt = tmp_path / "ckpt"
    (ckpt / "global_step_2" / "actor").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    config.trainer.default_local_dir = str(ckpt)
    trainer = _built(config)
    with pytest.raises(FileNotFoundError, match="data.pt is missing"):
        trainer.init()  # refused before any worker starts

    # the same check after verl's own load (e.g. an empty data.pt): only the actor load is stubbed (it needs workers)
    torch.save({}, ckpt / "global_step_2" / "data.pt")
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer.actor_rollout_wg = type("Workers", (), {"load_checkpoint": lambda self, **kwargs: None})()
    with pytest.raises(FileNotFoundError, match="global_step_2 but its data.pt is missing or empty"):
        trainer._load_checkpoint()
