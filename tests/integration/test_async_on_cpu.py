"""BOTS in verl's asynchronous modes, with real objects: the posterior Ray actor, TransferQueue, verl's
``ReplayBufferAsync`` and the sampler; the rollout is replaced by trajectories written the way verl's agent loop
writes them (with the policy-version tags ``min_global_steps`` / ``max_global_steps``).

Both async modes also run end to end on the CPU backend (``test_async_e2e_on_cpu.py``; ``separate_async`` syncs its
rollout with the ``cpu_gloo`` checkpoint engine), but the fault cases (stale, failed and lost groups, a lagging weight
sync) cannot be provoked on demand in a real run, so what an async step does around BOTS is driven here by hand:
dispatch (the sampler yields, verl assigns uids and registers the prompts), generation (trajectories appear), the
replay buffer's sample (training takes some groups, evicts others), and the posterior update of the trained batch.
"""

from __future__ import annotations

import copy
import io
import uuid

import numpy as np
import pytest
import torch
import transfer_queue as tq
from integration_helpers import base_overrides, compose, make_pool, put_trajectories
from omegaconf import OmegaConf
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync
from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from bots_verl.config.bots_config import BOTSConfig
from bots_verl.core import build_selector
from bots_verl.core.settings import SelectorSettings
from bots_verl.integration.evidence.outcomes import SuccessRule
from bots_verl.integration.evidence.staleness import session_lags
from bots_verl.integration.evidence.task_index import TaskIndex
from bots_verl.integration.hooks.async_trainer import (
    SYNC_HOOKS,
    BOTSColocateAsyncTrainer,
    BOTSSeparateAsyncTrainer,
    bots_trainer_class,
    registered_train_prompts,
)
from bots_verl.integration.hooks.trainer import BOTSTrainer
from bots_verl.integration.transport.inflight import InflightLedger
from bots_verl.integration.transport.sampler import BOTSSampler
from bots_verl.integration.transport.selector_client import SelectorClient
from bots_verl.integration.transport.selector_service import create_selector_service
from bots_verl.main import check_config

N_ROLLOUTS = 4
TASK_BASE = 1000  # task ids differ from positions, as after filtering


def _reference(num_tasks):
    rng = np.random.default_rng(0)
    return np.sort(rng.integers(0, 17, size=(num_tasks, 2)) / 16, axis=1)


def _wins(position: int, step: int) -> list[float]:
    """A deterministic 'policy': how often a task succeeds depends on it and on the step."""
    return [float((position * 5 + s * 3 + step) % 7 < 3) for s in range(N_ROLLOUTS)]


def _clear_train_partition() -> None:
    keys = list((tq.kv_list("train") or {}).get("train", {}))
    if keys:
        tq.kv_clear(keys=keys, partition_id="train")


@pytest.fixture()
def clean_train_partition(ray_tq):
    """TransferQueue's ``train`` partition holds this test's keys only (the replay buffer reads all of it)."""
    _clear_train_partition()
    yield
    _clear_train_partition()


class Cluster:
    """One async run's BOTS side: posterior actor, sampler with its ledger, and the prompts it dispatched."""

    def __init__(self, num_tasks: int, select_size: int, *, seed: int = 3, stale_after: int | None = None):
        self.num_tasks = num_tasks
        actor = create_selector_service(
            f"async_{uuid.uuid4().hex[:8]}",
            "bots_tests",
            settings=SelectorSettings("bots", seed=seed),
            num_tasks=num_tasks,
            reference_pass_rates=_reference(num_tasks),
        )
        self.sampler = BOTSSampler(
            SelectorClient(actor), num_tasks, select_size, [TASK_BASE + p for p in range(num_tasks)]
        )
        self.sampler.track_inflight(InflightLedger(stale_after), registered_train_prompts)
        self.it = iter(self.sampler)
        self.dispatched: dict[str, tuple[int, int]] = {}  # uid -> (position, step), as verl's prompt tags hold

    def dispatch(self, count: int, step: int) -> list[int]:
        """verl's ``_add_prompts_to_generate`` with gen_batch_size=1: fetch, assign uids, register the prompts."""
        positions = []
        for i in range(count):
            position = next(self.it)
            uid = f"s{step}p{len(self.dispatched)}i{i}"  # deterministic, so a resumed run names its prompts alike
            tq.kv_batch_put(
                keys=[uid], partition_id="train", tags=[{"is_prompt": True, "status": "pending", "global_steps": step}]
            )
            self.sampler.bind_uids([uid], step)
            self.dispatched[uid] = (position, step)
            positions.append(position)
        return positions

    def finish(self, uids: list[str], version_of) -> None:
        """The rollout: trajectories for ``uids`` written as verl's agent loop does, then the prompts 'finished'."""
        for uid in uids:
            position, step = self.dispatched[uid]
            prompt = {"uid": uid, "index": TASK_BASE + position, "extra_info": {"index": TASK_BASE + position}}
            keys, tags = put_trajectories([{**prompt, "global_steps": step}], [_wins(position, step)])
            version = version_of(uid)
            dated = [{**tag, "min_global_steps": version, "max_global_steps": version} for tag in tags]
            tq.kv_batch_put(keys=keys, partition_id="train", tags=dated)
            tq.kv_batch_put(keys=[uid], partition_id="train", tags=[{"status": "finished"}])

    def trained_batch(self, uids: list[str]) -> KVBatchMeta:
        """What the replay buffer hands the trainer for these groups: their trajectories; the prompt keys go."""
        items = (tq.kv_list("train") or {}).get("train", {})
        keys = sorted(k for k in items if not items[k].get("is_prompt") and k.split("_")[0] in uids)
        tq.kv_clear(keys=uids, partition_id="train")
        return KVBatchMeta(partition_id="train", keys=keys, tags=[items[k] for k in keys])


def _trainer(cluster: Cluster, global_steps: int, cls=BOTSColocateAsyncTrainer):
    """The async trainer's BOTS state, without verl's workers (``update_from_trained_batch`` needs nothing else)."""
    trainer = cls.__new__(cls)
    trainer.bots = BOTSConfig(selector="bots", seed=3, reference_columns=["weak", "strong"])
    trainer._bots_rule = SuccessRule("auto", 0.0)
    trainer._bots_evicted = []
    trainer.bots_task_index = TaskIndex([TASK_BASE + p for p in range(cluster.num_tasks)], "extra_info.index")
    trainer.bots_sampler = cluster.sampler
    trainer.global_steps = global_steps
    return trainer


def _posterior(cluster: Cluster):
    state, _ = cluster.sampler.client._call("state_dict")
    return state["extra"]["posterior"]["alpha"], state["extra"]["posterior"]["beta"]


# ------------------------------------------------------------------------------------------------ the ledger
def test_ledger_binds_releases_and_expires():
    ledger = InflightLedger(stale_after=2)
    for position in (4, 7, 4):
        ledger.dispatched(position)
    ledger.bind(["a", "b"], step=1)
    ledger.bind(["c"], step=2)
    assert ledger.positions() == {"a": 4, "b": 7, "c": 4}
    assert ledger.blocking() == [4, 7]
    assert ledger.retain({"b", "c", "other"}) == 1
    ledger.tick(3)  # b (step 1) spans 3 steps > 2: it no longer blocks; c (step 2) spans 2
    assert ledger.blocking() == [4]
    with pytest.raises(ValueError, match="2 prompt uids for 0 dispatched"):
        ledger.bind(["d", "e"], step=3)
    ledger.dispatched(1)
    with pytest.raises(ValueError, match="already in flight"):
        ledger.bind(["c"], step=3)


@pytest.mark.parametrize(
    "state, message",
    [
        ({"entries": [["a", 99, 1]]}, "position"),
        ({"entries": [["a", 1, -1]]}, "step"),
        ({"entries": [["a", 1]]}, "uid, position, step"),
        ({"entries": [["a", 1, 1], ["a", 2, 1]]}, "repeats"),
        ({"clock": 3}, "entries"),
    ],
)
def test_ledger_refuses_a_bad_checkpoint_and_keeps_its_state(state, message):
    ledger = InflightLedger()
    ledger.dispatched(3)
    ledger.bind(["x"], step=1)
    with pytest.raises(ValueError, match=message):
        ledger.load_state_dict(state, num_tasks=10)
    assert ledger.positions() == {"x": 3}


# ------------------------------------------------------------------------------------------------ selection
def test_tasks_in_flight_sit_out_the_next_selection(clean_train_partition):
    cluster = Cluster(num_tasks=16, select_size=4)
    cluster.sampler.begin_step(1)
    warmup = cluster.dispatch(4, step=1)  # verl's async warm-up batch
    first = cluster.dispatch(4, step=1)
    assert not set(warmup) & set(first)
    # step 1 trains the warm-up groups; the step's own four are still generating
    warm_uids = list(cluster.dispatched)[:4]
    cluster.finish(warm_uids, version_of=lambda uid: 0)
    trainer = _trainer(cluster, global_steps=1)
    metrics = trainer.update_from_trained_batch(cluster.trained_batch(warm_uids))
    assert metrics["bots/inflight_groups"] == 4.0 and metrics["bots/lag_max"] == 0.0
    cluster.sampler.begin_step(2)
    second = cluster.dispatch(4, step=2)
    assert not set(second) & set(first), "a task still in flight was selected again"
    assert set(cluster.sampler.inflight.positions().values()) == set(first) | set(second)


def test_a_pool_too_small_falls_back_to_the_best_ranked_tasks_in_flight(clean_train_partition):
    cluster = Cluster(num_tasks=6, select_size=4)
    cluster.sampler.begin_step(1)
    first = cluster.dispatch(4, step=1)
    cluster.sampler.forward_update(
        np.array([5]), np.array([1.0]), np.array([4.0])
    )  # a new posterior: a fresh selection
    second = cluster.dispatch(4, step=1)
    free = set(range(6)) - set(first)
    assert free <= set(second) and len(set(second)) == 4
    assert cluster.sampler.end_step()["inflight_fallbacks"] == 2.0


def test_selection_with_tasks_in_flight_is_deterministic(clean_train_partition):
    def run():
        cluster = Cluster(num_tasks=20, select_size=3, seed=9)
        out = []
        for step in (1, 2, 3):
            cluster.sampler.begin_step(step)
            out.append(cluster.dispatch(3, step))
            oldest = list(cluster.sampler.inflight.positions())[:3]
            cluster.finish(oldest, version_of=lambda uid: cluster.dispatched[uid][1] - 1)
            _trainer(cluster, step).update_from_trained_batch(cluster.trained_batch(oldest))
            cluster.sampler.end_step()
        _clear_train_partition()
        return out, _posterior(cluster)

    (sel_a, (alpha_a, beta_a)), (sel_b, (alpha_b, beta_b)) = run(), run()
    assert sel_a == sel_b
    assert alpha_a.tobytes() == alpha_b.tobytes() and beta_a.tobytes() == beta_b.tobytes()


# ------------------------------------------------------------------------------------------------ evidence
def test_evidence_from_a_lagging_weight_sync_is_weighed_by_its_age(clean_train_partition):
    """Groups generated by policies 0, 1 and 2 versions behind the trained one (a weight sync that lags)."""
    cluster = Cluster(num_tasks=12, select_size=3)
    cluster.sampler.begin_step(4)
    positions = cluster.dispatch(3, step=4)
    uids = list(cluster.dispatched)
    versions = dict(zip(uids, (3, 2, 1), strict=True))  # step 4 trains version 3: lags 0, 1, 2
    cluster.finish(uids, version_of=versions.get)
    batch = cluster.trained_batch(uids)
    assert sorted(session_lags(batch.keys, batch.tags, 3).values()) == [0] * 4 + [1] * 4 + [2] * 4
    metrics = _trainer(cluster, global_steps=4).update_from_trained_batch(batch)
    assert metrics["bots/lag_max"] == 2.0 and metrics["bots/rollouts"] == 12.0

    expected = build_selector("bots", 12, reference_pass_rates=_reference(12), seed=3)
    expected.select(3)  # the sampler's one selection, so the RNG and diagnostics line up
    order = np.argsort(positions)
    idx = np.array(positions)[order]
    wins = np.array([sum(_wins(p, 4)) for p in positions])[order]
    lags = np.array([0, 1, 2])[order]
    expected.update(idx, wins, np.full(3, 4.0), lags=lags)
    alpha, beta = _posterior(cluster)
    assert alpha.tobytes() == expected.alpha.tobytes() and beta.tobytes() == expected.beta.tobytes()


def test_stale_and_failed_groups_evicted_by_verl_give_no_evidence(clean_train_partition):
    """verl's real ReplayBufferAsync drops a group too old for ``max_off_policy_threshold`` and a failed one; the
    posterior hears only of the group it trains, and the ledger lets go of all three."""
    cluster = Cluster(num_tasks=10, select_size=1)
    cluster.sampler.begin_step(1)
    stale_pos, failed_pos = cluster.dispatch(1, step=1)[0], cluster.dispatch(1, step=1)[0]
    cluster.sampler.forward_update(np.array([9]), np.array([0.0]), np.array([1.0]))  # let later selections differ
    cluster.sampler.begin_step(4)
    fresh_pos = cluster.dispatch(1, step=4)[0]
    stale_uid, failed_uid, fresh_uid = list(cluster.dispatched)
    cluster.finish([stale_uid, fresh_uid], version_of=lambda uid: cluster.dispatched[uid][1] - 1)
    tq.kv_batch_put(keys=[failed_uid], partition_id="train", tags=[{"status": "failure"}])
    refills = []
    buffer = ReplayBufferAsync(
        trainer_mode="colocate_async",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=2,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        poll_interval=0.01,
        refill_fn=refills.append,
    )
    batch, metrics = buffer.sample(global_steps=4, partition_id="train", batch_size=1)
    assert metrics["training/off_policy/evicted_samples"] == 1 and refills == [2]
    assert {key.split("_")[0] for key in batch.keys} == {fresh_uid}

    update = _trainer(cluster, global_steps=4).update_from_trained_batch(batch)
    assert update["bots/rollouts"] == float(N_ROLLOUTS) and update["bots/inflight_groups"] == 0.0
    # the same selector fed the trained group alone (its selections replayed: sizes 1, 2, then 1 + 2 in flight)
    expected = build_selector("bots", 10, reference_pass_rates=_reference(10), seed=3)
    for size in (1, 2):
        expected.select(size)
    expected.update([9], [0.0], [1.0])
    expected.select(3)
    expected.update([fresh_pos], [sum(_wins(fresh_pos, 4))], [float(N_ROLLOUTS)], lags=[0])
    alpha, beta = _posterior(cluster)
    assert alpha.tobytes() == expected.alpha.tobytes() and beta.tobytes() == expected.beta.tobytes()
    assert len({stale_pos, failed_pos, fresh_pos}) == 3


def test_a_rollout_that_never_returns_blocks_its_task_only_until_it_is_too_old(clean_train_partition):
    cluster = Cluster(num_tasks=5, select_size=5, stale_after=2)
    cluster.sampler.begin_step(1)
    lost = cluster.dispatch(1, step=1)[0]  # its prompt stays 'pending' in TransferQueue for ever
    lost_uid = next(iter(cluster.dispatched))
    for step in (1, 2, 3):
        cluster.sampler.forward_update(
            np.array([4]), np.array([1.0]), np.array([2.0])
        )  # a step's update: fresh selection
        cluster.sampler.begin_step(step)
        picked = cluster.dispatch(5, step)
        fallbacks = cluster.sampler.end_step()["inflight_fallbacks"]
        if step < 3:  # spans 1 and 2 steps: the lost group still blocks; the pool is too small, so it comes last
            assert picked[-1] == lost and lost not in picked[:-1] and fallbacks == 1.0
        else:  # spans 3 steps > max_off_policy_threshold: verl would drop it; its task is an ordinary one again
            assert lost in picked and fallbacks == 0.0
        # every group but the lost one is trained (the replay buffer clears its prompt key)
        tq.kv_clear(keys=[u for u in cluster.dispatched if u != lost_uid], partition_id="train")
    assert lost_uid in cluster.sampler.inflight.positions()  # still in flight, it just no longer blocks


# ------------------------------------------------------------------------------------------------ resume
def test_kill_and_resume_neither_double_counts_nor_drops_evidence(clean_train_partition):
    """An async run saved at step 2 (posterior, ledger; verl saves TransferQueue beside it) and resumed by a fresh
    posterior actor continues exactly like the run that was not interrupted: same selections, same posterior, and
    every trained group's rollouts counted once."""

    def step(cluster, t):
        cluster.sampler.begin_step(t)
        picked = cluster.dispatch(3, t)
        oldest = list(cluster.sampler.inflight.positions())[:3]  # training takes the oldest finished groups
        cluster.finish(oldest, version_of=lambda uid: cluster.dispatched[uid][1] - 1)
        _trainer(cluster, t).update_from_trained_batch(cluster.trained_batch(oldest))
        cluster.sampler.end_step()
        return picked, oldest

    run = Cluster(num_tasks=15, select_size=3, seed=4)
    run.sampler.begin_step(1)
    run.dispatch(3, 1)  # warm-up
    for t in (1, 2):
        step(run, t)
    buffer = io.BytesIO()
    torch.save(run.sampler.state_dict(), buffer)  # data.pt
    in_flight = {u: run.dispatched[u] for u in registered_train_prompts()}  # verl's TransferQueue checkpoint
    dispatched_at_save = dict(run.dispatched)
    tail = [step(run, t) for t in (3, 4)]
    uninterrupted = _posterior(run), run.sampler.rollouts_received

    # the restart: TransferQueue restored from its checkpoint, a new actor, data.pt loaded
    _clear_train_partition()
    tq.kv_batch_put(
        keys=list(in_flight),
        partition_id="train",
        tags=[{"is_prompt": True, "status": "pending", "global_steps": s} for _, s in in_flight.values()],
    )
    resumed = Cluster(num_tasks=15, select_size=3, seed=123)  # the seed is the checkpoint's
    buffer.seek(0)
    resumed.sampler.load_state_dict(torch.load(buffer, weights_only=True))
    resumed.dispatched = dict(dispatched_at_save)
    assert resumed.sampler.inflight.positions() == {u: p for u, (p, _) in in_flight.items()}
    assert [step(resumed, t) for t in (3, 4)] == tail
    (alpha, beta), attempts = _posterior(resumed), resumed.sampler.rollouts_received
    assert alpha.tobytes() == uninterrupted[0][0].tobytes() and beta.tobytes() == uninterrupted[0][1].tobytes()
    # 3 warm-up + 3 per step dispatched, 3 groups trained per step: 4 steps x 3 groups x N_ROLLOUTS, each once
    assert attempts == uninterrupted[1] == 4 * 3 * N_ROLLOUTS


# ------------------------------------------------------------------------------------------------ trainers, config
def test_async_trainers_are_verls_mode_classes_with_bots_in_front():
    assert set(SYNC_HOOKS) == {k for k, v in vars(PPOTrainerSync).items() if callable(v) and not k.startswith("__")}
    for cls, mode_cls, mode in (
        (BOTSColocateAsyncTrainer, PPOTrainerColocateAsync, "colocate_async"),
        (BOTSSeparateAsyncTrainer, PPOTrainerSeparateAsync, "separate_async"),
    ):
        assert bots_trainer_class(mode) is cls and issubclass(cls, (BOTSTrainer, mode_cls))
        for hook in SYNC_HOOKS:
            assert getattr(cls, hook) is getattr(mode_cls, hook), hook
        assert cls.prepare_step is mode_cls.prepare_step and cls.step is BOTSTrainer.step
    assert bots_trainer_class("sync") is BOTSTrainer
    with pytest.raises(ValueError, match="fully_async"):
        bots_trainer_class("fully_async")


SEPARATE = [
    "trainer.v1.trainer_mode=separate_async",
    "trainer.v1.separate_async.parameter_sync_step=1",
    "actor_rollout_ref.rollout.nnodes=1",
    "actor_rollout_ref.rollout.n_gpus_per_node=1",
    "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl",
]


def test_async_modes_pass_the_dry_run_checks(tmp_path, tokenizer_dir):
    pool = tmp_path / "train.parquet"
    make_pool(pool, 12)
    assert check_config(compose(base_overrides(str(pool), tokenizer_dir, "trainer.v1.trainer_mode=colocate_async")))
    assert check_config(compose(base_overrides(str(pool), tokenizer_dir, *SEPARATE)))


@pytest.mark.parametrize(
    "replace, message",
    [
        ("trainer.v1.separate_async.parameter_sync_step=2", "parameter_sync_step"),
        ("actor_rollout_ref.rollout.nnodes=0", "rollout.nnodes"),
        ("actor_rollout_ref.rollout.checkpoint_engine.backend=naive", "checkpoint_engine.backend=naive"),
    ],
)
def test_separate_async_settings_verl_would_assert_on_are_named_before_ray(tmp_path, tokenizer_dir, replace, message):
    pool = tmp_path / "train.parquet"
    make_pool(pool, 12)
    key = replace.split("=")[0]
    overrides = [replace if o.split("=")[0] == key else o for o in SEPARATE]
    with pytest.raises(ValueError, match=message):
        check_config(compose(base_overrides(str(pool), tokenizer_dir, *overrides)))


def test_a_sync_checkpoint_resumes_in_an_async_run_with_nothing_in_flight(clean_train_partition):
    sync = Cluster(num_tasks=8, select_size=2)
    sync.sampler.inflight = None  # a sync run's sampler
    state = copy.deepcopy(sync.sampler.state_dict())
    assert state["inflight"] is None
    resumed = Cluster(num_tasks=8, select_size=2)
    resumed.sampler.load_state_dict(state)
    assert len(resumed.sampler.inflight) == 0
