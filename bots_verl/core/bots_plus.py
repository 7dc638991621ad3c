"""``bots_plus``: BOTS with item-response implicit evidence over all reference columns (beyond the paper).

Same Beta posteriors, the same generalised update, Thompson sampling and ``p* = 0.5`` as the paper's ``bots`` (which
stays unchanged); the implicit evidence is ``irt`` (:mod:`bots_verl.core.irt_evidence`): a logit-linear model over all
reference columns fitted online, plus each task's own filtered residual, instead of one global weak/strong
interpolation coefficient. The directions that were measured and not adopted (a reference prior, rho and lam set from
the measured errors, learnability selection) live in the simulator's ablation
(:mod:`bots_verl.sim.ablation_selectors`); the measurements are in ``bots_verl/sim/bots_plus_results.md``.

Non-binary rewards: :func:`rewards_to_successes` maps per-rollout rewards to the fractional successes the core accepts
(rewards in [0, 1] are used as they are; rewards on another bounded scale ``[lo, hi]`` are rescaled affinely and
clipped). It is a pure helper: the selector's ``update`` keeps the core's contract (``0 <= successes <= attempts``).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.beta_selectors import BetaPosteriorSelector
from bots_verl.core.selector_base import SELECTORS, moved_to_simulator

logger = logging.getLogger(__name__)

__all__ = ["BOTSPlusSelector", "rewards_to_successes"]


def rewards_to_successes(rewards: Any, lo: float = 0.0, hi: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-task fractional successes and attempts from a ``(tasks, rollouts)`` reward matrix.

    The rule for non-binary rewards: a reward ``r`` on a bounded scale ``[lo, hi]`` counts as ``(r - lo) / (hi - lo)``
    of a success (clipped to [0, 1], so a format penalty below ``lo`` counts as a plain failure). A reward in [0, 1]
    (partial credit, fraction of unit tests passed) is thus used as is; its Beta update is the standard
    fractional-Bernoulli (quasi-likelihood) update, which keeps the posterior mean unbiased for the mean reward.
    NaN rewards (a failed rollout) are dropped from both counts.

    Args:
        rewards: ``(tasks, rollouts)`` array (a ragged batch can be padded with NaN).
        lo, hi: the reward scale; ``hi > lo``.

    Returns:
        ``(successes, attempts)``, float64 arrays of length ``tasks``.

    Raises:
        ValueError: if ``hi <= lo``, the array is not 2-D, or a task has no finite reward.
    """
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"need finite lo < hi, got lo={lo!r}, hi={hi!r}")
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be (tasks, rollouts), got shape {r.shape}")
    finite = np.isfinite(r)
    attempts = finite.sum(axis=1).astype(np.float64)
    if np.any(attempts == 0):
        raise ValueError(f"tasks without any finite reward: {np.flatnonzero(attempts == 0)[:5].tolist()}")
    unit = np.clip((np.where(finite, r, lo) - lo) / (hi - lo), 0.0, 1.0)
    return unit.sum(axis=1), attempts


@SELECTORS.register("bots_plus")
class BOTSPlusSelector(BetaPosteriorSelector):
    """BOTS with the ``irt`` evidence (all reference columns, per-task residuals); lam = rho = 0.1, Thompson.

    One setting for every domain, chosen from the ablation in ``bots_verl/sim/bots_plus_results.md``. The ``irt``
    plug-in's hyperparameters (``forget``, ``ridge``, ``residual_forget``, ...) are documented in
    :class:`~bots_verl.core.irt_evidence.IRTEvidence`.
    """

    FIXED: ClassVar[dict[str, Any]] = {"evidence": "irt"}
    DEFAULTS: ClassVar[dict[str, Any]] = {**BetaPosteriorSelector.DEFAULTS, **FIXED}
    RETIRED: ClassVar[dict[str, str]] = moved_to_simulator(
        (
            "adaptive_rho",
            "adaptive_lam",
            "rho_min",
            "rho_max",
            "lam_min",
            "lam_max",
            "error_momentum",
            "prior",
            "prior_strength",
            "prior_column",
        ),
        "bots_plus_ablation",
    )
