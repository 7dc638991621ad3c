"""The paper's rules, written plainly: read this first.

BOTS (Bayesian Online Task Selection, arXiv 2510.26374) in one class, step by step, as the paper and its official
port state them. Nothing here is optimised or validated: inputs are assumed to be well formed. The library's selectors
(:mod:`bots_verl.core.paper.bots_selectors`) compute the same numbers faster and safely;
``tests/core/paper/test_paper_rules.py`` holds them to this module to 1e-12 for ``bots``, ``mopps`` and
``implicit_only``, and ``python -m bots_verl.speed.selector_speed`` times the two side by side.

One training step ``t`` (paper Sec. 3, Fig. 1):

1. **Select** (Sec. 3.4). For every task draw ``p_hat_k ~ Beta(alpha_k, beta_k)`` (Thompson sampling) and train the
   ``B`` tasks whose draws are closest to the target ``p* = 0.5``: utility ``-|p_hat_k - p*|``, highest first.
2. **Train** the policy on that batch with ``n_k`` rollouts per task; task ``k`` scores ``s_k`` successes (fractional
   for rewards in [0, 1]) and ``f_k = n_k - s_k`` failures. That happens outside this module.
3. **Implicit evidence** (Sec. 3.3, the interpolation plug-in). Every task has a weak and a strong reference pass
   rate ``w_k`` and ``s_k^ref``. The batch places the policy between the two::

       mu_raw = (mean_B r - mean_B w) / (mean_B s^ref - mean_B w)        (r_k = s_k / n_k, the observed rates)
       mu     = mu_raw at the first update, then  gamma * mu + (1 - gamma) * mu_raw     (gamma = 0.9)
       p_tilde_k = clip(w_k + mu * (s_k^ref - w_k), 0, 1)                 for every task

   Where the batch's two reference means (nearly) coincide, ``mu_raw`` is 0/0: we keep the previous ``mu`` (and
   there is no prediction before the first informative batch). The upstream port divides by ``gap + 1e-6`` instead.
4. **Update** (Eq. 1, the generalised Bayesian update)::

       alpha_k <- (1 - lam) * alpha_k + lam * alpha0 + (1 - rho) * s_k + rho * s_tilde_k
       beta_k  <- (1 - lam) * beta_k  + lam * beta0  + (1 - rho) * f_k + rho * f_tilde_k

   ``lam`` forgets toward the prior ``Beta(alpha0, beta0) = Beta(1, 1)``, ``rho`` weighs implicit against explicit
   evidence. A trained task has ``s_tilde = s`` and ``f_tilde = f`` (its implicit estimate is its observation), so
   it gets its full explicit counts. An untrained task has ``s = f = 0``, ``s_tilde = m * p_tilde_k`` and
   ``f_tilde = m * (1 - p_tilde_k)``, with ``m`` the rollouts per task (16; here the batch's mean ``n_k``).

Paper defaults (:mod:`bots_verl.core.defaults`): ``lam = rho = 0.1``, ``p* = 0.5``, ``gamma = 0.9``,
``alpha0 = beta0 = 1``. Special cases (Sec. 4):
``rho = 0`` is MoPPS (explicit evidence only; ``mopps``), ``rho = 1`` the DOTS-like implicit-only ablation
(``implicit_only``).
"""

from __future__ import annotations

import numpy as np

from bots_verl.core import defaults

__all__ = ["PaperBOTS"]


class PaperBOTS:
    """BOTS exactly as the paper states it (see the module docstring), over a pool of tasks.

    Args:
        reference: ``(N, 2)`` reference pass rates, weak then strong; None for no implicit evidence (MoPPS).
        num_tasks: the pool size (needed only without ``reference``).
        seed: seeds the Thompson draws (same seed and outcomes as a library selector: same selections).
        lam, rho, target, gamma, alpha0, beta0: the paper's hyperparameters (defaults above).
        implicit_scale: ``m``; None uses the mean attempts of each update.
        degenerate_tol: batches with ``|mean_B s^ref - mean_B w| <`` this leave ``mu`` unchanged.
    """

    def __init__(
        self,
        reference: np.ndarray | None = None,
        *,
        num_tasks: int | None = None,
        seed: int = 0,
        lam: float = defaults.LAM,
        rho: float = defaults.RHO,
        target: float = defaults.TARGET,
        gamma: float = defaults.GAMMA,
        alpha0: float = defaults.ALPHA0,
        beta0: float = defaults.BETA0,
        implicit_scale: float | None = None,
        degenerate_tol: float = defaults.DEGENERATE_TOL,
    ) -> None:
        n = len(reference) if reference is not None else num_tasks
        if n is None:
            raise ValueError("give reference or num_tasks")
        self.weak = None if reference is None else np.asarray(reference, dtype=float)[:, 0]
        self.strong = None if reference is None else np.asarray(reference, dtype=float)[:, 1]
        self.alpha0, self.beta0 = alpha0, beta0
        # Every task starts at the prior Beta(alpha0, beta0): the first batch is effectively random (cold start).
        self.alpha = np.full(n, alpha0)
        self.beta = np.full(n, beta0)
        self.mu: float | None = None  # the policy's position between the references; None until a batch sets it
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.lam, self.rho, self.target, self.gamma = lam, rho, target, gamma
        self.implicit_scale, self.degenerate_tol = implicit_scale, degenerate_tol

    def select(self, batch_size: int) -> np.ndarray:
        """Step 1: Thompson sampling toward the target; the ``batch_size`` best tasks, best first."""
        p_hat = self.rng.beta(self.alpha, self.beta)
        utility = -np.abs(p_hat - self.target)
        return np.argsort(-utility, kind="stable")[:batch_size]

    def predict(self, batch: np.ndarray, rates: np.ndarray) -> np.ndarray | None:
        """Step 3: update ``mu`` from the batch and return ``p_tilde`` for every task (None: no prediction yet)."""
        if self.weak is None or self.strong is None:
            return None
        gap = self.strong[batch].mean() - self.weak[batch].mean()
        if abs(gap) >= self.degenerate_tol:
            mu_raw = (rates.mean() - self.weak[batch].mean()) / gap
            self.mu = mu_raw if self.mu is None else self.gamma * self.mu + (1 - self.gamma) * mu_raw
        if self.mu is None:
            return None
        return np.clip(self.weak + self.mu * (self.strong - self.weak), 0.0, 1.0)

    def update(self, batch: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        """Steps 3 and 4 for one training step's outcomes (``successes`` out of ``attempts`` per batch task)."""
        successes = np.asarray(successes, dtype=float)
        attempts = np.asarray(attempts, dtype=float)
        m = attempts.mean() if self.implicit_scale is None else self.implicit_scale
        p_tilde = self.predict(batch, successes / attempts)
        self.eq1(batch, successes, attempts - successes, p_tilde, m)

    def eq1(
        self, batch: np.ndarray, successes: np.ndarray, failures: np.ndarray, p_tilde: np.ndarray | None, m: float
    ) -> None:
        """Step 4, Eq. 1: the batch's explicit counts, ``m`` implicit pseudo-counts at ``p_tilde`` elsewhere."""
        # Explicit evidence: counts for the batch, zero elsewhere.
        s = np.zeros_like(self.alpha)
        f = np.zeros_like(self.alpha)
        s[batch] = successes
        f[batch] = failures

        # Implicit evidence: m pseudo-observations at the predicted rate for every task (none without a prediction),
        # replaced by the task's own observation where it was trained.
        s_tilde = np.zeros_like(self.alpha) if p_tilde is None else m * p_tilde
        f_tilde = np.zeros_like(self.alpha) if p_tilde is None else m * (1 - p_tilde)
        s_tilde[batch] = successes
        f_tilde[batch] = failures

        # Eq. 1.
        lam, rho = self.lam, self.rho
        self.alpha = (1 - lam) * self.alpha + lam * self.alpha0 + (1 - rho) * s + rho * s_tilde
        self.beta = (1 - lam) * self.beta + lam * self.beta0 + (1 - rho) * f + rho * f_tilde
