"""The hf rollout server as a real Ray actor: batching of concurrent requests, arrival-order independence, weights."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
import torch

from bots_verl.verl_cpu.hf_server import HFRolloutServer, ServerSettings

PARAMS = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def _settings(model_dir, seed: int = 42) -> ServerSettings:
    from transformers import AutoConfig

    return ServerSettings(
        hf_config=AutoConfig.from_pretrained(model_dir),
        local_path=str(model_dir),
        load_format="auto",
        dtype="float32",
        seed=seed,
        replica_rank=0,
        prompt_length=32,
        response_length=12,
        max_num_seqs=1024,
        stop_token_ids=(1,),
        pad_token_id=0,
    )


@pytest.fixture(scope="module")
def server(local_ray, toy_model_dir):
    """One server for the module (starting an actor costs seconds); the weight-update test runs last."""
    import ray

    actor = ray.remote(HFRolloutServer).options(num_cpus=0, max_concurrency=1000).remote(_settings(toy_model_dir))
    ray.get(actor.ready.remote())
    yield actor
    ray.kill(actor)


def _prompts(count: int) -> list[list[int]]:
    rng = random.Random(0)
    return [[rng.randrange(2, 20) for _ in range(rng.randrange(4, 12))] for _ in range(count)]


async def _dispatch(actor, requests: list[list[int]], shuffle_seed: int | None = None) -> list:
    order = list(range(len(requests)))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    refs = {}
    for i in order:
        refs[i] = actor.generate.remote(prompt_ids=requests[i], sampling_params=dict(PARAMS), request_id=str(i))
        if shuffle_seed is not None and i % 5 == 0:
            await asyncio.sleep(0.01)  # stagger arrivals: batches form differently
    return [await refs[i] for i in range(len(requests))]


def test_concurrent_requests_are_batched_and_arrival_order_does_not_change_the_samples(server, toy_model_dir):
    import ray

    prompts = _prompts(8)
    requests = [p for p in prompts for _ in range(4)]  # rollout.n = 4 sessions per prompt, as verl sends them
    first = asyncio.run(_dispatch(server, requests))
    stats = ray.get(server.stats.remote())
    assert stats["rows"] == 32 and stats["batches"] < 8, stats  # one generate per request would be 32 batches

    other = ray.remote(HFRolloutServer).options(num_cpus=0, max_concurrency=1000).remote(_settings(toy_model_dir))
    try:
        second = asyncio.run(_dispatch(other, requests, shuffle_seed=3))
        assert ray.get(other.stats.remote())["batches"] >= 1
    finally:
        ray.kill(other)

    def by_prompt(outputs):
        groups = {}
        for prompt, out in zip(requests, outputs, strict=True):
            groups.setdefault(tuple(prompt), Counter())[(tuple(out.token_ids), tuple(out.log_probs))] += 1
        return groups

    # the set of a prompt's responses is the same whatever the arrival order and batching
    assert by_prompt(first) == by_prompt(second)
    # and the sessions of one prompt are different samples, not copies
    assert all(len(c) > 1 for c in by_prompt(first).values())
    assert all(o.stop_reason == "completed" and o.extra_fields["global_steps"] is None for o in first)


def _server_config(server):
    import ray

    return ray.get(server.__ray_call__.remote(lambda self: self.model.config))


def test_bad_requests_are_clear_errors(server):  # before the weight update: any version will do
    import ray

    with pytest.raises(ray.exceptions.RayTaskError, match="text-only"):
        ray.get(server.generate.remote(prompt_ids=[3], sampling_params={}, request_id="x", image_data=[1]))
    with pytest.raises(ray.exceptions.RayTaskError, match="presence_penalty"):
        ray.get(server.generate.remote(prompt_ids=[3], sampling_params={"presence_penalty": 1.0}, request_id="y"))
    with pytest.raises(ray.exceptions.RayTaskError, match="empty prompt"):
        ray.get(server.generate.remote(prompt_ids=[], sampling_params={}, request_id="z"))
    ok = ray.get(server.generate.remote(prompt_ids=[3, 4], sampling_params={"max_tokens": 3}, request_id="w"))
    assert 1 <= len(ok.token_ids) <= 3


def _reference_log_probs(config, weights: dict[str, torch.Tensor], prompt: list[int], response: list[int]) -> list:
    """The response's log-probabilities (temperature 1) under a fresh transformers model holding ``weights``: what a
    server that took exactly these weights must report, computed without the server's code."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(weights)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(response)[:, None])[:, 0].tolist()


def test_weight_update_changes_the_policy_and_the_version(server):
    import ray

    prompt = _prompts(1)[0]
    before = ray.get(server.generate.remote(prompt_ids=prompt, sampling_params=dict(PARAMS), request_id="a"))
    from transformers import AutoModelForCausalLM

    config = _server_config(server)
    new = {k: v * 1.5 for k, v in AutoModelForCausalLM.from_config(config).state_dict().items()}
    ray.get(server.update_weights.remote(new, 7))
    after = ray.get(server.generate.remote(prompt_ids=prompt, sampling_params=dict(PARAMS), request_id="b"))
    assert after.extra_fields["global_steps"] == 7
    assert after.token_ids != before.token_ids or after.log_probs != before.log_probs
    # not only changed, but to the new weights: what it sampled has, under them, the probabilities it reported
    # (garbled, partly loaded or stale weights would report others)
    expected = _reference_log_probs(config, new, prompt, list(after.token_ids))
    assert after.log_probs == pytest.approx(expected, abs=1e-4)
    # and the check can tell: the old weights' report does not match the new weights
    stale = _reference_log_probs(config, new, prompt, list(before.token_ids))
    assert before.log_probs != pytest.approx(stale, abs=1e-4)
    with pytest.raises(ray.exceptions.RayTaskError, match="does not have"):
        ray.get(server.update_weights.remote({"no.such.weight": torch.zeros(1)}, 8))
    again = ray.get(server.generate.remote(prompt_ids=prompt, sampling_params=dict(PARAMS), request_id="c"))
    assert again.extra_fields["global_steps"] == 7  # the rejected update changed nothing
