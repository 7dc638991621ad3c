"""Batched sampling of the hf rollout: a row's tokens depend only on the weights, its prompt, parameters and seed."""

from __future__ import annotations

import random

import pytest
import torch

from bots_verl.verl_cpu.sampling import MIN_ROWS, GenerationRequest, bucket_length, generate_batch, row_seed

EOS, PAD = 1, 0


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The rollout server generates with one intra-op thread (batch independence needs it; see sampling.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return LlamaForCausalLM(config).eval()


def _requests(count: int, seed: int = 0) -> list[GenerationRequest]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        out.append(
            GenerationRequest(
                prompt_ids=[rng.randrange(2, 64) for _ in range(rng.randrange(3, 40))],
                max_tokens=rng.randrange(4, 14),
                temperature=0.0 if i % 7 == 3 else 1.0,
                top_p=0.8 if i % 3 == 0 else 1.0,
                top_k=10 if i % 4 == 0 else -1,
                seed=row_seed("test", i),
                logprobs=True,
                stop_token_ids=(EOS,),
            )
        )
    return out


def test_a_row_is_independent_of_its_batch(model):
    """Tokens and log-probs of every row are bit-identical alone and inside any batch, in any order."""
    requests = _requests(24)
    alone = [generate_batch(model, [r], PAD)[0] for r in requests]
    rng = random.Random(1)
    for _ in range(4):
        chosen = rng.sample(range(len(requests)), rng.randrange(2, len(requests)))
        batch = generate_batch(model, [requests[i] for i in chosen], PAD)
        for i, result in zip(chosen, batch, strict=True):
            assert result.token_ids == alone[i].token_ids, i
            assert result.log_probs == alone[i].log_probs, i
    assert len({bucket_length(len(r.prompt_ids)) for r in requests}) > 1  # several padded widths were exercised


def test_limits_stops_and_greedy(model):
    requests = _requests(16, seed=2)
    for req, res in zip(requests, generate_batch(model, requests, PAD), strict=True):
        assert 1 <= len(res.token_ids) <= req.max_tokens
        if res.finish_reason == "stop":
            assert res.token_ids[-1] == EOS and EOS not in res.token_ids[:-1]
        else:
            assert res.finish_reason == "length" and len(res.token_ids) == req.max_tokens
        assert len(res.log_probs) == len(res.token_ids) and all(lp <= 0.0 for lp in res.log_probs)
    base = GenerationRequest([5, 6, 7, 8], 8, temperature=0.0)
    greedy = generate_batch(model, [base], PAD)[0]
    top1 = generate_batch(model, [GenerationRequest([5, 6, 7, 8], 8, top_k=1, seed=3)], PAD)[0]
    tiny_p = generate_batch(model, [GenerationRequest([5, 6, 7, 8], 8, top_p=1e-6, seed=4)], PAD)[0]
    assert greedy.token_ids == top1.token_ids == tiny_p.token_ids
    assert greedy.log_probs is None  # not requested


def test_seeds_and_weights_drive_the_samples(model):
    prompt = [3, 9, 27, 12]
    same = [generate_batch(model, [GenerationRequest(prompt, 12, seed=7)], PAD)[0].token_ids for _ in range(2)]
    assert same[0] == same[1]
    draws = {tuple(generate_batch(model, [GenerationRequest(prompt, 12, seed=s)], PAD)[0].token_ids) for s in range(8)}
    assert len(draws) > 1
    # the rollout comes from the current weights: other weights, other samples for the same seed
    with torch.no_grad():
        model.lm_head.weight.mul_(-1.0)
    try:
        flipped = generate_batch(model, [GenerationRequest(prompt, 12, seed=7)], PAD)[0].token_ids
    finally:
        with torch.no_grad():
            model.lm_head.weight.mul_(-1.0)
    assert flipped != same[0]


def test_row_seed_is_stable_and_distinct():
    assert row_seed(42, 0, 3, (1, 2), 0) == row_seed(42, 0, 3, (1, 2), 0)
    seeds = {row_seed(42, 0, 3, (1, 2), k) for k in range(100)} | {row_seed(42, 0, 4, (1, 2), 0)}
    assert len(seeds) == 101 and all(0 <= s < 2**63 for s in seeds)
    assert MIN_ROWS >= 4  # MKL's row-count-dependent kernels: 1, 2-3 and >= 4 rows differ (see sampling.py)
