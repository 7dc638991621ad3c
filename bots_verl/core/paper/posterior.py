"""Per-task Beta posteriors and the paper's generalised update rule (the optimised path).

The same rules written plainly, step by step, are in :mod:`bots_verl.core.paper.paper_rules`; a test holds this module
to them to 1e-12. Read that one first.

BOTS (arXiv 2510.26374, Eq. 1) keeps ``Beta(alpha_k, beta_k)`` over every task's success probability and applies,
once per training step with batch ``B_t``::

    alpha <- (1 - lam) * alpha + lam * alpha0 + (1 - rho) * s + rho * s_tilde
    beta  <- (1 - lam) * beta  + lam * beta0  + (1 - rho) * f + rho * f_tilde

For ``k in B_t`` the implicit estimate equals the observation, so the task receives its full explicit evidence
``(s_k, f_k = n_k - s_k)``. For ``k not in B_t``, ``s = f = 0`` and ``s_tilde = m * p_tilde_k``,
``f_tilde = m * (1 - p_tilde_k)``.

Conventions (they differ between papers, so we spell them out):

- ``lam`` (BOTS' lambda) is the *forgetting rate*: the old counts are multiplied by ``1 - lam``. MoPPS
  (arXiv 2507.04632) writes the same thing as a decay ``gamma_mopps`` that *multiplies* the old counts, i.e.
  ``gamma_mopps = 1 - lam``. Larger ``lam`` means shorter memory and a smaller effective sample size.
- ``rho`` weighs implicit evidence; ``rho = 0`` is explicit-only (MoPPS), ``rho = 1`` implicit-only for unselected
  tasks (the paper's DOTS-like ablation).

Steady state (the paper's Proposition 2): with ``m`` pseudo-counts per step, a never-selected task's effective sample
size ``alpha + beta`` converges to ``alpha0 + beta0 + rho * m / lam`` and an always-selected one to
``alpha0 + beta0 + n / lam``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from bots_verl.core.validation import check_real_array, require_keys

logger = logging.getLogger(__name__)

__all__ = ["BetaPosterior", "check_prior"]

Prior = float | np.ndarray


def _prior_of(prior: Prior, indices: np.ndarray) -> Prior:
    """The prior of the tasks ``indices``: the shared scalar, or their entries of a per-task prior."""
    return prior[indices] if isinstance(prior, np.ndarray) else prior


def check_prior(name: str, value: Any, num_tasks: int | None = None) -> Prior:
    """A positive finite scalar, or such an array of length ``num_tasks``, as a float or a fresh float64 array
    (without ``num_tasks``: a scalar).

    Raises:
        ValueError: naming ``name``.
    """
    if np.ndim(value) == 0 or num_tasks is None:
        return float(check_real_array(name, value, (), positive=True))
    return check_real_array(name, value, (num_tasks,), positive=True)


class BetaPosterior:
    """Beta(alpha_k, beta_k) for every task of a pool, with per-task or shared priors.

    Args:
        num_tasks: the pool size.
        alpha0: prior pseudo-successes, a positive scalar (shared) or an array of length ``num_tasks``.
        beta0: prior pseudo-failures, likewise.
    """

    # Bytes per task: alpha and beta; one update computes both anew before the old ones are dropped, and the
    # implicit pseudo-counts.
    HELD_BYTES_PER_TASK = 16
    WORKING_BYTES_PER_TASK = 24

    def __init__(self, num_tasks: int, alpha0: Prior, beta0: Prior) -> None:
        self.num_tasks = num_tasks
        self.alpha0 = check_prior("alpha0", alpha0, num_tasks)
        self.beta0 = check_prior("beta0", beta0, num_tasks)
        self.alpha = np.broadcast_to(self.alpha0, (num_tasks,)).astype(np.float64)
        self.beta = np.broadcast_to(self.beta0, (num_tasks,)).astype(np.float64)

    def mean(self) -> np.ndarray:
        """Posterior mean success rate per task."""
        return self.alpha / (self.alpha + self.beta)

    def ess(self) -> np.ndarray:
        """Effective sample size ``alpha + beta`` per task."""
        return self.alpha + self.beta

    def updated(
        self,
        indices: np.ndarray,
        successes: np.ndarray,
        failures: np.ndarray,
        p_tilde: np.ndarray | None,
        *,
        lam: float,
        rho: float,
        m: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The posterior after one training step, as new arrays; this posterior is left unchanged.

        Args:
            indices: unique task indices trained this step (validated).
            successes: their (possibly fractional) successes.
            failures: their failures (attempts - successes).
            p_tilde: predicted success rates over the whole pool, or None for no implicit evidence.
            lam: forgetting rate toward the prior.
            rho: weight of implicit evidence.
            m: implicit pseudo-count scale (pseudo-observations per unselected task per step, before ``rho``).

        Returns:
            The new ``(alpha, beta)``; assign them to commit the step.

        Raises:
            ValueError: if the result is not finite and positive (counts too large for float64); nothing changed.
        """
        keep = 1.0 - lam
        # Whole pool: forget toward the prior. New arrays (so a rejected step changes nothing), then in place.
        alpha = np.multiply(self.alpha, keep)
        alpha += lam * self.alpha0
        beta = np.multiply(self.beta, keep)
        beta += lam * self.beta0
        if p_tilde is not None and rho > 0.0:
            w = rho * m
            implicit = p_tilde * w
            alpha += implicit
            beta += w
            beta -= implicit
        # Selected tasks: the implicit estimate equals the observation, so (1 - rho) * s + rho * s = s.
        alpha[indices] = keep * self.alpha[indices] + lam * _prior_of(self.alpha0, indices) + successes
        beta[indices] = keep * self.beta[indices] + lam * _prior_of(self.beta0, indices) + failures
        # min/max are reductions without temporaries; NaN fails both comparisons.
        for name, arr in (("alpha", alpha), ("beta", beta)):
            if not (arr.min() > 0.0 and np.isfinite(arr.max())):
                bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))[:5].tolist()
                raise ValueError(
                    f"this update would make {name} non-finite or non-positive at tasks {bad} (counts too large "
                    f"for float64?); the posterior is unchanged"
                )
        return alpha, beta

    def state_dict(self) -> dict[str, Any]:
        """Copies of the arrays (safe to keep while training goes on)."""
        return {
            "alpha": self.alpha.copy(),
            "beta": self.beta.copy(),
            "alpha0": self.alpha0 if isinstance(self.alpha0, float) else self.alpha0.copy(),
            "beta0": self.beta0 if isinstance(self.beta0, float) else self.beta0.copy(),
        }

    @staticmethod
    def check_state(state: Any, num_tasks: int) -> dict[str, Any]:
        """The validated contents of ``state`` (a :meth:`state_dict` of a ``num_tasks`` pool), as fresh arrays.

        Raises:
            ValueError: for a missing key, a wrong shape or dtype, or values that are not finite and positive.
        """
        require_keys(state, ("alpha", "beta", "alpha0", "beta0"), "checkpoint posterior")
        out: dict[str, Any] = {}
        for key in ("alpha", "beta"):
            out[key] = check_real_array(f"checkpoint {key}", state[key], (num_tasks,), positive=True)
        for key in ("alpha0", "beta0"):
            out[key] = check_prior(f"checkpoint {key}", state[key], num_tasks)
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned, after checking all of it."""
        checked = self.check_state(state, self.num_tasks)
        self.alpha, self.beta = checked["alpha"], checked["beta"]
        self.alpha0, self.beta0 = checked["alpha0"], checked["beta0"]
