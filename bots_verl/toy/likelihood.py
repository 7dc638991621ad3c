"""Exact pass rates of a toy model from one forward pass: no sampling, no noise.

The scorer accepts exactly one response per task, the canonical answer, and the character tokenizer spells it one
way only, so a rollout at temperature 1 succeeds exactly when it samples the answer's tokens and then ``</s>``. Its
probability is the product of the teacher-forced token probabilities, which one batched forward pass gives for
thousands of tasks. Likewise greedy decoding is right exactly when every teacher-forced argmax is the target token.
This is what the calibration reports (the expected pass rate of each task, hence the expected share of mixed
groups at any n); ``reference_eval`` sampling through ``generate`` measures the same quantity with noise, which the
tests use as a cross-check of the tokenizer, chat template and scorer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.toy.tasks import Problem
from bots_verl.toy.tokenizer import PAD, VOCAB, encode

logger = logging.getLogger(__name__)

__all__ = ["answer_stats", "load_model", "pad_batch"]

# transformers' ``from_pretrained`` builds the model under process-global initialisation contexts (meta device, skipped
# weight init); two threads loading at once can leave one model with meta or uninitialised tensors, which evaluated to
# NaN in the toy benchmark's concurrent evaluations. Loading is cheap next to evaluating, so it is serialised.
_LOAD_LOCK = threading.Lock()


def load_model(model_dir: str | Path) -> Any:
    """A toy model from ``model_dir`` in float32 and evaluation mode; safe to call from several threads at once."""
    import torch
    from transformers import AutoModelForCausalLM

    with _LOAD_LOCK:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    return model.eval()


def pad_batch(problems: Sequence[Problem], vocab: dict[str, int] = VOCAB) -> tuple[Any, Any, Any]:
    """Right-padded ``(input_ids, attention_mask, labels)`` tensors for prompt + answer + ``</s>``.

    ``labels`` hold the next-token targets of the response positions (answer and ``</s>``) and -100 elsewhere, in the
    convention of ``LlamaForCausalLM(labels=...)`` (it shifts them by one itself).
    """
    import torch

    rows = [encode(p.prompt, p.answer, vocab) for p in problems]
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), vocab[PAD], dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = 1
        labels[i, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
    return input_ids, mask, labels


def answer_stats(
    model: Any,
    problems: Sequence[Problem],
    batch_size: int = 1024,
    temperature: float = 1.0,
    vocab: dict[str, int] = VOCAB,
) -> tuple[np.ndarray, np.ndarray]:
    """Per problem: the probability that one sampled response is right, and whether greedy decoding is right.

    Args:
        model: a causal LM over the toy vocabulary.
        problems: the tasks.
        batch_size: problems per forward pass.
        temperature: the sampling temperature the probability is for (logits are divided by it).
        vocab: the task family's vocabulary (:func:`bots_verl.toy.tokenizer.vocab_of`).

    Returns:
        ``(pass_probability, greedy_correct)``, float64 and bool arrays of ``len(problems)``.

    Raises:
        ValueError: when a probability is not finite (the model's weights or logits are), rather than let a NaN
            accuracy into a run log.
    """
    import torch

    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    probs, greedy = [], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for lo in range(0, len(problems), batch_size):
                input_ids, mask, labels = pad_batch(problems[lo : lo + batch_size], vocab)
                logits = model(input_ids=input_ids, attention_mask=mask).logits[:, :-1].float() / temperature
                target = labels[:, 1:]
                scored = target != -100
                logp = torch.log_softmax(logits, dim=-1).gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
                # where, not a product: an unscored position's -inf log-probability times 0 would be NaN
                probs.append(torch.exp(torch.where(scored, logp, 0.0).sum(-1)).double().numpy())
                hit = (logits.argmax(-1) == target) | ~scored
                greedy.append(hit.all(-1).numpy())
    finally:
        model.train(was_training)
    p = np.concatenate(probs)
    if not np.isfinite(p).all():
        bad = np.flatnonzero(~np.isfinite(p))
        raise ValueError(
            f"{len(bad)} of {len(p)} pass probabilities are not finite (first: {problems[bad[0]].prompt!r}); "
            "the model's weights or logits are not finite"
        )
    return p, np.concatenate(greedy)
