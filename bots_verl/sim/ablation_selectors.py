"""The paper's ``bots`` with directions measured and not adopted, kept runnable in the simulator (not in the core).

One simulator selector (:data:`~bots_verl.sim.selector_registry.SIM_SELECTORS`), ``bots_ablation``: the paper's
``bots`` with the core selector's hyperparameters plus

- ``prior="reference"`` (with ``prior_strength``, ``prior_column``): no cold start, the prior comes from a reference
  column. Measured: no gain, because the forgetting keeps pulling every task back toward a reference that is
  miscalibrated for the policy.
- ``selection="learnability"``: posterior-expected ``p (1 - p)``, the expected GRPO reward variance, deterministic.
  Measured: within noise, slightly worse; it penalises uncertainty, so it explores less.

The findings are in ``recipes/results/sim/bots_plus_results.md``. Run one with e.g.
``python -m bots_verl.sim --methods bots,refprior=bots_ablation:prior=reference``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.paper.bots_selectors import BOTSSelector
from bots_verl.core.paper.selection_rules import SELECTION_RULES, SelectionRule, top_k
from bots_verl.core.registry import Registry
from bots_verl.sim.selector_registry import SIM_SELECTORS

logger = logging.getLogger(__name__)

__all__ = ["ABLATION_RULES", "BOTSAblation", "learnability"]


# The core's selection rules plus the ablation's own; only the ablation selectors look rules up here.
ABLATION_RULES: Registry[SelectionRule] = Registry("selection rule")
ABLATION_RULES.update(SELECTION_RULES)


@ABLATION_RULES.register("learnability")
def learnability(
    alpha: np.ndarray, beta: np.ndarray, k: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The k largest posterior-expected p (1 - p) (expected GRPO reward variance); ignores the target."""
    # E[p (1 - p)] under Beta(a, b) = a b / ((a + b)(a + b + 1)); its optimum is p = 0.5 by construction.
    n = alpha + beta
    score = alpha * beta
    score /= n
    n += 1.0
    score /= n
    # Random tie-breaking, as for ``greedy`` (the flat prior gives exact ties).
    score += rng.random(score.size) * 1e-12
    picked = top_k(score, k)
    return picked, alpha[picked] / (alpha[picked] + beta[picked])


@SIM_SELECTORS.register("bots_ablation")
class BOTSAblation(BOTSSelector):
    """``bots`` with the options measured and not adopted: a reference prior, learnability selection.

    ``prior="reference"`` sets per task ``alpha0_k = alpha0 + prior_strength * p_k`` and
    ``beta0_k = beta0 + prior_strength * (1 - p_k)``, with ``p_k`` the reference column ``prior_column`` (default 0,
    the weakest reference, closest to a small policy); the per-task prior is also the target of the forgetting.
    ``prior="uniform"`` is the core's ``Beta(alpha0, beta0)``.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        **BOTSSelector.DEFAULTS,
        "prior": "uniform",
        "prior_strength": 4.0,
        "prior_column": 0,
    }
    # the per-task prior they define is restored from a checkpoint's posterior as saved
    CHECKPOINT_HPARAMS: ClassVar[tuple[str, ...]] = ("alpha0", "beta0", "prior", "prior_strength", "prior_column")
    RETIRED: ClassVar[dict[str, str]] = {}
    RULES: ClassVar[Registry[SelectionRule]] = ABLATION_RULES

    @classmethod
    def _check_prior(cls, values: Mapping[str, Any], num_references: int) -> None:
        """The core's check for ``prior="uniform"``; for ``"reference"``: a reference column to read, in range, and a
        non-negative ``prior_strength`` (the per-task prior itself is checked when the posterior is built)."""
        if values["prior"] == "uniform":
            super()._check_prior(values, num_references)
            return
        if values["prior"] != "reference":
            raise ValueError(f"prior must be 'uniform' or 'reference', got {values['prior']!r}")
        if not num_references:
            raise ValueError("prior='reference' needs reference_pass_rates")
        col = int(values["prior_column"])
        if not -num_references <= col < num_references:
            raise ValueError(f"prior_column {col} out of range for {num_references} reference columns")
        kappa = float(values["prior_strength"])
        if not (np.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"prior_strength must be >= 0, got {values['prior_strength']!r}")

    def _prior(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        hp, ref = self.hparams, self.reference
        a0, b0 = float(hp["alpha0"]), float(hp["beta0"])
        if hp["prior"] == "uniform":
            return a0, b0
        assert ref is not None  # _check_prior refuses a reference prior without reference columns
        kappa = float(hp["prior_strength"])
        p = ref[:, int(hp["prior_column"])]
        return a0 + kappa * p, b0 + kappa * (1.0 - p)
