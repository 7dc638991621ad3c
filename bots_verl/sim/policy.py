"""The simulated policy: its true success probabilities, rollouts, and how one GRPO step changes it.

State: the skill vector ``theta`` (shared by all tasks, so learning transfers) and a per-task memorisation offset
``u_k`` (what training on task ``k`` teaches about ``k`` alone; it never reaches the eval set). True success
probability of pool task ``k``: ``sigmoid(a_k * (w_k . theta - b_k) + e_k + u_k)``.

One training step on a set of rollout groups (task ``k``, ``s_k`` successes of ``n``):

- learning signal ``g_k`` = the group's reward std ``sqrt(q(1-q))`` with ``q = s_k / n`` (or its variance ``q(1-q)``).
  Why: for a Bernoulli policy with logit ``z``, ``d log pi(r) / dz = r - p``, and GRPO's group-normalised advantages
  ``A_i = (r_i - q) / std`` give ``sum_i A_i (r_i - p) = n * std``; without std normalisation (Dr. GRPO) it is
  ``n * q(1-q)``. Either way an all-0 or all-1 group has zero advantage and teaches nothing.
- skills: ``theta += lr * mean_k(g_k * a_k * w_k) * headroom``, the chain rule of ``z_k`` through ``theta``, with
  ``headroom = clip((theta_max - theta) / capacity, 0, 1)`` so gains shrink as a skill nears its ceiling
  (diminishing returns), then ``theta -= forgetting * (theta - theta0)`` (skills not exercised fade).
- memorisation: ``u_k += memorization_rate * g_k * a_k`` for the trained tasks, then all ``u`` decay. Repeatedly
  trained tasks therefore drift to ``p = 1`` (DAPO reports the share of all-correct prompts rising during training).
"""

from __future__ import annotations

import logging

import numpy as np

from bots_verl.sim.world import World, sigmoid

logger = logging.getLogger(__name__)

__all__ = ["Policy"]


class Policy:
    """The policy being trained in one simulated run.

    Args:
        world: the fixed world (pool, eval set, initial skills).
    """

    def __init__(self, world: World) -> None:
        self.world = world
        cfg = world.config
        self.theta = world.theta0.astype(np.float64, copy=True)
        self.theta_max = world.theta0 + cfg.capacity
        self.memo = np.zeros(len(world.pool))
        self.grad_sq = 0.0  # Adam-like running mean of the squared gradient norm
        self.steps = 0

    def pool_probs(self) -> np.ndarray:
        """True success probability of every pool task now, shape ``(pool_size,)``."""
        return sigmoid(self.world.pool.logits(self.theta) + self.memo)

    def probs_at(self, indices: np.ndarray) -> np.ndarray:
        """True success probabilities of some pool tasks (computed for those rows only)."""
        pool = self.world.pool
        z = pool.discrimination[indices] * (pool.loadings[indices] @ self.theta - pool.difficulty[indices])
        return sigmoid(z + pool.offset[indices] + self.memo[indices])

    def eval_probs(self) -> np.ndarray:
        """True success probability of every eval task now (never trained, so no memorisation)."""
        return sigmoid(self.world.eval.logits(self.theta))

    def eval_accuracy(self, rng: np.random.Generator) -> float:
        """Eval accuracy: the expected accuracy, or with ``eval_samples = k > 0`` the mean of k sampled answers."""
        p = self.eval_probs()
        k = self.world.config.eval_samples
        if k <= 0:
            return float(p.mean())
        return float(rng.binomial(k, p).sum() / (k * p.size))

    def signal(self, successes: np.ndarray, attempts: np.ndarray) -> np.ndarray:
        """Per-group learning signal: the group's reward std (GRPO) or variance (Dr. GRPO)."""
        q = successes / attempts
        var = q * (1.0 - q)
        return np.sqrt(var) if self.world.config.signal == "std" else var

    def train(
        self,
        indices: np.ndarray,
        successes: np.ndarray,
        attempts: np.ndarray,
        batch_size: int,
    ) -> float:
        """Apply one GRPO step on the given rollout groups (a task may appear twice); returns the mean signal.

        Args:
            indices: pool indices of the trained groups.
            successes, attempts: per group.
            batch_size: the nominal batch size B; the gradient is a mean over B groups, as GRPO averages the loss
                over the batch, so a short batch (DAPO ran out of rounds) learns proportionally less.
        """
        cfg = self.world.config
        pool = self.world.pool
        g = self.signal(successes.astype(np.float64), attempts.astype(np.float64))
        if indices.size:
            weight = g * pool.discrimination[indices]
            grad = weight @ pool.loadings[indices] / batch_size
        else:
            grad = np.zeros_like(self.theta)
        # Adam-like scale normalisation: divide by the root of a bias-corrected running mean of |grad|^2 plus the
        # gradient-noise floor. Large, clean gradients therefore do not move the policy proportionally faster.
        self.steps += 1
        self.grad_sq = cfg.adam_beta2 * self.grad_sq + (1.0 - cfg.adam_beta2) * float(grad @ grad)
        second = self.grad_sq / (1.0 - cfg.adam_beta2**self.steps)
        headroom = np.clip((self.theta_max - self.theta) / cfg.capacity, 0.0, 1.0)
        self.theta += cfg.learning_rate * grad / np.sqrt(second + cfg.grad_noise**2) * headroom
        if indices.size:
            np.add.at(self.memo, indices, cfg.memorization_rate * weight)
        self.theta -= cfg.forgetting * (self.theta - self.world.theta0)
        self.memo *= 1.0 - cfg.memorization_forgetting
        return float(g.mean()) if g.size else 0.0
