"""GroupedAgentLoopManager writes to TransferQueue exactly what verl's AgentLoopManagerTQ writes.

Both managers run the same batch of toy prompts (``n`` sessions each) on real Ray and a real TransferQueue, with the
``hf`` rollout server, verl's ``RewardLoopWorker`` and the single-turn agent loop. Each manager gets a fresh server
with the same weights and seed, so the set of a prompt's responses is the same in both runs (the server's samples
depend on the weights, the prompt and how many identical requests came before); which session gets which sample
depends on arrival order, so records are compared per prompt as a multiset, without the session id. The batch mixes
clean prompts with injected failures: a session whose generation fails, a prompt whose every reward raises, and one
whose reward raises for some responses (the grouped worker then falls back to verl's per-session scoring).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from bots_verl.config.overrides import overridden_keys

N = 4
RESPONSE_LENGTH = 12
# extra_info.fail of the batch's rows: None (clean), "session" (the client fails the second request), or the
# reward's failure (flaky_reward.py)
FAILS = [None, None, "session", "always", "some", None, "some"]
TIMINGS = {"generate_sequences", "tool_calls", "compute_score"}


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=overrides)


def test_the_cpu_backend_selects_the_grouped_manager_unless_the_command_line_sets_one():
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
    from verl.utils.import_utils import load_class_from_fqn

    from bots_verl.verl_cpu import launch
    from bots_verl.verl_cpu.agent_loop import MANAGER_CLASS, GroupedAgentLoopManager

    key = "actor_rollout_ref.rollout.agent.agent_loop_manager_class"
    config = _compose(["trainer.device=cpu"])
    launch.apply_cpu_settings(config)
    assert config.actor_rollout_ref.rollout.agent.agent_loop_manager_class == MANAGER_CLASS
    # verl's task runner loads it by this name
    assert load_class_from_fqn(MANAGER_CLASS, "AgentLoopManager") is GroupedAgentLoopManager
    assert issubclass(GroupedAgentLoopManager, AgentLoopManagerTQ)
    user = [f"++{key}=null"]  # verl's own manager (the key is not in verl's yaml: ++ adds it)
    config = _compose(["trainer.device=cpu", *user])
    launch.apply_cpu_settings(config, overridden_keys(user))
    assert config.actor_rollout_ref.rollout.agent.agent_loop_manager_class is None


@pytest.fixture(scope="module")
def setup(local_ray, toy_model_dir, tmp_path_factory):
    """Config, a batch of prompts and the questions whose generation fails; TransferQueue on the local Ray."""
    import transfer_queue as tq
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils import hf_tokenizer
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    from bots_verl.verl_cpu import addition_task, launch

    tq.init()
    data_dir = tmp_path_factory.mktemp("agent_loop_data")
    frame = pd.read_parquet(addition_task.build_dataset(data_dir / "all.parquet", len(FAILS)))
    frame["extra_info"] = [{**info, "fail": fail} for info, fail in zip(frame["extra_info"], FAILS, strict=True)]
    frame.to_parquet(data_dir / "train.parquet")
    paths = {"train": str(data_dir / "train.parquet"), "val": str(data_dir / "train.parquet"), "model": toy_model_dir}
    overrides = [
        *addition_task.toy_overrides(paths, prompts=len(FAILS), n=N, response_length=RESPONSE_LENGTH),
        f"reward.custom_reward_function.path={Path(__file__).with_name('flaky_reward.py')}",
        "reward.custom_reward_function.name=compute_score",
    ]
    config = _compose(overrides)
    launch.apply_cpu_settings(config, overridden_keys(overrides))

    tokenizer = hf_tokenizer(str(toy_model_dir))
    dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)
    batch_dict = collate_fn([dataset[i] for i in range(len(FAILS))])
    batch_dict["uid"] = np.array([str(uuid.uuid4()) for _ in FAILS], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", 1)
    # the token ids of the question whose second generation request fails (a WordLevel tokenizer: one id per word)
    session_failing = [
        tuple(tokenizer.encode(row["prompt"][0]["content"], add_special_tokens=False))
        for row, fail in zip(frame.to_dict("records"), FAILS, strict=True)
        if fail == "session"
    ]
    return config, batch, session_failing


def _client(config, server, session_failing: list[tuple[int, ...]]):
    """verl's LLMServerClient routed straight to one server (no load balancer), failing chosen requests."""
    from verl.workers.rollout.llm_server import LLMServerClient

    class DirectClient(LLMServerClient):
        def __init__(self):
            super().__init__(config, load_balancer_handle=None)
            self.server = server
            self.seen: Counter = Counter()

        async def _acquire_server(self, request_id: str, **extra: Any):
            prompt = tuple(extra["prompt_ids"])
            self.seen[prompt] += 1
            failing = any(prompt[i : i + len(q)] == q for q in session_failing for i in range(len(prompt)))
            if failing and self.seen[prompt] == 2:
                raise RuntimeError("injected generation failure")
            return "0", self.server

        def _release_server(self, server_id: str, request_id: str | None = None) -> None:
            pass

    return DirectClient()


def _reward_worker(config):
    """verl's RewardLoopWorker as a Ray actor that counts its calls."""
    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    class CountingRewardWorker(RewardLoopWorker):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.counts: Counter = Counter()

        async def compute_score_batch(self, data):
            self.counts["batch_calls"] += 1
            self.counts["batch_rows"] += len(data)
            return await super().compute_score_batch(data)

        async def compute_score(self, data):
            self.counts["compute_score"] += 1  # a Ray call, or one row of compute_score_batch
            return await super().compute_score(data)

        def calls(self) -> dict[str, int]:
            return {
                "batched": self.counts["batch_calls"],
                "single": self.counts["compute_score"] - self.counts["batch_rows"],
            }

    return ray.remote(CountingRewardWorker).options(num_cpus=0).remote(config)


def _plain(value: Any) -> Any:
    """A comparable form of a value read back from TransferQueue (tensors with their dtype)."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            return ("nested", str(value.dtype), [_plain(t) for t in value.unbind()])
        return (str(value.dtype), tuple(value.shape), value.tolist())
    if hasattr(value, "tolist") and not isinstance(value, dict):
        return _plain(value.tolist())
    if hasattr(value, "data") and type(value).__name__.startswith("NonTensor"):
        return _plain(value.data)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _row(value: Any, i: int) -> Any:
    """Row ``i`` of a column read back from TransferQueue (regular or nested tensor, or non-tensor stack)."""
    if isinstance(value, torch.Tensor) and value.is_nested:
        return value.unbind()[i]
    return value[i]


def _record(tag: dict, fields) -> dict:
    """One trajectory's tag and fields, without its session id and with timings reduced to their names."""
    record = {name: _plain(_row(fields.get(name), 0)) for name in fields.keys()}
    record["metrics"] = {k: ("timing" if k in TIMINGS else v) for k, v in record["metrics"].items()}
    record.pop("session_id")
    return {"tag": tag, "fields": record}


def _run(manager_cls, config, batch, session_failing, server_settings) -> dict:
    """Run one manager on the batch; returns the prompts' tags and their trajectories, then clears them from TQ."""
    import ray
    import transfer_queue as tq
    from ray import cloudpickle

    from bots_verl.verl_cpu.hf_server import HFRolloutServer

    cloudpickle.register_pickle_by_value(__import__(__name__))
    server = ray.remote(HFRolloutServer).options(num_cpus=0, max_concurrency=1000).remote(server_settings)
    reward = _reward_worker(config)
    ray.get([server.ready.remote(), reward.calls.remote()])
    manager = manager_cls.create(
        config=config,
        llm_client=_client(config, server, session_failing),
        teacher_client=None,
        reward_loop_worker_handles=[reward],
    )
    uids = list(batch["uid"])
    try:
        tags = [{"is_prompt": True, "status": "pending", "global_steps": 1} for _ in uids]
        tq.kv_batch_put(keys=uids, partition_id="train", tags=tags)
        manager.generate_sequences(batch)
        deadline = time.monotonic() + 600
        while True:
            listing = tq.kv_list(partition_id="train")["train"]
            if all(listing[uid]["status"] in ("finished", "failure") for uid in uids):
                break
            assert time.monotonic() < deadline, {uid: listing[uid] for uid in uids}
            time.sleep(0.5)
        calls = ray.get(reward.calls.remote())
    finally:
        for worker in manager.agent_loop_workers:
            ray.kill(worker)
        ray.kill(server)
        ray.kill(reward)
    keys = sorted(key for key in listing if key.split("_")[0] in uids and key not in uids)
    result = {"prompts": {uid: listing[uid] for uid in uids}, "groups": {uid: [] for uid in uids}, "calls": calls}
    whole = tq.kv_batch_get(keys=keys, partition_id="train")
    result["columns"] = {
        name: (type(whole.get(name)).__name__, getattr(whole.get(name), "dtype", None)) for name in whole.keys()
    }
    for row, key in enumerate(keys):
        uid, session, index = key.split("_")
        one = tq.kv_batch_get(keys=[key], partition_id="train")
        assert one.keys() == whole.keys()
        for name in one.keys():  # a whole-batch read gives each row what a one-key read gives
            assert _plain(_row(one.get(name), 0)) == _plain(_row(whole.get(name), row)), (key, name)
        assert _plain(_row(one.get("session_id"), 0)) == int(session) and index == "0"
        result["groups"][uid].append(_record(listing[key], one))
    tq.kv_clear(keys=[*uids, *keys], partition_id="train")
    return result


def _canonical(group: list[dict]) -> list[str]:
    return sorted(repr(record) for record in group)


def test_grouped_worker_writes_what_verls_worker_writes(setup, toy_model_dir):
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
    from verl.utils.config import omega_conf_to_dataclass

    from bots_verl.verl_cpu.agent_loop import GroupedAgentLoopManager
    from bots_verl.verl_cpu.hf_rollout import server_settings

    config, batch, session_failing = setup
    assert session_failing
    # both servers read the toy weights (verl's default "dummy" format would initialise each at random)
    settings = dataclasses.replace(
        server_settings(omega_conf_to_dataclass(config.actor_rollout_ref.rollout), config.actor_rollout_ref.model, 0),
        load_format="auto",
    )
    verl = _run(AgentLoopManagerTQ, config, batch, session_failing, settings)
    ours = _run(GroupedAgentLoopManager, config, batch, session_failing, settings)

    statuses = [verl["prompts"][uid]["status"] for uid in batch["uid"]]
    sizes = [len(verl["groups"][uid]) for uid in batch["uid"]]
    # the injected failures happened as planned: clean groups finish, a lost session or reward fails its group, and
    # the failed group keeps the records of its other sessions
    for fail, status, size in zip(FAILS, statuses, sizes, strict=True):
        if fail is None:
            assert (status, size) == ("finished", N)
        elif fail == "session":
            assert (status, size) == ("failure", N - 1)
        elif fail == "always":
            assert (status, size) == ("failure", 0)
    assert any(fail == "some" and 0 < size < N for fail, size in zip(FAILS, sizes, strict=True)), sizes

    assert ours["prompts"] == verl["prompts"]
    assert ours["columns"] == verl["columns"]
    for uid in batch["uid"]:
        assert _canonical(ours["groups"][uid]) == _canonical(verl["groups"][uid]), uid
    # verl scores each session that reached scoring with its own call; ours calls once per prompt, and one by one (as
    # verl) only in the groups whose batched call failed
    reached = len(FAILS) * N - sum(fail == "session" for fail in FAILS)
    fallback = N * sum(fail in ("always", "some") and size < N for fail, size in zip(FAILS, sizes, strict=True))
    assert verl["calls"] == {"batched": 0, "single": reached}
    assert ours["calls"] == {"batched": len(FAILS), "single": fallback}
    # the records are real ones: a score per response, verl's reward_extra_info, the weight version tags
    record = verl["groups"][batch["uid"][0]][0]
    assert record["fields"]["extra_fields"]["reward_extra_info"].keys() == {"score", "acc", "chars"}
    assert record["tag"]["status"] == "success" and record["tag"]["global_steps"] == 1


def _counting_balancer(servers: dict):
    """verl's GlobalRequestLoadBalancer (as a Ray actor, through verl's factory) that counts its acquisitions."""
    from verl.workers.rollout.router import GlobalRequestLoadBalancer, get_router_handle

    class CountingBalancer(GlobalRequestLoadBalancer):
        acquired = 0

        def acquire_server(self, request_id: str):
            self.acquired += 1
            return super().acquire_server(request_id)

        def counts(self) -> tuple[int, int]:
            return self.acquired, self.get_total_inflight()

    return get_router_handle(servers=servers, load_balancer_cls=CountingBalancer)


def test_single_replica_client_asks_the_balancer_once_and_returns_what_verls_client_returns(setup, toy_model_dir):
    import asyncio

    import ray
    from ray import cloudpickle
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.rollout.llm_server import LLMServerClient

    from bots_verl.verl_cpu.agent_loop import SingleReplicaClient
    from bots_verl.verl_cpu.hf_rollout import server_settings
    from bots_verl.verl_cpu.hf_server import HFRolloutServer

    config = setup[0]
    cloudpickle.register_pickle_by_value(__import__(__name__))
    settings = dataclasses.replace(
        server_settings(omega_conf_to_dataclass(config.actor_rollout_ref.rollout), config.actor_rollout_ref.model, 0),
        load_format="auto",
    )
    prompts = [[5, 6, 7], [5, 6, 7], [8, 9], [5, 6, 7], [8, 9], [10], [10], [5, 6, 7]]
    params = {"temperature": 1.0, "logprobs": True}

    async def ask(client) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        outputs = await asyncio.gather(
            *(client.generate(f"r{i}", prompt_ids=p, sampling_params=params) for i, p in enumerate(prompts))
        )
        return sorted((tuple(p), tuple(o.token_ids)) for p, o in zip(prompts, outputs, strict=True))

    # two fresh servers: each of the one-replica runs gets one (the same samples from the same weights and seed),
    # the two-replica run then routes over both (it checks the routing, not the samples)
    servers = [ray.remote(HFRolloutServer).options(num_cpus=0, max_concurrency=1000).remote(settings) for _ in "ab"]
    ray.get([server.ready.remote() for server in servers])

    def run(wrap: bool, replicas: list):
        balancer = _counting_balancer({f"s{i}": server for i, server in enumerate(replicas)})
        client = LLMServerClient(config, load_balancer_handle=balancer)
        client.tokenizer = "the worker's tokenizer"  # an attribute the worker sets: carried over
        if wrap:
            client = SingleReplicaClient(client)
            assert client.tokenizer == "the worker's tokenizer" and client.config is config
        try:
            answers = asyncio.run(ask(client))
            time.sleep(0.5)  # verl's release is fire-and-forget
            return answers, ray.get(balancer.counts.remote())
        finally:
            ray.kill(balancer)

    try:
        verl_answers, verl_counts = run(wrap=False, replicas=servers[:1])
        ours_answers, ours_counts = run(wrap=True, replicas=servers[1:])
        # the same samples (a fresh server with the same weights and seed), the balancer asked once, not per request
        assert ours_answers == verl_answers and len({a[1] for a in verl_answers}) > 3
        assert verl_counts == (len(prompts), 0)
        assert ours_counts == (1, 0)
        # two replicas: every request is routed by the balancer (one more acquisition, the probe's), none in flight
        two_answers, two_counts = run(wrap=True, replicas=servers)
        assert len(two_answers) == len(prompts)
        assert two_counts == (len(prompts) + 1, 0)
    finally:
        for server in servers:
            ray.kill(server)
