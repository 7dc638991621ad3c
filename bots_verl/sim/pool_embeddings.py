"""Task embeddings for the simulated pool, and the reference columns a partial labelling budget leaves.

A real pool's task embeddings (the policy's hidden states of the prompts, or a small text encoder's) carry some of
what makes a task hard, blurred by everything else a prompt says. The simulator's stand-in, per pool task:

1. Its latent features ``f``: the start difficulty on the logit scale ``a_k b_k`` (standardised over the pool) and
   its skill loadings ``w_k`` (what training on it moves). Not the policy's own per-task offset ``e_k``, which no
   reference sees either.
2. Random Fourier features of ``f`` (Rahimi and Recht 2007): ``sqrt(2 / m) cos(W f + b)`` with
   ``W ~ N(0, 1 / bandwidth^2)``, so the cosine similarity of two tasks' features is close to the Gaussian kernel
   ``exp(-|f - f'|^2 / (2 bandwidth^2))`` of their latent distance: similar latent tasks, similar embeddings.
3. **Distractors** (the signal-to-noise knobs, scenario fields): a "style" that prompts share regardless of
   difficulty (one of 16 random directions per task, weight ``embedding_style``) and per-dimension noise of total
   norm ``embedding_noise`` (the signal part has norm about 1, so ``embedding_noise = 1`` is a signal-to-noise power
   ratio of 1).

The embeddings are drawn from their own random stream (``stream(seed, 3)``), so the pool, the references and every
other stream of a seed are unchanged by them.
"""

from __future__ import annotations

import logging

import numpy as np

from bots_verl.core.task_graph import choose_labelled
from bots_verl.sim.world import World

logger = logging.getLogger(__name__)

__all__ = ["labelled_reference", "pool_embeddings"]

# Latent distance (in units of the pool's difficulty sd) at which the features' similarity falls to exp(-1/2).
BANDWIDTH = 0.3
# Distinct prompt "styles" the distractor draws from.
STYLES = 16


def pool_embeddings(world: World, rng: np.random.Generator) -> np.ndarray:
    """``(pool, embedding_dims)`` task embeddings of ``world``'s pool (see the module docstring)."""
    cfg = world.config
    pool = world.pool
    m = cfg.embedding_dims
    hardness = pool.discrimination * pool.difficulty
    hardness = (hardness - hardness.mean()) / max(float(hardness.std()), 1e-12)
    # loadings over the specific skills, scaled to [0, 1] so that tasks of different skill families lie far apart
    specific = pool.loadings[:, 1:] / max(1.0 - cfg.shared_loading, 1e-12)
    features = np.column_stack([hardness, specific])
    w = rng.normal(0.0, 1.0 / BANDWIDTH, size=(features.shape[1], m))
    phase = rng.uniform(0.0, 2.0 * np.pi, size=m)
    emb = np.sqrt(2.0 / m) * np.cos(features @ w + phase)
    styles = rng.normal(size=(STYLES, m))
    styles /= np.linalg.norm(styles, axis=1, keepdims=True)
    emb += cfg.embedding_style * styles[rng.integers(STYLES, size=len(pool))]
    emb += rng.normal(0.0, cfg.embedding_noise / np.sqrt(m), size=emb.shape)
    return emb


def labelled_reference(
    reference: np.ndarray, embeddings: np.ndarray, fraction: float, method: str, seed: int
) -> np.ndarray | None:
    """The pool's reference columns with only a labelled ``fraction`` kept (NaN elsewhere); None for 0; all for 1.

    Which tasks are labelled: :func:`bots_verl.core.task_graph.choose_labelled` (``uniform`` or ``spread``).
    """
    if fraction >= 1.0:
        return reference
    if fraction <= 0.0:
        return None
    keep = choose_labelled(embeddings, fraction, method, seed)
    out = np.full(reference.shape, np.nan)
    out[keep] = reference[keep]
    return out
