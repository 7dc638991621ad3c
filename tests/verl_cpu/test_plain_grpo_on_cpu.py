"""verl's real actor update on the CPU backend against the plain-torch GRPO step of ``bots_verl.verl_cpu.plain_grpo``.

From the same initial weights, batch, rewards and settings (verl's actor defaults: AdamW lr 1e-6, betas (0.9, 0.999),
weight decay 0.01, torch's eps 1e-8, clip_grad 1.0, clip_ratio 0.2, one epoch, no shuffle, constant lr without
warm-up, no KL, no entropy term), one update runs through verl and one through the plain step; old log-probs,
advantages, loss, pre-clip gradient norm, gradients and updated weights must agree to float32 round-off.

verl's side is the path its V1 trainer takes, minus Ray and TransferQueue: in a fresh process (one gloo rank, the
CPU backend activated, the composed ``bots_trainer`` config with the CPU settings), ``ActorRolloutRefWorker(
role="actor").init_model()`` builds the FSDP2 engine; ``compute_log_prob`` gives the old log-probs (as
``trainer_base._compute_old_log_prob``), verl's ``compute_grpo_outcome_advantage`` the advantages
(``_compute_advantage``), and ``update_actor`` gets the nested TensorDict the agent loop stores plus the keys
``_update_actor`` sets. The worker methods are called directly: ``tqbridge`` passes a TensorDict through unchanged.

This check found that the CPU backend trained in bfloat16 although it set ``fsdp_config.dtype=float32``: verl's FSDP
engine never reads that key and takes FSDP2's param dtype (and its autocast dtype) from ``fsdp_config.
mixed_precision``, bfloat16 when unset. ``cpu_backend.yaml`` now sets ``mixed_precision``; without it the old
log-probs here differ by ~1e-2 and the gradients by ~5e-4.

Run as a script (``python tests/verl_cpu/test_plain_grpo_on_cpu.py OUT_JSON TOY_DIR TESTBED_DIR``) it writes the
differences of every case.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bots_verl.config.overrides import overridden_keys

ROOT = Path(__file__).resolve().parents[2]

PROMPTS, N, RESPONSE_LENGTH = 4, 4, 12
ROWS = PROMPTS * N
# (model, loss_agg_mode, micro-batch rows): token-mean over two micro-batches checks that verl normalises by the
# mini-batch's token count, not per micro-batch; the testbed model has tied embeddings (FSDP2 builds it differently)
CASES = (
    ("toy", "token-mean", ROWS // 2),
    ("toy", "seq-mean-token-sum", ROWS),
    ("toy", "seq-mean-token-mean", ROWS),
    ("testbed", "token-mean", ROWS),
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _batch(model_dir: str) -> dict:
    """Prompts of 4 lengths, sampled responses (some end at EOS), 0/1 scores: mixed groups and a uniform one."""
    import torch
    from transformers import AutoModelForCausalLM

    from bots_verl.verl_cpu.sampling import GenerationRequest, generate_batch

    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager")
    eos = model.generation_config.eos_token_id
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(4, model.config.vocab_size, (5 + 2 * i,), generator=gen) for i in range(PROMPTS)]
    rows = [p for p in prompts for _ in range(N)]
    requests = [
        GenerationRequest(p.tolist(), RESPONSE_LENGTH, seed=i, stop_token_ids=(eos,)) for i, p in enumerate(rows)
    ]
    responses = [torch.tensor(r.token_ids) for r in generate_batch(model, requests, pad_token_id=0)]
    scores = torch.tensor([1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1], dtype=torch.float32)
    return {"prompts": rows, "responses": responses, "scores": scores, "groups": [i // N for i in range(ROWS)]}


def _verl_update(model_dir: str, batch: dict, mode: str, micro: int) -> dict:
    """One actor update through verl's worker: loss, grad norm, lr, old log-probs, advantages, gradients, weights."""
    import numpy as np
    import torch
    from hydra import compose, initialize_config_module
    from tensordict import TensorDict
    from torch.distributed.tensor import DTensor
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine_workers import ActorRolloutRefWorker
    from verl.workers.utils.padding import response_from_nested, response_to_nested

    from bots_verl.verl_cpu import launch

    overrides = [
        "trainer.device=cpu",
        f"actor_rollout_ref.model.path={model_dir}",
        f"data.train_batch_size={PROMPTS}",
        f"actor_rollout_ref.rollout.n={N}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={ROWS}",
        f"actor_rollout_ref.actor.loss_agg_mode={mode}",
    ]
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        config = compose(config_name="bots_trainer", overrides=overrides)
    launch.apply_cpu_settings(config, overridden_keys(overrides))
    actor = config.actor_rollout_ref.actor
    worker = ActorRolloutRefWorker(config.actor_rollout_ref, role="actor")
    worker.init_model()

    def nested(tensors) -> torch.Tensor:
        return torch.nested.as_nested_tensor(list(tensors), layout=torch.jagged)

    def stored(**info) -> TensorDict:
        # what the agent loop puts in TransferQueue (prompt + response unpadded, positions 0..len-1) and extra_info
        seqs = [torch.cat([p, r]) for p, r in zip(batch["prompts"], batch["responses"], strict=True)]
        masks = [torch.ones_like(r) for r in batch["responses"]]
        data = TensorDict(
            {
                "prompts": nested(batch["prompts"]),
                "responses": nested(batch["responses"]),
                "response_mask": nested(masks),
                "loss_mask": nested(masks),
                "input_ids": nested(seqs),
                "position_ids": nested(torch.arange(len(s)) for s in seqs),
            },
            batch_size=ROWS,
        )
        for key, val in info.items():
            tu.assign_non_tensor_data(data, key, val)
        return data

    temperature = config.actor_rollout_ref.rollout.temperature
    out = worker.compute_log_prob(stored(calculate_entropy=True, compute_loss=False, temperature=temperature))
    train = stored(
        calculate_entropy=actor.calculate_entropy or actor.entropy_coeff != 0.0,
        distillation_use_topk=False,
        distillation_only=False,
        global_batch_size=actor.ppo_mini_batch_size * N,
        mini_batch_size=actor.ppo_mini_batch_size * N,
        epochs=actor.ppo_epochs,
        seed=actor.data_loader_seed,
        dataloader_kwargs={"shuffle": actor.shuffle},
        temperature=temperature,
    )
    old = response_from_nested(out["log_probs"], train["response_mask"])
    mask = train["response_mask"].to_padded_tensor(0)
    rewards = torch.zeros(mask.shape)
    rewards[torch.arange(ROWS), mask.sum(-1) - 1] = batch["scores"]
    adv, _ = compute_grpo_outcome_advantage(rewards, mask, np.array(batch["groups"], dtype=object))
    train["old_log_probs"], train["advantages"] = old, response_to_nested(adv, train["response_mask"])

    engine = worker.actor.engine
    module, optimizer_step, grads = engine.module, engine.optimizer_step, {}

    def full(t: torch.Tensor) -> torch.Tensor:
        return (t.full_tensor() if isinstance(t, DTensor) else t).detach().clone()

    def step_keeping_grads() -> float:
        # the engine zeroes gradients when it leaves train mode: keep them (clipped, as the optimizer saw them)
        grad_norm = optimizer_step()
        grads.update({k: full(p.grad) for k, p in module.named_parameters()})
        return grad_norm

    engine.optimizer_step = step_keeping_grads
    metrics = worker.update_actor(train)["metrics"]
    (loss,), (grad_norm,), (lr,) = metrics["loss"], metrics["grad_norm"], metrics["lr"]
    return {
        "loss": loss,
        "grad_norm": grad_norm,
        "lr": lr,
        "old_log_probs": old.to_padded_tensor(0.0),
        "advantages": adv[:, 0],
        "grads": grads,
        "weights": {k: full(p) for k, p in module.named_parameters()},
        "optim": dict(actor.optim),
    }


def _plain_update(model_dir: str, batch: dict, mode: str, optim: dict) -> dict:
    """The same update with the plain step and an AdamW built from verl's optimizer settings."""
    import torch
    from transformers import AutoModelForCausalLM

    from bots_verl.verl_cpu.plain_grpo import grpo_advantages, plain_grpo_step, response_log_probs

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    initial = {k: p.detach().clone() for k, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=optim["lr"], betas=tuple(optim["betas"]), weight_decay=optim["weight_decay"]
    )
    with torch.no_grad():
        old = response_log_probs(model.eval(), batch["prompts"], batch["responses"])
    masks = [torch.ones_like(r) for r in batch["responses"]]
    step = plain_grpo_step(
        model, optimizer, batch["prompts"], batch["responses"], masks, batch["scores"], batch["groups"],
        old_log_probs=old, loss_agg_mode=mode, grad_clip=optim["clip_grad"],
    )  # fmt: skip
    return {
        "loss": step.loss,
        "grad_norm": step.grad_norm,
        "old_log_probs": old,
        "advantages": grpo_advantages(batch["scores"], batch["groups"]),
        "grads": {k: p.grad.detach().clone() for k, p in model.named_parameters()},
        "weights": {k: p.detach().clone() for k, p in model.named_parameters()},
        "initial": initial,
    }


def _compare(verl: dict, plain: dict) -> dict:
    """Largest differences (and the scales they are judged against)."""
    import torch

    assert verl["weights"].keys() == plain["weights"].keys() == verl["grads"].keys()
    names = list(plain["weights"])
    w_v, w_p = (torch.cat([d[k].flatten() for k in names]) for d in (verl["weights"], plain["weights"]))
    w_0 = torch.cat([plain["initial"][k].flatten() for k in names])
    g_v, g_p = (torch.cat([d[k].flatten() for k in names]) for d in (verl["grads"], plain["grads"]))
    return {
        "verl_loss": verl["loss"],
        "loss_diff": abs(verl["loss"] - plain["loss"]),
        "verl_grad_norm": verl["grad_norm"],
        "grad_norm_diff": abs(verl["grad_norm"] - plain["grad_norm"]),
        "lr": verl["lr"],
        "old_log_prob_diff": float((verl["old_log_probs"] - plain["old_log_probs"]).abs().max()),
        "advantage_diff": float((verl["advantages"] - plain["advantages"]).abs().max()),
        "grad_diff": float((g_v - g_p).abs().max()),
        "grad_max": float(g_p.abs().max()),
        "weight_diff": float((w_v - w_p).abs().max()),
        # weights move by about lr in Adam's first step: judge their difference against the update itself
        "update_max": float((w_p - w_0).abs().max()),
        "update_rel_diff": float((w_v - w_p).norm() / (w_p - w_0).norm()),
    }


def main(out_path: str, toy_dir: str, testbed_dir: str) -> None:
    """Compare verl's update with the plain one for every case in one process; write the differences."""
    os.environ.update(
        {
            "RANK": "0",
            "WORLD_SIZE": "1",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(_free_port()),
        }
    )
    from bots_verl.verl_cpu import launch

    launch.activate()
    dirs = {"toy": toy_dir, "testbed": testbed_dir}
    batches = {name: _batch(path) for name, path in dirs.items()}
    results = {}
    for name, mode, micro in CASES:
        start = time.perf_counter()
        verl = _verl_update(dirs[name], batches[name], mode, micro)
        plain = _plain_update(dirs[name], batches[name], mode, verl["optim"])
        results[f"{name}/{mode}/{ROWS // micro}mb"] = {**_compare(verl, plain), "seconds": time.perf_counter() - start}
    Path(out_path).write_text(json.dumps(results, indent=1))


def _testbed_model(path: Path) -> Path:
    """A small testbed-architecture model (tied embeddings, the 18-symbol tokenizer) saved for verl to load."""
    from bots_verl.toy.model import ModelSpec, build_model
    from bots_verl.toy.tokenizer import build_tokenizer

    build_model(ModelSpec(hidden=64, layers=2, heads=4, intermediate=128), seed=0).save_pretrained(path)
    build_tokenizer(path)
    return path


def test_verl_update_equals_the_plain_grpo_step(tmp_path, toy_model_dir):
    out = tmp_path / "diffs.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    testbed = _testbed_model(tmp_path / "testbed")
    command = [sys.executable, __file__, str(out), str(toy_model_dir), str(testbed)]
    proc = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert len(results) == len(CASES)
    for case, r in results.items():
        # one float32 update of the same weights on the same inputs: same kernels on the same shapes give bitwise
        # equal results (measured: all 0 except the two-micro-batch gradients, 7e-9, a different summation order);
        # the bounds allow float32 round-off (rtol ~1e-5) should another CPU's kernels reorder sums
        assert r["lr"] == 1e-6, (case, r)  # verl's constant schedule without warm-up: step 1 uses the full lr
        assert r["old_log_prob_diff"] <= 1e-5, (case, r)  # log-probs ~ -3
        assert r["advantage_diff"] <= 1e-6, (case, r)
        assert r["loss_diff"] <= 1e-6 + 1e-5 * abs(r["verl_loss"]), (case, r)
        assert r["grad_norm_diff"] <= 1e-5 * r["verl_grad_norm"], (case, r)
        assert r["grad_diff"] <= 1e-5 * r["grad_max"], (case, r)
        assert r["weight_diff"] <= 1e-6, (case, r)
        # the weights moved by Adam's first step (~lr per weight) and moved alike; one weight whose tiny gradient
        # flipped sign under reordered sums would add 2 lr to a ~300 lr norm, hence 1e-2 rather than round-off
        assert math.isclose(r["update_max"], r["lr"], rel_tol=0.1), (case, r)
        assert r["update_rel_diff"] <= 1e-2, (case, r)


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_advantages_match_verls_grpo_estimator(norm_by_std):
    import numpy as np
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    from bots_verl.verl_cpu.plain_grpo import grpo_advantages

    # mixed, uniform and single-row groups, rows of one group not adjacent
    scores = torch.tensor([1.0, 0.0, 0.5, 1.0, 1.0, 0.0, 1.0, 0.25])
    groups = ["a", "b", "a", "c", "b", "a", "b", "d"]
    mask = torch.ones(len(scores), 3)
    rewards = torch.zeros_like(mask)
    rewards[:, -1] = scores
    expected, _ = compute_grpo_outcome_advantage(
        rewards, mask, np.array(groups, dtype=object), norm_adv_by_std_in_grpo=norm_by_std
    )
    assert torch.equal(grpo_advantages(scores, groups, norm_by_std), expected[:, 0])


def test_time_plain_step_reports_medians_of_a_full_step(toy_model_dir):
    from bots_verl.verl_cpu.plain_grpo import time_plain_step

    timing = time_plain_step(toy_model_dir, prompts=2, n=2, response_length=4, prompt_length=5, repeats=2)
    assert 0 < timing.gen_s and 0 < timing.old_log_prob_s and 0 < timing.update_s
    assert timing.step_s >= max(timing.gen_s, timing.old_log_prob_s, timing.update_s)
    assert math.isfinite(timing.loss) and timing.grad_norm >= 0


if __name__ == "__main__":
    main(*sys.argv[1:4])
