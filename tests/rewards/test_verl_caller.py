"""The rewards inside verl 0.9.1's own reward loop: its naive reward manager runs ``compute_score`` in the event
loop's thread pool (``loop.run_in_executor``), where math-verify's timeouts are off. Hostile answers must neither hang
that caller nor stall its event loop; all parts are verl's real ones (the tokenizer is built locally: no hub)."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
import torch

TOWER = "\\boxed{9^{9^{9^{9}}}}"


@pytest.fixture(scope="module")
def byte_tokenizer(tmp_path_factory):
    """A byte-level tokenizer (every text round-trips through encode/decode), built without the hub."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {"<pad>": 0, "<eos>": 1, **{char: i + 2 for i, char in enumerate(sorted(alphabet))}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    path = tmp_path_factory.mktemp("byte_tok")
    fast.save_pretrained(path)
    return PreTrainedTokenizerFast.from_pretrained(path)


def _batch(tokenizer, rows: list[tuple[str, str, str]]):
    from verl import DataProto

    prompt_len = 4
    responses = [tokenizer(text, add_special_tokens=False)["input_ids"] for _, text, _ in rows]
    width = max(len(r) for r in responses)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), prompt_len + width), dtype=torch.long)
    for i, response in enumerate(responses):
        ids[i, : len(response)] = torch.tensor(response)
        mask[i, : prompt_len + len(response)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": torch.zeros((len(rows), prompt_len), dtype=torch.long),
            "responses": ids,
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": np.array([source for source, _, _ in rows], dtype=object),
            "reward_model": np.array([{"ground_truth": truth} for _, _, truth in rows], dtype=object),
            "extra_info": np.array([{} for _ in rows], dtype=object),
        },
    )


def test_hostile_answers_in_verls_reward_loop(byte_tokenizer, sandbox: str) -> None:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import load_reward_manager

    config = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://bots_verl.rewards",
                    "name": "compute_score",
                    "reward_kwargs": {"timeout_s": 2},
                },
                "reward_manager": {"source": "register", "name": "naive"},
            }
        }
    )
    manager = load_reward_manager(config, byte_tokenizer)
    stdin = json.dumps({"inputs": ["2 3\n"], "outputs": ["5\n"]})
    rows = [
        ("math__dapo", TOWER, "4"),
        ("math__dapo", "so \\boxed{x^2+1}", "1+x^2"),
        ("codegen__taco", "```python\nwhile True:\n    pass\n```", stdin),
        ("codegen__taco", "```python\nimport os\nwhile True:\n    os.fork()\n```", stdin),
        ("codegen__taco", "```python\na, b = map(int, input().split())\nprint(a + b)\n```", stdin),
        ("simulation__arcagi1", "<answer>[[NaN, 1e999]]</answer>", json.dumps([[1, 1]])),
        ("logic__graph_logical_dataset", "<answer>" * 16_384, "ab"),
    ]
    data = _batch(byte_tokenizer, rows)
    gaps: list[float] = []

    async def heartbeat(stop: asyncio.Event) -> None:
        # If a scorer held the interpreter lock (math-verify without its timeouts did), these ticks would stall.
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.05)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def score_all() -> list[dict]:
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(stop))
        results = await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(rows))))
        stop.set()
        await beat
        return results

    start = time.monotonic()
    results = manager.loop.run_until_complete(score_all())
    elapsed = time.monotonic() - start
    assert [r["reward_score"] for r in results] == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert [r["reward_extra_info"]["acc"] for r in results] == [False, True, False, False, True, False, False]
    assert elapsed < 90  # hang guard: each answer has 2 s (plus math-worker and sandbox start-up)
    assert max(gaps) < 5  # the event loop kept running while the power tower was being checked


def test_code_is_scored_on_a_sandbox_fusion_server_from_verls_reward_loop(byte_tokenizer, monkeypatch) -> None:
    """``+reward.custom_reward_function.reward_kwargs.sandbox_fusion_url=...`` (a code recipe's override on a cluster
    without bubblewrap) reaches the code reward through verl's reward manager, and every program runs on that server,
    not in bubblewrap (made absent here: a program scored in bubblewrap would fail)."""
    from omegaconf import OmegaConf
    from sandbox_fusion_server import fake_sandbox_fusion
    from verl.trainer.ppo.reward import load_reward_manager

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # a proxy set in the environment must not see loopback requests
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setenv("BOTS_BWRAP", "/nonexistent/bwrap")
    stdin = json.dumps({"inputs": ["2 3\n", "10 -4\n"], "outputs": ["5\n", "6\n"]})
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    wrong = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"
    with fake_sandbox_fusion() as server:
        config = OmegaConf.create(
            {
                "reward": {
                    "custom_reward_function": {
                        "path": "pkg://bots_verl.rewards",
                        "name": "compute_score",
                        "reward_kwargs": {"sandbox_fusion_url": server.url, "timeout_s": 60},
                    },
                    "reward_manager": {"source": "register", "name": "naive"},
                }
            }
        )
        manager = load_reward_manager(config, byte_tokenizer)
        data = _batch(byte_tokenizer, [("codegen__taco", right, stdin), ("codegen__taco", wrong, stdin)])

        async def score_all() -> list[dict]:
            return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(2)))

        results = manager.loop.run_until_complete(score_all())
        assert [r["reward_score"] for r in results] == [1.0, 0.0]
        assert [r["reward_extra_info"]["acc"] for r in results] == [True, False]
        # both programs reached the server: one request per test case of the right one, at least one of the wrong one
        assert len(server.requests) >= 3 and all("input().split()" in r["code"] for r in server.requests)
