"""Directions measured for ``bots_plus`` and not adopted, kept runnable for the ablation (not in the core).

``python -m bots_verl.sim.bots_plus_ablation`` compares them; the findings are in
``bots_verl/sim/bots_plus_results.md``. They are options of two simulator selectors
(:data:`~bots_verl.sim.selector_registry.SIM_SELECTORS`): ``bots_ablation`` (the paper's ``bots``) and
``bots_plus_ablation`` (``bots_plus``), which take the core selectors' hyperparameters plus:

- ``prior="reference"`` (with ``prior_strength``, ``prior_column``): no cold start, the prior comes from a reference
  column. Measured: no gain, because the forgetting keeps pulling every task back toward a reference that is
  miscalibrated for the policy, while the ``irt`` fit already fixes the cold start after one batch.
- ``adaptive_rho=true`` (``bots_plus_ablation``; the paper's open question 2): before the plug-in sees a batch, its
  prediction for that batch is compared with the observed rates. The squared error minus the binomial noise of the
  observed rates estimates the prediction's error variance ``s2``; a Beta belief with that accuracy is worth
  ``ess = pbar (1 - pbar) / s2 - 1`` observations. A never-selected task's implicit effective sample size converges
  to ``rho * m / lam`` (Proposition 2), so ``rho = lam * ess / m`` makes the posterior as confident as the evidence
  has proven to be. Measured: it hurts. The error is measured on the *selected* batch, where selection on noisy
  posteriors inflates it (a winner's curse), so ``rho`` falls to about 0.02 and Thompson sampling becomes near
  random.
- ``adaptive_lam=true`` (``bots_plus_ablation``): the same rule for the explicit evidence,
  ``lam = n s2 / (pbar (1 - pbar))`` from the posterior mean's error on the batch. Measured: it hurts more.
- ``selection="learnability"``: posterior-expected ``p (1 - p)``, the expected GRPO reward variance, deterministic.
  Measured: within noise, slightly worse; it penalises uncertainty, so it explores less.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.beta_selectors import BOTSSelector
from bots_verl.core.bots_plus import BOTSPlusSelector
from bots_verl.core.registry import Registry
from bots_verl.core.selection_rules import SELECTION_RULES, SelectionRule, top_k
from bots_verl.core.validation import check_unit_interval
from bots_verl.sim.selector_registry import SIM_SELECTORS

logger = logging.getLogger(__name__)

__all__ = ["ABLATION_RULES", "BOTSAblation", "BOTSPlusAblation", "learnability"]


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


class _PriorOptions:
    """Mixin: ``prior="reference"`` sets per task ``alpha0_k = alpha0 + prior_strength * p_k`` and
    ``beta0_k = beta0 + prior_strength * (1 - p_k)``, with ``p_k`` the reference column ``prior_column`` (default 0,
    the weakest reference, closest to a small policy); the per-task prior is also the target of the forgetting.
    ``prior="uniform"`` is the core's ``Beta(alpha0, beta0)``.
    """

    PRIOR_DEFAULTS: ClassVar[dict[str, Any]] = {"prior": "uniform", "prior_strength": 4.0, "prior_column": 0}
    # the per-task prior they define is restored from a checkpoint's posterior as saved
    CHECKPOINT_HPARAMS: ClassVar[tuple[str, ...]] = ("alpha0", "beta0", "prior", "prior_strength", "prior_column")
    RETIRED: ClassVar[dict[str, str]] = {}
    RULES: ClassVar[Registry[SelectionRule]] = ABLATION_RULES
    hparams: dict[str, Any]
    reference: np.ndarray | None

    def _prior(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        hp, ref = self.hparams, self.reference
        a0, b0 = float(hp["alpha0"]), float(hp["beta0"])
        if hp["prior"] == "uniform":
            return a0, b0
        if hp["prior"] != "reference":
            raise ValueError(f"prior must be 'uniform' or 'reference', got {hp['prior']!r}")
        if ref is None:
            raise ValueError("prior='reference' needs reference_pass_rates")
        col = int(hp["prior_column"])
        if not -ref.shape[1] <= col < ref.shape[1]:
            raise ValueError(f"prior_column {col} out of range for {ref.shape[1]} reference columns")
        kappa = float(hp["prior_strength"])
        if not (np.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"prior_strength must be >= 0, got {hp['prior_strength']!r}")
        p = ref[:, col]
        return a0 + kappa * p, b0 + kappa * (1.0 - p)


@SIM_SELECTORS.register("bots_ablation")
class BOTSAblation(_PriorOptions, BOTSSelector):
    """``bots`` with the options measured and not adopted: a reference prior, learnability selection."""

    DEFAULTS: ClassVar[dict[str, Any]] = {**BOTSSelector.DEFAULTS, **_PriorOptions.PRIOR_DEFAULTS}


@SIM_SELECTORS.register("bots_plus_ablation")
class BOTSPlusAblation(_PriorOptions, BOTSPlusSelector):
    """``bots_plus`` with the options measured and not adopted: reference prior, adaptive rho / lam, learnability.

    Hyperparameters (besides ``bots_plus``'s and the prior options):
        adaptive_rho: set ``rho`` from the implicit evidence's measured error (``rho`` is then the starting value).
        rho_min, rho_max: the range of the adaptive ``rho``.
        adaptive_lam: set ``lam`` from the posterior's measured error.
        lam_min, lam_max: the range of the adaptive ``lam``.
        error_momentum: smoothing of the measured error variances across steps, in [0, 1).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        **BOTSPlusSelector.DEFAULTS,
        **_PriorOptions.PRIOR_DEFAULTS,
        "adaptive_rho": False,
        "rho_min": 0.01,
        "rho_max": 1.0,
        "adaptive_lam": False,
        "lam_min": 0.02,
        "lam_max": 0.5,
        "error_momentum": 0.8,
    }
    # rho and lam are restored from a checkpoint as they were (adapted or not), like the prior
    CHECKPOINT_HPARAMS: ClassVar[tuple[str, ...]] = (*_PriorOptions.CHECKPOINT_HPARAMS, "rho", "lam")

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        hp = self.hparams
        self.adaptive_rho = bool(hp["adaptive_rho"])
        self.adaptive_lam = bool(hp["adaptive_lam"])
        self.rho_min = check_unit_interval("rho_min", hp["rho_min"])
        self.rho_max = check_unit_interval("rho_max", hp["rho_max"])
        self.lam_min = check_unit_interval("lam_min", hp["lam_min"])
        self.lam_max = check_unit_interval("lam_max", hp["lam_max"])
        if self.rho_min > self.rho_max or self.lam_min > self.lam_max:
            raise ValueError("need rho_min <= rho_max and lam_min <= lam_max")
        self.error_momentum = check_unit_interval("error_momentum", hp["error_momentum"], open_right=True)
        # Smoothed error variances (None until measured) of the implicit prediction and of the posterior mean.
        self.pred_err2: float | None = None
        self.post_err2: float | None = None

    def _smooth(self, old: float | None, new: float) -> float:
        return new if old is None else self.error_momentum * old + (1.0 - self.error_momentum) * new

    @staticmethod
    def _excess_error(pred: np.ndarray, rates: np.ndarray, attempts: np.ndarray) -> tuple[float, float]:
        """(error variance beyond binomial noise, mean p(1-p)) of ``pred`` against the observed ``rates``.

        ``rates (1 - rates) / (n - 1)`` is the unbiased estimate of the binomial variance ``p (1 - p) / n`` of an
        observed rate, so subtracting it leaves the prediction's own error. The floor keeps a lucky batch from
        claiming a perfect predictor.
        """
        noise = rates * (1.0 - rates) / np.maximum(attempts - 1.0, 1.0)
        err2 = float(np.mean((pred - rates) ** 2 - noise))
        pq = float(np.mean(pred * (1.0 - pred)))
        return max(err2, 1e-4), max(pq, 1e-3)

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        saved = (self.rho, self.lam, self.pred_err2, self.post_err2)
        rates = successes / attempts
        n_bar = float(attempts.mean())
        m = self.implicit_scale if self.implicit_scale is not None else n_bar
        # Both errors are measured before anything learns from this batch (out-of-sample).
        if self.adaptive_rho:
            pred = self.evidence.predict(indices)
            if pred is not None:
                err2, pq = self._excess_error(pred, rates, attempts)
                self.pred_err2 = self._smooth(self.pred_err2, err2)
                ess = max(pq / self.pred_err2 - 1.0, 0.0)
                self.rho = float(np.clip(self.lam * ess / m, self.rho_min, self.rho_max))
        if self.adaptive_lam:
            a, b = self.posterior.alpha[indices], self.posterior.beta[indices]
            err2, pq = self._excess_error(a / (a + b), rates, attempts)
            self.post_err2 = self._smooth(self.post_err2, err2)
            self.lam = float(np.clip(n_bar * self.post_err2 / pq, self.lam_min, self.lam_max))
        try:
            super()._update(indices, successes, attempts)
        except ValueError:
            self.rho, self.lam, self.pred_err2, self.post_err2 = saved
            raise

    def stats(self) -> dict[str, float]:
        out = super().stats()
        out["adaptive/rho"] = self.rho
        out["adaptive/lam"] = self.lam
        out["adaptive/pred_err2"] = float("nan") if self.pred_err2 is None else self.pred_err2
        out["adaptive/post_err2"] = float("nan") if self.post_err2 is None else self.post_err2
        return out

    def _state(self) -> dict[str, Any]:
        return {
            **super()._state(),
            "rho": self.rho,
            "lam": self.lam,
            "pred_err2": self.pred_err2,
            "post_err2": self.post_err2,
        }

    def _check_state(self, extra: Any) -> None:
        super()._check_state(extra)
        for key in ("rho", "lam"):
            check_unit_interval(f"checkpoint {key}", extra[key])

    def _load_state(self, extra: Any) -> None:
        super()._load_state(extra)
        self.rho = float(extra["rho"])
        self.lam = float(extra["lam"])
        self.pred_err2 = None if extra["pred_err2"] is None else float(extra["pred_err2"])
        self.post_err2 = None if extra["post_err2"] is None else float(extra["post_err2"])
