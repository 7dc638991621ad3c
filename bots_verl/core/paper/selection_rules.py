"""Selection rules over Beta posteriors: which ``k`` tasks to train next.

A rule is a function ``rule(alpha, beta, k, rng, *, target, **params) -> (indices, p)`` registered in
:data:`SELECTION_RULES`; its keyword-only arguments are its hyperparameters (a selector passes the ones the rule
names). It returns ``k`` unique task indices, best first, and for each the success probability it scored the task by
(the Thompson draw, or the posterior mean), which the selector logs as ``selection/sampled_p_mean``. Every rule scores
the whole pool and takes the top ``k`` in O(N) with ``argpartition``.

- ``thompson`` (the paper's, Sec. 3.4): draw ``p_hat_k ~ Beta(alpha_k, beta_k)`` and score ``-|p_hat_k - target|``.
- ``greedy``: score the posterior mean, ``-|alpha / (alpha + beta) - target|``; exact ties are broken at random (the
  Thompson-vs-greedy ablation the paper mentions).
- ``softmax``: sample without replacement with probabilities ``softmax(-|mean - target| / tau)``, via the
  Gumbel-top-k trick (add Gumbel noise to ``score / tau`` and take the top ``k``); the upstream port's ``tau > 0``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from bots_verl.core.defaults import TARGET
from bots_verl.core.registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["SELECTION_RULES", "SelectionRule", "greedy", "softmax", "thompson", "top_k"]

SelectionRule = Callable[..., tuple[np.ndarray, np.ndarray]]
SELECTION_RULES: Registry[SelectionRule] = Registry("selection rule")


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores, best first (int64)."""
    if k >= scores.size:
        part = np.arange(scores.size)
    else:
        part = np.argpartition(scores, scores.size - k)[scores.size - k :]
    order = np.argsort(-scores[part], kind="stable")
    return part[order].astype(np.int64, copy=False)


@SELECTION_RULES.register("thompson", group="paper")
def thompson(
    alpha: np.ndarray, beta: np.ndarray, k: int, rng: np.random.Generator, *, target: float = TARGET
) -> tuple[np.ndarray, np.ndarray]:
    """Thompson sampling (paper Sec. 3.4): one Beta draw per task, the k draws closest to the target."""
    p_hat = rng.beta(alpha, beta)
    # score = -|p_hat - target|, computed in one pool-sized buffer (the draws themselves are kept for the log)
    score = np.subtract(p_hat, target)
    np.abs(score, out=score)
    np.negative(score, out=score)
    picked = top_k(score, k)
    return picked, p_hat[picked]


@SELECTION_RULES.register("greedy", group="paper")
def greedy(
    alpha: np.ndarray, beta: np.ndarray, k: int, rng: np.random.Generator, *, target: float = TARGET
) -> tuple[np.ndarray, np.ndarray]:
    """The k posterior means closest to the target; exact ties (e.g. the flat prior) broken at random."""
    mean = alpha / (alpha + beta)
    score = -np.abs(mean - target)
    score += rng.random(score.size) * 1e-12
    picked = top_k(score, k)
    return picked, mean[picked]


@SELECTION_RULES.register("softmax", group="paper")
def softmax(
    alpha: np.ndarray, beta: np.ndarray, k: int, rng: np.random.Generator, *, target: float = TARGET, tau: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """k draws without replacement, probabilities softmax(-|mean - target| / tau) (Gumbel-top-k)."""
    if not tau > 0:
        raise ValueError(f"softmax selection needs tau > 0, got {tau!r}")
    mean = alpha / (alpha + beta)
    score = -np.abs(mean - target) / tau
    score += rng.gumbel(size=score.size)
    picked = top_k(score, k)
    return picked, mean[picked]
