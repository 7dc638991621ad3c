"""Per-task Beta posteriors and the paper's generalised update rule.

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

from typing import Any

import numpy as np

__all__ = ["BetaPosterior"]


def _at(x: np.ndarray | float, idx: np.ndarray) -> np.ndarray | float:
    return x[idx] if isinstance(x, np.ndarray) else x


class BetaPosterior:
    """Beta(alpha_k, beta_k) for every task of a pool, with per-task or shared priors.

    Args:
        alpha0: prior pseudo-successes, a positive scalar (shared) or an array of length ``num_tasks``.
        beta0: prior pseudo-failures, likewise.
        num_tasks: the pool size.
    """

    def __init__(self, num_tasks: int, alpha0: float | np.ndarray, beta0: float | np.ndarray) -> None:
        for name, prior in (("alpha0", alpha0), ("beta0", beta0)):
            arr = np.asarray(prior, dtype=np.float64)
            if arr.ndim not in (0, 1) or (arr.ndim == 1 and arr.size != num_tasks):
                raise ValueError(f"{name} must be a scalar or have length {num_tasks}, got shape {arr.shape}")
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(f"{name} must be positive and finite")
        self.num_tasks = num_tasks
        self.alpha0 = float(alpha0) if np.ndim(alpha0) == 0 else np.asarray(alpha0, dtype=np.float64).copy()
        self.beta0 = float(beta0) if np.ndim(beta0) == 0 else np.asarray(beta0, dtype=np.float64).copy()
        self.alpha = np.broadcast_to(self.alpha0, (num_tasks,)).astype(np.float64)
        self.beta = np.broadcast_to(self.beta0, (num_tasks,)).astype(np.float64)

    def mean(self) -> np.ndarray:
        """Posterior mean success rate per task."""
        return self.alpha / (self.alpha + self.beta)

    def ess(self) -> np.ndarray:
        """Effective sample size ``alpha + beta`` per task."""
        return self.alpha + self.beta

    def step(
        self,
        indices: np.ndarray,
        successes: np.ndarray,
        failures: np.ndarray,
        p_tilde: np.ndarray | None,
        *,
        lam: float,
        rho: float,
        m: float,
    ) -> None:
        """Apply one training step's update (inputs already validated).

        Args:
            indices: unique task indices trained this step.
            successes: their (possibly fractional) successes.
            failures: their failures (attempts - successes).
            p_tilde: predicted success rates over the whole pool, or None for no implicit evidence.
            lam: forgetting rate toward the prior.
            rho: weight of implicit evidence.
            m: implicit pseudo-count scale (pseudo-observations per unselected task per step, before ``rho``).
        """
        a_batch = self.alpha[indices]
        b_batch = self.beta[indices]
        keep = 1.0 - lam
        # In-place over the pool: at 1M tasks every temporary costs ~2 ms.
        self.alpha *= keep
        self.alpha += lam * self.alpha0
        self.beta *= keep
        self.beta += lam * self.beta0
        if p_tilde is not None and rho > 0.0:
            w = rho * m
            implicit = p_tilde * w
            self.alpha += implicit
            self.beta += w
            self.beta -= implicit
        # Selected tasks: the implicit estimate equals the observation, so (1 - rho) * s + rho * s = s.
        self.alpha[indices] = keep * a_batch + lam * _at(self.alpha0, indices) + successes
        self.beta[indices] = keep * b_batch + lam * _at(self.beta0, indices) + failures

    def state_dict(self) -> dict[str, Any]:
        """Copies of the arrays (safe to keep while training goes on)."""
        return {
            "alpha": self.alpha.copy(),
            "beta": self.beta.copy(),
            "alpha0": self.alpha0 if isinstance(self.alpha0, float) else self.alpha0.copy(),
            "beta0": self.beta0 if isinstance(self.beta0, float) else self.beta0.copy(),
        }

    @staticmethod
    def check_state(state: dict[str, Any], num_tasks: int) -> None:
        """Raise ``ValueError`` unless ``state`` is a valid posterior of ``num_tasks`` tasks."""
        for key in ("alpha", "beta"):
            arr = np.asarray(state[key], dtype=np.float64)
            if arr.shape != (num_tasks,):
                raise ValueError(f"checkpoint {key} has shape {arr.shape}, expected ({num_tasks},)")
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(f"checkpoint {key} has non-positive or non-finite values")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (call :meth:`check_state` first)."""
        self.alpha = np.array(state["alpha"], dtype=np.float64)
        self.beta = np.array(state["beta"], dtype=np.float64)
        for key in ("alpha0", "beta0"):
            value = state[key]
            setattr(self, key, float(value) if np.ndim(value) == 0 else np.array(value, dtype=np.float64))
