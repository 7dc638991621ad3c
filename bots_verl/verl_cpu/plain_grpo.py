"""A plain-torch GRPO step: the reference the CPU backend's update is checked against, and a step's compute floor.

:func:`plain_grpo_step` does with a transformers causal LM what one verl 0.9.1 actor update does with the defaults
BOTS runs (``tests/verl_cpu/test_plain_grpo_on_cpu.py`` checks it against verl's real engine): GRPO outcome
advantages (``core_algos.compute_grpo_outcome_advantage``), the vanilla dual-clip PPO loss
(``compute_policy_loss_vanilla``) aggregated by ``agg_loss``, no KL and no entropy term, the gradient norm clipped
to ``optim.clip_grad`` and one optimizer step. :func:`time_plain_step` times sampling, old log-probs and that
update with nothing else around them. A reference, not a training path.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Hashable, Sequence
from pathlib import Path

import torch

__all__ = ["PlainStep", "grpo_advantages", "plain_grpo_step", "policy_loss", "response_log_probs", "time_plain_step"]


@dataclasses.dataclass
class PlainStep:
    """One update's loss and gradient norm before clipping (verl's ``actor/grad_norm``); timings in seconds."""

    loss: float
    grad_norm: float
    step_s: float = 0.0
    gen_s: float = 0.0
    old_log_prob_s: float = 0.0
    update_s: float = 0.0


def grpo_advantages(
    scores: torch.Tensor, group_ids: Sequence[Hashable], norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Per-row GRPO advantages as verl computes them.

    ``(score - mean) / (std + eps)`` within each group (``score - mean`` without ``norm_by_std``), with
    ``torch.std``'s unbiased (n - 1) std; a group of one gets mean 0 and std 1.
    """
    adv = scores.clone()
    for gid in dict.fromkeys(group_ids):
        rows = torch.tensor([i for i, g in enumerate(group_ids) if g == gid])
        group = scores[rows]
        mean, std = (group.mean(), group.std()) if len(rows) > 1 else (torch.tensor(0.0), torch.tensor(1.0))
        adv[rows] = (group - mean) / (std + eps) if norm_by_std else group - mean
    return adv


def response_log_probs(
    model: torch.nn.Module, prompt_ids: Sequence[torch.Tensor], response_ids: Sequence[torch.Tensor],
    pad_token_id: int = 0, temperature: float = 1.0,
) -> torch.Tensor:  # fmt: skip
    """Log-probabilities ``(rows, longest response)`` of the response tokens, 0 past a response's end.

    Prompt + response right-padded: the layout of verl's FSDP engine without ``use_remove_padding``, so both run
    the same shapes (and, in float32, give bitwise the same numbers).
    """
    seqs = [torch.cat([p, r]) for p, r in zip(prompt_ids, response_ids, strict=True)]
    width = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    for i, seq in enumerate(seqs):
        input_ids[i, : len(seq)], attention[i, : len(seq)] = seq, 1
    positions = torch.arange(width).unsqueeze(0) * attention
    logits = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=False).logits
    logits = logits.float() / temperature if temperature != 1.0 else logits.float()
    # the token at position t is predicted by the logits at t - 1
    labels = torch.roll(input_ids, -1, dims=1).unsqueeze(-1)
    token_lp = logits.gather(-1, labels).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    out = torch.zeros(len(seqs), max(len(r) for r in response_ids))
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        out[i, : len(r)] = token_lp[i, len(p) - 1 : len(p) + len(r) - 1]
    return out


def policy_loss(
    log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
    mode: str = "token-mean", clip: float = 0.2, clip_c: float = 3.0,
) -> torch.Tensor:  # fmt: skip
    """verl's vanilla PPO loss (ratio clipped to ``1 +- clip``, dual clip at ``clip_c``) aggregated like ``agg_loss``.

    The seq-mean modes divide by the row count: verl's V1 trainer passes the mini-batch size as ``global_batch_size``.
    """
    if mode not in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        raise ValueError(f"unsupported loss_agg_mode {mode!r}")
    ratio = torch.exp(torch.clamp(log_probs - old_log_probs, -20.0, 20.0))
    clipped = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip, 1 + clip))
    losses = torch.where(advantages < 0, torch.minimum(-advantages * clip_c, clipped), clipped)
    if mode == "token-mean":
        return (torch.where(mask.bool(), losses, 0.0) * mask).sum() / mask.sum()
    per_seq = (losses * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / (mask.sum(-1) + 1e-8)
    return per_seq.sum() / len(per_seq)


def plain_grpo_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, prompt_ids: Sequence[torch.Tensor],
    response_ids: Sequence[torch.Tensor], response_mask: Sequence[torch.Tensor], scores: torch.Tensor,
    group_ids: Sequence[Hashable], *, old_log_probs: torch.Tensor | None = None, loss_agg_mode: str = "token-mean",
    clip_ratio: float = 0.2, grad_clip: float = 1.0, norm_adv_by_std: bool = True, pad_token_id: int = 0,
    temperature: float = 1.0,
) -> PlainStep:  # fmt: skip
    """One GRPO update of ``model`` in place; ids and masks are 1-D per row, ``scores`` one per row.

    ``old_log_probs`` (:func:`response_log_probs`'s layout) default to the current policy's (ratio 1). As in verl,
    a non-finite gradient norm skips the optimizer step.
    """
    mask = torch.zeros(len(response_ids), max(len(r) for r in response_ids))
    for i, m in enumerate(response_mask):
        mask[i, : len(m)] = m.float()
    advantages = grpo_advantages(torch.as_tensor(scores, dtype=torch.float32), group_ids, norm_adv_by_std)
    advantages = advantages.unsqueeze(-1) * mask
    if old_log_probs is None:
        with torch.no_grad():
            old_log_probs = response_log_probs(model, prompt_ids, response_ids, pad_token_id, temperature)
    model.train()
    optimizer.zero_grad()
    log_probs = response_log_probs(model, prompt_ids, response_ids, pad_token_id, temperature)
    loss = policy_loss(log_probs, old_log_probs, advantages, mask, loss_agg_mode, clip_ratio)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if torch.isfinite(grad_norm):
        optimizer.step()
    return PlainStep(loss=float(loss.detach()), grad_norm=float(grad_norm))


def time_plain_step(
    model: torch.nn.Module | str | Path, *, prompts: int = 8, n: int = 4, response_length: int = 16,
    prompt_length: int = 11, repeats: int = 5, lr: float = 1e-6, seed: int = 0,
) -> PlainStep:  # fmt: skip
    """Median wall seconds of a full plain step (sampling, old log-probs, update) over ``repeats``, after a warm-up.

    Args:
        model: a causal LM or its directory (``toy.build_model``), trained in place; torch's threads stay as set.
        prompts: random prompts of ``prompt_length`` ids (>= 4: past both toy vocabularies' special tokens).
        n: rollouts per prompt, each up to ``response_length`` tokens (:func:`~.sampling.generate_batch`).
        repeats: timed steps.
        lr: AdamW's learning rate (betas and weight decay: verl's defaults).
        seed: seed of prompts, sampling and the random 0/1 scores that stand in for a reward.

    Returns:
        Medians of ``step_s`` and of its parts ``gen_s``, ``old_log_prob_s``, ``update_s``; the last loss and norm.
    """
    from bots_verl.verl_cpu.sampling import GenerationRequest, generate_batch, row_seed

    if isinstance(model, (str, Path)):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, attn_implementation="eager")
    pad, eos = model.config.pad_token_id or 0, model.generation_config.eos_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    times = []
    for rep in range(repeats + 1):
        prompt = [torch.randint(4, model.config.vocab_size, (prompt_length,), generator=gen) for _ in range(prompts)]
        rows = [p for p in prompt for _ in range(n)]
        requests = [
            GenerationRequest(p.tolist(), response_length, seed=row_seed(seed, rep, i), stop_token_ids=(eos,))
            for i, p in enumerate(rows)
        ]
        scores, groups = torch.randint(0, 2, (len(rows),), generator=gen).float(), [i // n for i in range(len(rows))]
        start = time.perf_counter()
        model.eval()
        responses = [torch.tensor(r.token_ids) for r in generate_batch(model, requests, pad)]
        t_gen = time.perf_counter()
        with torch.no_grad():
            old = response_log_probs(model, rows, responses, pad)
        t_old = time.perf_counter()
        masks = [torch.ones_like(r) for r in responses]
        step = plain_grpo_step(model, optimizer, rows, responses, masks, scores, groups, old_log_probs=old)
        end = time.perf_counter()
        times.append((end - start, t_gen - start, t_old - t_gen, end - t_old))
    return PlainStep(step.loss, step.grad_norm, *(statistics.median(t[j] for t in times[1:]) for j in range(4)))
