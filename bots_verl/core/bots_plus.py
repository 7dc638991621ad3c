"""``bots_plus``: BOTS with item-response implicit evidence over all reference columns (beyond the paper).

Same Beta posteriors and the same generalised update as the paper's ``bots`` (which stays unchanged). What differs by
default is the evidence plug-in; the other directions we tried are options, measured in the ablation:

- **Evidence** ``irt`` (:mod:`bots_verl.core.irt_evidence`): a logit-linear model over all reference columns fitted
  online, plus each task's own filtered residual, instead of one global weak/strong interpolation coefficient.
- **No cold start** (option ``prior="reference"``): the prior comes from a reference column, so the first batch is
  aimed at plausible tasks. Measured: no gain, because the forgetting keeps pulling every task back toward a
  reference that is miscalibrated for the policy, while the ``irt`` fit already fixes the cold start after one batch.
- **Adaptive rho** (option; the paper's open question 2): before the plug-in sees a batch, its current prediction for
  that batch is compared with the observed rates. The squared error minus the binomial noise of the observed rates
  estimates the prediction's error variance ``s2``; a Beta belief with that accuracy is worth
  ``ess = pbar (1 - pbar) / s2 - 1`` observations. A never-selected task's implicit effective sample size converges
  to ``rho * m / lam`` (Proposition 2), so ``rho = lam * ess / m`` makes the posterior exactly as confident as the
  evidence has proven to be: a good predictor earns a large ``rho``, a poor one fades to ``rho_min``. Measured: it
  hurts. The error is measured on the *selected* batch, where selection on noisy posteriors inflates it (a winner's
  curse), so ``rho`` falls to about 0.02, the implicit ESS to about 3, and Thompson sampling becomes near random.
- **Adaptive lam** (optional, off by default): the same rule for the explicit evidence. The posterior mean's error on
  the batch (again net of binomial noise) says how fast success rates drift; ``lam = n * s2 / (pbar (1 - pbar))``
  makes an always-selected task's steady-state ESS ``n / lam`` match it.
- **Selection** is any registered rule; this module adds ``learnability`` (posterior-expected ``p (1 - p)``, i.e. the
  expected GRPO reward variance, deterministic) and ``mean`` is the existing ``greedy``.

Non-binary rewards: :func:`rewards_to_successes` maps per-rollout rewards to the fractional successes the core accepts
(rewards in [0, 1] are used as they are; rewards on another bounded scale ``[lo, hi]`` are rescaled affinely and
clipped). It is a pure helper: the selector's ``update`` keeps the core's contract (``0 <= successes <= attempts``).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.selection import SELECTION_RULES, top_k
from bots_verl.core.selectors import BetaPosteriorSelector, register_selector
from bots_verl.core.validation import check_unit_interval

logger = logging.getLogger(__name__)

__all__ = ["BOTSPlusSelector", "rewards_to_successes"]


def _learnability(alpha: np.ndarray, beta: np.ndarray, target: float, k: int, rng: np.random.Generator, tau: float):
    # E[p (1 - p)] under Beta(a, b) = a b / ((a + b)(a + b + 1)): the expected reward variance of a rollout group,
    # which is what GRPO learns from. It ignores ``target`` (its optimum is p = 0.5 by construction).
    n = alpha + beta
    score = alpha * beta
    score /= n
    n += 1.0
    score /= n
    # Random tie-breaking, as for ``greedy`` (the flat prior gives exact ties).
    score += rng.random(score.size) * 1e-12
    return top_k(score, k)


if "learnability" not in SELECTION_RULES:
    SELECTION_RULES["learnability"] = _learnability


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


@register_selector("bots_plus")
class BOTSPlusSelector(BetaPosteriorSelector):
    """BOTS with the ``irt`` evidence; optional reference prior and error-driven ``rho`` / ``lam`` (off by default).

    The defaults are one setting for every domain, chosen from the ablation in ``bots_verl/sim/bots_plus_results.md``:
    ``irt`` evidence, the paper's ``lam = rho = 0.1``, uniform prior, Thompson sampling. The reference prior and the
    adaptive rules are kept as options because the ablation measured them; they did not help.

    Hyperparameters (besides :class:`BetaPosteriorSelector`'s):
        adaptive_rho: set ``rho`` each step from the implicit evidence's measured error (False). ``rho`` is then only
            the starting value.
        rho_min, rho_max: the range of the adaptive ``rho``.
        adaptive_lam: set ``lam`` each step from the posterior's measured error (False).
        lam_min, lam_max: the range of the adaptive ``lam``.
        error_momentum: smoothing of the measured error variances across steps, in [0, 1).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        **BetaPosteriorSelector.DEFAULTS,
        "evidence": "irt",
        "selection": "thompson",
        "adaptive_rho": False,
        "rho_min": 0.01,
        "rho_max": 1.0,
        "adaptive_lam": False,
        "lam_min": 0.02,
        "lam_max": 0.5,
        "error_momentum": 0.8,
    }

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

    # --------------------------------------------------------------------------------------------------- update
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
        super()._update(indices, successes, attempts)

    # ------------------------------------------------------------------------------------------ logging, state
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

    def _check_state(self, extra: dict[str, Any]) -> None:
        super()._check_state(extra)
        for key in ("rho", "lam"):
            check_unit_interval(f"checkpoint {key}", extra[key])

    def _load_state(self, extra: dict[str, Any]) -> None:
        super()._load_state(extra)
        self.rho = float(extra["rho"])
        self.lam = float(extra["lam"])
        self.pred_err2 = None if extra["pred_err2"] is None else float(extra["pred_err2"])
        self.post_err2 = None if extra["post_err2"] is None else float(extra["post_err2"])
