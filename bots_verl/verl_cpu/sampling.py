"""Batched autoregressive sampling whose result for a row does not depend on the other rows of the batch.

The ``hf`` rollout server (:mod:`.hf_server`) batches whatever requests are waiting, and which requests share a batch
depends on arrival timing. A resumed run must still generate exactly what the uninterrupted run generated, so each
row's tokens must be a function of (weights, prompt, sampling parameters, the row's own seed) alone:

- **Own random stream.** Every sampled row draws from its own ``torch.Generator`` seeded by the caller
  (:func:`row_seed`), one uniform per token (inverse-CDF sampling), so other rows never consume its randomness.
- **Fixed shapes per row.** Rows are left-padded to a length bucket that depends only on their own prompt length
  (:func:`bucket_length`) and a bucket is decoded as one group, so a row's attention always spans the same padded
  width: padding to another width changes logits in the last bits (measured on this CPU build: 9e-8).
- **No small matmuls, one thread.** MKL computes a row of ``x @ W.T`` with a different summation order when ``x``
  has 1, 2-3 or at least 4 rows (measured, one thread); a group is therefore padded with dummy rows to at least
  :data:`MIN_ROWS` rows. With several intra-op threads MKL also splits the work by the number of rows, so the
  results are batch-independent only with ``torch.set_num_threads(1)``, which the rollout server sets. A row's
  logits were then bit-identical for any group size and order (``tests/verl_cpu/test_sampling.py`` checks this on
  the machine that runs the tests).
- **Static batches.** A group runs from prefill to its last token without rows joining or leaving; rows that finish
  early keep decoding padding that is discarded.

The sampled tokens come from the model's current weights: nothing is cached across calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from collections.abc import Sequence

import torch

logger = logging.getLogger(__name__)

__all__ = ["GenerationRequest", "GenerationResult", "bucket_length", "generate_batch", "row_seed"]

MIN_BUCKET = 16
MIN_ROWS = 8


@dataclasses.dataclass
class GenerationRequest:
    """One sequence to generate.

    Attributes:
        prompt_ids: prompt token ids (non-empty).
        max_tokens: maximum number of new tokens (>= 1).
        temperature: 0 means greedy.
        top_p: nucleus threshold in (0, 1].
        top_k: keep the k most likely tokens; <= 0 keeps all.
        seed: seed of the row's generator (ignored when greedy).
        logprobs: also return the log-probability of each generated token (of the processed distribution).
        stop_token_ids: token ids that end the sequence (kept in the output, as vLLM does).
    """

    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int = 0
    logprobs: bool = False
    stop_token_ids: tuple[int, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0 or self.top_k == 1


@dataclasses.dataclass
class GenerationResult:
    """Generated tokens of one request; ``finish_reason`` is ``stop`` (a stop token) or ``length``."""

    token_ids: list[int]
    log_probs: list[float] | None
    finish_reason: str


def row_seed(*parts: object) -> int:
    """A 63-bit seed from the given parts, stable across processes and Python versions (sha256, not ``hash``)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def bucket_length(prompt_len: int) -> int:
    """Padded prompt width of a row: the next power of two >= ``prompt_len`` (at least 16)."""
    return max(MIN_BUCKET, 1 << math.ceil(math.log2(max(1, prompt_len))))


@torch.no_grad()
def generate_batch(model: torch.nn.Module, requests: Sequence[GenerationRequest], pad_token_id: int):
    """Generate every request; rows are grouped by :func:`bucket_length` and each group is decoded as one batch.

    A row's result does not depend on the other rows when torch runs one intra-op thread (see the module docstring).

    Args:
        model: a transformers causal LM in eval mode (any model taking ``attention_mask``, ``position_ids`` and
            ``past_key_values``).
        requests: the rows.
        pad_token_id: token fed to left padding and to rows that already finished.

    Returns:
        One :class:`GenerationResult` per request, in order.
    """
    results: list[GenerationResult | None] = [None] * len(requests)
    groups: dict[int, list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault(bucket_length(len(req.prompt_ids)), []).append(i)
    for width, members in sorted(groups.items()):
        outputs = _generate_group(model, [requests[i] for i in members], width, pad_token_id)
        for i, res in zip(members, outputs, strict=True):
            results[i] = res
    return results


def _generate_group(
    model: torch.nn.Module, requests: Sequence[GenerationRequest], width: int, pad_token_id: int
) -> list[GenerationResult]:
    real = len(requests)
    # dummy rows (a lone padding token, greedy, discarded) keep every matmul at MIN_ROWS rows or more
    requests = list(requests) + [GenerationRequest([pad_token_id], 1, temperature=0.0)] * max(0, MIN_ROWS - real)
    rows = len(requests)
    input_ids = torch.full((rows, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    for r, req in enumerate(requests):
        n = len(req.prompt_ids)
        input_ids[r, width - n :] = torch.tensor(req.prompt_ids, dtype=torch.long)
        attention[r, width - n :] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    lengths = attention.sum(-1)

    generators = [None if req.greedy else torch.Generator().manual_seed(req.seed) for req in requests]
    temperature = torch.tensor([req.temperature if not req.greedy else 1.0 for req in requests]).unsqueeze(-1)
    top_p = torch.tensor([req.top_p for req in requests]).unsqueeze(-1)
    top_k = [req.top_k for req in requests]
    greedy = torch.tensor([req.greedy for req in requests])
    limits = [req.max_tokens for req in requests]
    stops = [set(req.stop_token_ids) for req in requests]

    tokens: list[list[int]] = [[] for _ in requests]
    log_probs: list[list[float]] = [[] for _ in requests]
    done = [False] * rows
    finish = ["length"] * rows

    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True)
    cache = out.past_key_values
    logits = out.logits[:, -1, :].float()
    for step in range(max(limits)):
        chosen, chosen_logp = _sample(logits, temperature, top_p, top_k, greedy, generators)
        for r in range(rows):
            if done[r]:
                continue
            tok = int(chosen[r])
            tokens[r].append(tok)
            log_probs[r].append(float(chosen_logp[r]))
            if tok in stops[r]:
                done[r], finish[r] = True, "stop"
            elif len(tokens[r]) >= limits[r]:
                done[r] = True
        if all(done):
            break
        feed = torch.tensor([pad_token_id if done[r] else tokens[r][-1] for r in range(rows)]).unsqueeze(-1)
        attention = torch.cat([attention, torch.ones((rows, 1), dtype=torch.long)], dim=-1)
        position = (lengths + step).unsqueeze(-1)
        out = model(
            input_ids=feed, attention_mask=attention, position_ids=position, past_key_values=cache, use_cache=True
        )
        cache = out.past_key_values
        logits = out.logits[:, -1, :].float()
    return [
        GenerationResult(tokens[r], log_probs[r] if req.logprobs else None, finish[r])
        for r, req in enumerate(requests[:real])
    ]


def _sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    top_k: list[int],
    greedy: torch.Tensor,
    generators: list[torch.Generator | None],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next token and its log-probability per row; only row-wise operations, one uniform per sampled row."""
    scaled = logits / temperature
    order = torch.sort(scaled, dim=-1, descending=True, stable=True)
    sorted_logits, sorted_ids = order.values, order.indices
    vocab = scaled.shape[-1]
    rank = torch.arange(vocab).unsqueeze(0)
    keep = torch.ones_like(sorted_logits, dtype=torch.bool)
    k = torch.tensor([kk if 0 < kk < vocab else vocab for kk in top_k]).unsqueeze(-1)
    keep &= rank < k
    probs = torch.softmax(sorted_logits.masked_fill(~keep, -math.inf), dim=-1)
    # nucleus: keep the smallest prefix whose mass reaches top_p (the first token always stays)
    keep &= (probs.cumsum(-1) - probs) < top_p
    processed = sorted_logits.masked_fill(~keep, -math.inf)
    logp_sorted = torch.log_softmax(processed, dim=-1)
    cdf = logp_sorted.exp().cumsum(-1)

    pick = torch.zeros(logits.shape[0], dtype=torch.long)
    for r, gen in enumerate(generators):
        if gen is None:
            continue
        u = torch.rand((), generator=gen) * cdf[r, -1]
        pick[r] = min(int(torch.searchsorted(cdf[r], u, right=True)), int(keep[r].sum()) - 1)
    pick = torch.where(greedy, torch.zeros_like(pick), pick)
    chosen = sorted_ids.gather(-1, pick.unsqueeze(-1)).squeeze(-1)
    greedy_logp = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    chosen_logp = logp_sorted.gather(-1, pick.unsqueeze(-1)).squeeze(-1)
    return chosen, torch.where(greedy, greedy_logp, chosen_logp)
