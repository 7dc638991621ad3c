"""Held-out accuracy of a toy code or logic policy: the canonical answer's exact likelihood plus a sampled remainder.

Arithmetic's reward accepts one response per task, so its accuracy is the canonical answer's likelihood, exactly
(:mod:`bots_verl.toy.likelihood`). The code and logic rewards accept more (code: extra parentheses, another argument
name; logic: text before the tag, a trailing comma), so that likelihood ``c`` is only a lower bound. The estimate is

    c + mean over k samples per prompt of 1[the sample passes the domain reward and is not the canonical answer]

with ``k`` = :data:`SAMPLES` samples per prompt at temperature 1 (code 4, logic 2). The indicator's expectation is
``P(pass) - c``
("the canonical answer" is its token sequence and ``</s>``, the event whose probability ``c`` is), so the estimate is
unbiased for the expected accuracy of one sample per prompt, and its noise comes only from the non-canonical passing
mass q: SE = sqrt(sum_i q_i (1 - q_i) / k) / N over N prompts (estimated with each prompt's k indicators).

- **Sampling**: one :func:`bots_verl.verl_cpu.sampling.generate_batch` over every (prompt, sample), each row seeded by
  :func:`sample_seed` from (run seed, checkpoint step, prompt, sample), so a resumed run evaluates identically and
  runs of one seed share their samples' random numbers (paired comparisons). Responses are decoded as verl decodes a
  rollout (the family's tokenizer, ``skip_special_tokens``).
- **Scoring**: only non-canonical samples, each distinct response once per task, and for code each distinct program
  once per task (the code reward reads nothing of a response but its last fenced block), through
  :func:`bots_verl.rewards.compute_score`, the entry point verl's reward workers call, from :data:`SCORE_THREADS`
  threads as they do: code runs in the bubblewrap sandbox, so a program that hangs, floods its output or exits is a
  failure there; a sandbox that does not work raises rather than scoring 0.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bots_verl.core.metric_keys import (
    TOY_CANONICAL_PART,
    TOY_ESTIMATE_PART,
    TOY_ESTIMATE_SE_PART,
    TOY_NONCANONICAL_PART,
    toy_heldout_key,
)

logger = logging.getLogger(__name__)

__all__ = ["SAMPLES", "SCORE_THREADS", "HeldoutEstimate", "estimate_accuracy", "sample_seed", "score_responses"]

#: samples per held-out prompt, by family (families.md, "Held-out accuracy"). Logic's reward accepts few spellings
#: besides the canonical answer (no sample of the shipped policy passed off it), so its sampled share is near 0 and so
#: is its noise: 2 samples halve the cost of its evaluation, which is mostly generating them
SAMPLES = {"code": 4, "logic": 2}
#: scoring threads (verl's ``reward.num_workers`` default)
SCORE_THREADS = 8


@dataclass(frozen=True)
class HeldoutEstimate:
    """One evaluation's held-out accuracy estimate and its parts.

    Attributes:
        canonical: mean over prompts of the canonical answer's likelihood (a lower bound of the accuracy).
        noncanonical: mean over prompts and samples of 1[passes and is not the canonical answer].
        se: standard error of the estimate over the samples (the prompts fixed).
        samples: samples per prompt.
        prompts: held-out prompts.
        passing: non-canonical samples that passed.
        scored: distinct (prompt, response) pairs scored by the reward (code: distinct programs, and responses
            without one).
        programs: of those, code responses with a program, run in the sandbox (logic: 0).
        seconds: wall-clock seconds of the phases ``canonical`` (the likelihood), ``generate``, ``score`` (not
            compared: two equal estimates may take different times).
    """

    canonical: float
    noncanonical: float
    se: float
    samples: int
    prompts: int
    passing: int
    scored: int
    programs: int
    seconds: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def estimate(self) -> float:
        """The held-out accuracy estimate: ``canonical + noncanonical``."""
        return self.canonical + self.noncanonical

    def metrics(self, data_source: str) -> dict[str, float]:
        """The run-log figures (:func:`~bots_verl.core.metric_keys.toy_heldout_key` of ``data_source``)."""
        return {
            toy_heldout_key(data_source, TOY_ESTIMATE_PART): self.estimate,
            toy_heldout_key(data_source, TOY_CANONICAL_PART): self.canonical,
            toy_heldout_key(data_source, TOY_NONCANONICAL_PART): self.noncanonical,
            toy_heldout_key(data_source, TOY_ESTIMATE_SE_PART): self.se,
        }


def sample_seed(run_seed: int, step: int, prompt: int, sample: int) -> int:
    """The sampling seed of one held-out sample: a function of the run's seed, the checkpoint step and the row only."""
    from bots_verl.verl_cpu.sampling import row_seed

    return row_seed("toy-heldout", run_seed, step, prompt, sample)


def _program(text: str) -> str | None:
    """The program the code reward runs for a response (its last fenced block), None without one."""
    from bots_verl.rewards._extract import after_think, last_code_block

    return last_code_block(after_think(text))


def score_responses(data_source: str, items: Sequence[tuple[str, str]], threads: int = SCORE_THREADS) -> list[bool]:
    """Whether each ``(response, ground_truth)`` passes the domain reward (:func:`bots_verl.rewards.compute_score`).

    Raises:
        SandboxUnavailableError: code isolation does not work here (nothing is scored as a failure for it).
    """
    from bots_verl.rewards import compute_score

    def one(item: tuple[str, str]) -> bool:
        return bool(compute_score(data_source, item[0], item[1])["acc"])

    if not items:
        return []
    with ThreadPoolExecutor(max(1, min(threads, len(items)))) as pool:
        return list(pool.map(one, items))


def estimate_accuracy(
    model: Any,
    problems: Sequence[Any],
    family: str,
    *,
    max_tokens: int,
    run_seed: int,
    step: int,
    samples: int | None = None,
    threads: int = SCORE_THREADS,
) -> HeldoutEstimate:
    """The held-out accuracy estimate of ``model`` on ``problems`` (module docstring).

    Args:
        model: a causal LM over the family's vocabulary (eval mode; run with one torch thread for batch independence).
        problems: the held-out tasks of the family.
        family: ``code`` or ``logic`` (:mod:`bots_verl.toy.families`).
        max_tokens: the response budget, as the rollouts' (``data.max_response_length``).
        run_seed: the training run's seed.
        step: the checkpoint's step.
        samples: samples per prompt (>= 2, for the standard error); default: the family's :data:`SAMPLES`.
        threads: scoring threads.

    Raises:
        ValueError: for arithmetic (its accuracy is exact) or fewer than 2 samples.
    """
    from bots_verl.toy.families import family_of
    from bots_verl.toy.likelihood import answer_stats
    from bots_verl.toy.tokenizer import EOS, PAD, build_tokenizer, encode, vocab_of
    from bots_verl.verl_cpu.sampling import GenerationRequest, generate_batch

    fam = family_of(family)
    if fam.single_answer:
        raise ValueError(f"the {family} family's held-out accuracy is exact (likelihood.answer_stats), not sampled")
    samples = SAMPLES[family] if samples is None else samples
    if samples < 2:
        raise ValueError(f"samples must be at least 2 (the standard error needs them), got {samples}")
    vocab = vocab_of(family)
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return clock[-1] - clock[-2]

    canonical_p, _ = answer_stats(model, problems, vocab=vocab)
    seconds = {"canonical": lap()}
    requests, canonical_ids = [], []
    for i, problem in enumerate(problems):
        ids, n_prompt = encode(problem.prompt, problem.answer, vocab)
        canonical_ids.append(ids[n_prompt:])  # the answer and </s>: the event whose probability canonical_p is
        for k in range(samples):
            requests.append(
                GenerationRequest(
                    ids[:n_prompt], max_tokens, seed=sample_seed(run_seed, step, i, k), stop_token_ids=(vocab[EOS],)
                )
            )
    was_training = model.training
    model.eval()
    try:
        results = generate_batch(model, requests, pad_token_id=vocab[PAD])
    finally:
        model.train(was_training)
    seconds["generate"] = lap()
    tokenizer = build_tokenizer(family=family)
    # the distinct non-canonical responses of each task, scored once each (code: one response per distinct program)
    todo: dict[tuple[int, str | None, str], str] = {}
    rows: list[tuple[int, str | None, str] | None] = []
    for r, result in enumerate(results):
        i = r // samples
        if result.token_ids == canonical_ids[i]:
            rows.append(None)
            continue
        text = tokenizer.decode(result.token_ids, skip_special_tokens=True)
        program = _program(text) if family == "code" else None
        key = (i, program, "" if program is not None else text)
        todo.setdefault(key, text)
        rows.append(key)
    keys = list(todo)
    scores = score_responses(fam.data_source, [(todo[key], problems[key[0]].ground_truth) for key in keys], threads)
    passed = dict(zip(keys, scores, strict=True))
    seconds["score"] = lap()
    hits = np.array([0.0 if key is None else float(passed[key]) for key in rows]).reshape(len(problems), samples)
    q = hits.mean(axis=1)
    # per prompt, the unbiased variance of its k indicators over k: the variance of its mean
    var = hits.var(axis=1, ddof=1) / samples
    estimate = HeldoutEstimate(
        canonical=float(np.mean(canonical_p)),
        noncanonical=float(q.mean()),
        se=math.sqrt(float(var.sum())) / len(problems),
        samples=samples,
        prompts=len(problems),
        passing=int(hits.sum()),
        scored=len(keys),
        programs=sum(key[1] is not None for key in keys),
        seconds=seconds,
    )
    logger.info(
        "held-out %s step %d: %.4f = canonical %.4f + non-canonical %.4f (SE %.4f; %d of %d samples pass off the "
        "canonical answer, %d distinct responses scored)",
        family, step, estimate.estimate, estimate.canonical, estimate.noncanonical, estimate.se,
        estimate.passing, len(results), estimate.scored,
    )  # fmt: skip
    return estimate
