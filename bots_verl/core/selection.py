"""Selection rules over Beta posteriors: which ``batch_size`` tasks to train next.

All rules score every task and take the top ``batch_size`` scores (unique tasks) in O(N) with ``argpartition``.

- ``thompson`` (the paper's, Sec. 3.4): draw ``p_hat_k ~ Beta(alpha_k, beta_k)`` and score ``-|p_hat_k - target|``.
- ``greedy``: score the posterior mean, ``-|alpha / (alpha + beta) - target|``; exact ties are broken at random.
- ``softmax``: sample without replacement with probabilities ``softmax(-|mean - target| / tau)``, via the
  Gumbel-top-k trick (add Gumbel noise to ``score / tau`` and take the top ``batch_size``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["SELECTION_RULES", "top_k"]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores, best first (int64)."""
    if k >= scores.size:
        part = np.arange(scores.size)
    else:
        part = np.argpartition(scores, scores.size - k)[scores.size - k :]
    order = np.argsort(-scores[part], kind="stable")
    return part[order].astype(np.int64, copy=False)


def _thompson(alpha: np.ndarray, beta: np.ndarray, target: float, k: int, rng: np.random.Generator, tau: float):
    p_hat = rng.beta(alpha, beta)
    p_hat -= target
    return top_k(-np.abs(p_hat, out=p_hat), k)


def _greedy(alpha: np.ndarray, beta: np.ndarray, target: float, k: int, rng: np.random.Generator, tau: float):
    score = -np.abs(alpha / (alpha + beta) - target)
    # Break exact ties (e.g. the flat prior at step 0) uniformly at random rather than by index.
    score += rng.random(score.size) * 1e-12
    return top_k(score, k)


def _softmax(alpha: np.ndarray, beta: np.ndarray, target: float, k: int, rng: np.random.Generator, tau: float):
    score = -np.abs(alpha / (alpha + beta) - target) / tau
    score += rng.gumbel(size=score.size)
    return top_k(score, k)


SELECTION_RULES: dict[str, Callable[..., np.ndarray]] = {
    "thompson": _thompson,
    "greedy": _greedy,
    "softmax": _softmax,
}
