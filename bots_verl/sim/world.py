"""The simulated task world: a filtered training pool and a held-out eval set, labelled by reference models.

Each task ``k`` has a skill loading ``w_k`` (non-negative, sums to 1; a share on the general skill 0 and a Dirichlet
draw over the specific skills), a difficulty ``b_k``, a discrimination ``a_k`` and the policy's own per-task offset
``e_k``. A model with skill vector ``theta`` solves it with probability (multidimensional 2PL item response model)::

    p_k(theta) = sigmoid(a_k * (w_k . theta - b_k) + e_k)

Reference models are not copies of the policy: each has its own skill vector (``theta0 + offset + profile noise``)
and its own per-task noise in place of ``e_k``. Their pass rates are ``Binomial(16, p) / 16`` draws, as in GURU's
``qwen2.5_7b_pass_rate`` / ``qwen3_30b_pass_rate`` columns. The pool and the eval set are drawn from the same
generator and filtered by the same GURU rule, then split.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from bots_verl.sim.scenario import ScenarioConfig

logger = logging.getLogger(__name__)

__all__ = ["TaskSet", "World", "build_world", "sigmoid"]


def sigmoid(z: np.ndarray) -> np.ndarray:
    """Numerically safe logistic function."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class TaskSet:
    """Latent parameters of a set of tasks (rows).

    Attributes:
        loadings: ``(m, D)`` skill loadings ``w_k``.
        discrimination: ``(m,)`` ``a_k``.
        difficulty: ``(m,)`` ``b_k``.
        offset: ``(m,)`` the policy's own per-task logit offset ``e_k``.
        reference: ``(m, K)`` reference pass rates (multiples of ``1 / ref_rollouts``), weak -> strong.
    """

    loadings: np.ndarray
    discrimination: np.ndarray
    difficulty: np.ndarray
    offset: np.ndarray
    reference: np.ndarray

    def __len__(self) -> int:
        return int(self.difficulty.size)

    def logits(self, theta: np.ndarray) -> np.ndarray:
        """The policy's success log-odds for skill vector ``theta`` (without per-task memorisation)."""
        return self.discrimination * (self.loadings @ theta - self.difficulty) + self.offset

    def take(self, rows: np.ndarray) -> TaskSet:
        """The subset ``rows``."""
        return TaskSet(
            *(x[rows] for x in (self.loadings, self.discrimination, self.difficulty, self.offset, self.reference))
        )


@dataclass(frozen=True)
class World:
    """Everything fixed for one seed: the pool, the eval set, the initial policy and its skill ceiling.

    Attributes:
        config: the scenario.
        pool: the training pool (after filtering).
        eval: the held-out eval set.
        theta0: ``(D,)`` the initial policy's skills (zeros: difficulties are relative to it).
        ref_theta: ``(K, D)`` the reference models' skills.
        raw_drawn: tasks drawn before filtering (the filter's yield is ``(len(pool) + len(eval)) / raw_drawn``).
    """

    config: ScenarioConfig
    pool: TaskSet
    eval: TaskSet
    theta0: np.ndarray
    ref_theta: np.ndarray
    raw_drawn: int

    def summary(self) -> dict[str, float]:
        """Scalars describing the world (logged in ``meta.json``): filter yield, reference quality, start accuracy."""
        p0 = sigmoid(self.pool.logits(self.theta0))
        ref = self.pool.reference
        n = self.config.ref_rollouts
        out = {
            "filter_yield": (len(self.pool) + len(self.eval)) / self.raw_drawn,
            "pool_true_acc0": float(p0.mean()),
            "eval_true_acc0": float(sigmoid(self.eval.logits(self.theta0)).mean()),
            # The paper reports a ~0.5 Pearson correlation between predicted and empirical pass rates (Fig. 5).
            "ref_weak_corr0": float(np.corrcoef(ref[:, 0], p0)[0, 1]),
            "ref_strong_corr0": float(np.corrcoef(ref[:, -1], p0)[0, 1]),
            "ref_weak_mean": float(ref[:, 0].mean()),
            "ref_strong_mean": float(ref[:, -1].mean()),
            # Share of pool tasks where a random pick would give a mixed 16-rollout group at the start.
            "pool_etr0": float(np.mean(1.0 - p0**n - (1.0 - p0) ** n)),
        }
        return out


def _draw_tasks(cfg: ScenarioConfig, ref_theta: np.ndarray, m: int, rng: np.random.Generator) -> TaskSet:
    """Draw ``m`` unfiltered tasks and their reference pass rates (all vectorised)."""
    d = cfg.num_skills
    specific = rng.dirichlet(np.full(d - 1, cfg.skill_concentration), size=m)
    loadings = np.empty((m, d))
    loadings[:, 0] = cfg.shared_loading
    loadings[:, 1:] = (1.0 - cfg.shared_loading) * specific
    discrimination = np.exp(rng.normal(np.log(cfg.discrimination_mean), cfg.discrimination_sd, size=m))
    difficulty = rng.normal(cfg.difficulty_mean, cfg.difficulty_sd, size=m)
    offset = rng.normal(0.0, cfg.policy_task_noise, size=m)
    # Reference logits: same items, the reference's own skills, and its own per-task noise instead of the policy's.
    ref_logits = discrimination[:, None] * (loadings @ ref_theta.T - difficulty[:, None])
    ref_logits += rng.normal(0.0, cfg.ref_task_noise, size=ref_logits.shape)
    reference = rng.binomial(cfg.ref_rollouts, sigmoid(ref_logits)) / cfg.ref_rollouts
    return TaskSet(loadings, discrimination, difficulty, offset, reference)


def _keep_mask(cfg: ScenarioConfig, reference: np.ndarray) -> np.ndarray:
    """GURU's difficulty filter on the weakest and strongest reference columns."""
    weak, strong = reference[:, 0], reference[:, -1]
    keep = weak < cfg.filter_weak_max
    if cfg.filter_unsolved:
        keep &= reference.max(axis=1) > 0
    if cfg.filter_inverted:
        keep &= weak <= strong
    return keep


def _draw_kept(cfg: ScenarioConfig, ref_theta: np.ndarray, need: int, rng: np.random.Generator) -> tuple[TaskSet, int]:
    """Draw tasks in vectorised chunks until ``need`` pass the filter; returns them and the number drawn."""
    chunks: list[TaskSet] = []
    kept = drawn = 0
    while kept < need:
        if drawn > 50 * need:
            raise RuntimeError(f"the reference filter keeps {kept} of {drawn} drawn tasks; check the scenario")
        m = max(2 * (need - kept), 256)
        tasks = _draw_tasks(cfg, ref_theta, m, rng)
        rows = np.flatnonzero(_keep_mask(cfg, tasks.reference))[: need - kept]
        chunks.append(tasks.take(rows))
        # Count drawn tasks up to the last one kept, so the filter's yield is exact.
        drawn += int(rows[-1]) + 1 if kept + rows.size == need else m
        kept += rows.size
    return TaskSet(*(np.concatenate([getattr(c, f) for c in chunks]) for f in TaskSet.__dataclass_fields__)), drawn


def build_world(cfg: ScenarioConfig, rng: np.random.Generator) -> World:
    """Draw the pool and the eval set for one seed.

    Tasks are drawn in vectorised chunks until enough pass the filter; the first ``pool_size`` kept tasks form the
    pool and the next ``eval_size`` the eval set, so both come from the same filtered distribution. With
    ``eval_difficulty_shift`` / ``eval_difficulty_scale`` set, the eval set is drawn afterwards from its own
    difficulty distribution (same skills, discrimination, references and filter).

    Raises:
        RuntimeError: if the filter keeps almost nothing (a misconfigured scenario).
    """
    d, k = cfg.num_skills, len(cfg.ref_offsets)
    theta0 = np.zeros(d)
    offsets = np.asarray(cfg.ref_offsets, dtype=np.float64)
    ref_theta = theta0 + offsets[:, None] + rng.normal(0.0, cfg.ref_profile_noise, size=(k, d))
    own_eval = cfg.eval_difficulty_shift != 0.0 or cfg.eval_difficulty_scale != 1.0
    if own_eval:
        pool, drawn = _draw_kept(cfg, ref_theta, cfg.pool_size, rng)
        eval_cfg = dataclasses.replace(
            cfg,
            difficulty_mean=cfg.difficulty_mean + cfg.eval_difficulty_shift,
            difficulty_sd=cfg.difficulty_sd * cfg.eval_difficulty_scale,
        )
        eval_set, eval_drawn = _draw_kept(eval_cfg, ref_theta, cfg.eval_size, rng)
        drawn += eval_drawn
    else:
        allk, drawn = _draw_kept(cfg, ref_theta, cfg.pool_size + cfg.eval_size, rng)
        pool = allk.take(np.arange(cfg.pool_size))
        eval_set = allk.take(np.arange(cfg.pool_size, cfg.pool_size + cfg.eval_size))
    world = World(config=cfg, pool=pool, eval=eval_set, theta0=theta0, ref_theta=ref_theta, raw_drawn=drawn)
    logger.debug("built world %s: %s", cfg.name, world.summary())
    return world
