"""Implicit evidence from an online item-response model over all reference columns (beyond the paper).

The paper's plug-in (:class:`~bots_verl.core.evidence.InterpolationEvidence`) places the policy at one global position
``mu`` between a weak and a strong reference, linearly in probability space; its predictions correlate only about 0.5
with the empirical pass rates (paper Fig. 5). This plug-in keeps the idea (reference pass rates say how hard a task
is) but changes three things:

1. **Logit space, all columns.** Pass rates of models of different ability on the same item are close to linear in
   log-odds (a 2PL item-response model: ``logit p = a (theta - b)``), not in probability. The policy's log-odds are
   predicted by a linear model over every reference column::

       z_k = beta_0 + sum_j beta_j * logit(ref_kj)

   ``beta`` is fitted online by weighted ridge least squares on the empirical logits of the observed batches, each
   observation weighted by its binomial information ``n q (1 - q)``; the sufficient statistics decay by ``forget`` per
   step so that ``beta`` follows the improving policy (the intercept is the policy's ability). With K columns there
   are K + 1 parameters instead of the paper's one, still fitted from a few hundred observed groups.
2. **Per-task residuals.** The references cannot see the policy's own per-task quirks. Every observed task keeps the
   residual of its empirical logit from the regression, filtered over its observations (precision-weighted mean
   whose precision decays by ``residual_forget`` per step, a Kalman filter with a random-walk drift), and the
   prediction adds it back, shrunk toward 0 by ``tau2 / (tau2 + 1 / precision)``. ``tau2``, the variance of true
   residuals, is estimated from the batches (squared residuals minus their binomial noise). A task seen a few steps
   ago is therefore predicted from its own outcome plus the policy's ability gain since, instead of from the
   references alone.
3. **Honest uncertainty hooks.** :meth:`IRTEvidence.predict` returns the current prediction for any subset without
   changing state, so a selector can measure the prediction error on a batch *before* the plug-in sees it.

Everything is a few vector operations over the pool per step; the regression itself is ``(K+1) x (K+1)``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.evidence import EVIDENCE, ImplicitEvidence
from bots_verl.core.logistic import logit_into, sigmoid_inplace
from bots_verl.core.validation import check_real_array, check_unit_interval, require_keys

logger = logging.getLogger(__name__)

__all__ = ["IRTEvidence"]

_STATE_KEYS = ("gram", "moment", "coef", "tau2", "res_mean", "res_prec", "fitted", "last_rmse_logit")


@EVIDENCE.register("irt")
class IRTEvidence(ImplicitEvidence):
    """Per-task predictions from a logit-linear model over all reference columns, plus per-task residuals.

    Hyperparameters:
        forget: per-step decay of the regression's sufficient statistics, in [0, 1) (0.1: about ten batches of
            memory, so the fitted ability follows the policy).
        ridge: prior precision of the coefficients (in units of one fully informative observation, ``n q(1-q)``
            = 4 for 16 rollouts at q = 0.5), pulling them toward ``intercept 0, slopes 1 / K``.
        residual_forget: per-step decay of a task's residual precision, in [0, 1) (0.02: a task's own outcome stays
            informative for tens of steps; the policy's per-task quirks are persistent).
        residual: whether to use per-task residuals at all (False: the regression alone, for ablations).
        ref_eps: reference rates are clipped to ``[ref_eps, 1 - ref_eps]`` before the logit (GURU rates are
            multiples of 1/16, with many exact 0 and 1).
        default_attempts: rollouts per task assumed when :meth:`observe` is not given ``attempts``.
        tau2_init: the residual variance before any batch has measured it.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "forget": 0.1,
        "ridge": 1.0,
        "residual_forget": 0.02,
        "residual": True,
        "ref_eps": 0.02,
        "default_attempts": 16,
        "tau2_init": 1.0,
    }
    needs_reference: ClassVar[bool] = True

    @classmethod
    def bytes_per_task(cls, reference_columns: int) -> tuple[int, int]:
        # held: the design matrix, residual means and precisions; working: the new residual arrays and the prediction
        return 8 * (reference_columns + 1) + 16, 24

    def __init__(self, num_tasks: int, reference: np.ndarray | None, **params: Any) -> None:
        super().__init__(num_tasks, reference, **params)
        if reference is None:
            raise ValueError("the 'irt' evidence needs reference_pass_rates (one or more columns, weak -> strong)")
        p = self.params
        self.forget = check_unit_interval("forget", p["forget"], open_right=True)
        self.residual_forget = check_unit_interval("residual_forget", p["residual_forget"], open_right=True)
        self.ridge = float(p["ridge"])
        if not (np.isfinite(self.ridge) and self.ridge > 0):
            raise ValueError(f"ridge must be > 0, got {p['ridge']!r}")
        eps = float(p["ref_eps"])
        if not 0 < eps < 0.5:
            raise ValueError(f"ref_eps must lie in (0, 0.5), got {p['ref_eps']!r}")
        self.default_attempts = float(p["default_attempts"])
        if not (np.isfinite(self.default_attempts) and self.default_attempts > 0):
            raise ValueError(f"default_attempts must be > 0, got {p['default_attempts']!r}")
        self.use_residual = bool(p["residual"])
        k = reference.shape[1]
        # Design matrix [1, logit(ref_1), ..., logit(ref_K)], fixed for the run.
        self.features = np.empty((num_tasks, k + 1))
        self.features[:, 0] = 1.0
        logit_into(reference, eps, self.features[:, 1:])
        self.prior_coef = np.concatenate([[0.0], np.full(k, 1.0 / k)])
        # Mutable state.
        self.gram = np.zeros((k + 1, k + 1))
        self.moment = np.zeros(k + 1)
        self.coef = self.prior_coef.copy()
        self.tau2 = float(p["tau2_init"])
        if not (np.isfinite(self.tau2) and self.tau2 > 0):
            raise ValueError(f"tau2_init must be > 0, got {p['tau2_init']!r}")
        self.res_mean = np.zeros(num_tasks)
        self.res_prec = np.zeros(num_tasks)
        self.fitted = False
        self.last_rmse_logit = float("nan")

    # ------------------------------------------------------------------------------------------------ prediction
    def predict_logit(self, indices: np.ndarray | None = None) -> np.ndarray:
        """Predicted log-odds for ``indices`` (all tasks if None) from the current state; changes nothing."""
        return self._logit(self.state_dict_view(), indices)

    def _logit(self, state: dict[str, Any], indices: np.ndarray | None) -> np.ndarray:
        x = self.features if indices is None else self.features[indices]
        z = x @ state["coef"]
        if self.use_residual:
            prec = state["res_prec"] if indices is None else state["res_prec"][indices]
            mean = state["res_mean"] if indices is None else state["res_mean"][indices]
            # Shrink each residual by its reliability tau2 / (tau2 + 1/prec) = prec / (prec + 1/tau2).
            shrink = prec / (prec + 1.0 / state["tau2"])
            shrink *= mean
            z += shrink
        return z

    def predict(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        """Predicted success rates for ``indices`` (all tasks if None), or None before the first batch."""
        if not self.fitted:
            return None
        return sigmoid_inplace(self.predict_logit(indices))

    # ---------------------------------------------------------------------------------------------------- update
    def propose(
        self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Fit the batch into a new state and return the prediction over the pool under it; changes nothing.

        Args:
            indices: validated task indices of the batch.
            rates: their observed success rates in [0, 1].
            attempts: rollouts per task (default ``default_attempts``); they set the observations' weights.
        """
        n = np.full(indices.size, self.default_attempts) if attempts is None else np.asarray(attempts, float)
        # Empirical logit with the Haldane-Anscombe half-count, so all-0 and all-1 groups stay finite.
        q = (rates * n + 0.5) / (n + 1.0)
        y = np.log(q) - np.log1p(-q)
        w = n * q * (1.0 - q)  # inverse variance of the empirical logit
        x = self.features[indices]
        # The regression sees raw logits (it is the population model); residuals are filtered separately below.
        keep = 1.0 - self.forget
        gram = self.gram * keep
        gram += (x * w[:, None]).T @ x
        moment = self.moment * keep
        moment += (x * w[:, None]).T @ y
        # Ridge relative to one fully informative 16-rollout observation (weight 4), toward the prior coefficients.
        reg = self.ridge * 4.0 * np.eye(gram.shape[0])
        coef = np.linalg.solve(gram + reg, moment + reg @ self.prior_coef)
        res = y - x @ coef
        # tau2: residual variance beyond the binomial noise of the empirical logits (1 / w), smoothed over batches.
        excess = float(np.mean(res**2 - 1.0 / w))
        state: dict[str, Any] = {
            "gram": gram,
            "moment": moment,
            "coef": coef,
            "tau2": float(np.clip(0.9 * self.tau2 + 0.1 * excess, 0.05, 25.0)),
            "res_mean": self.res_mean,
            "res_prec": self.res_prec,
            "fitted": True,
            "last_rmse_logit": float(np.sqrt(np.mean(res**2))),
        }
        if self.use_residual:
            res_prec = self.res_prec * (1.0 - self.residual_forget)
            res_mean = self.res_mean.copy()
            prec_b = res_prec[indices]
            res_mean[indices] = (prec_b * res_mean[indices] + w * res) / (prec_b + w)
            res_prec[indices] = prec_b + w
            state["res_mean"], state["res_prec"] = res_mean, res_prec
        return sigmoid_inplace(self._logit(state, None)), state

    def commit(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)

    # ------------------------------------------------------------------------------------------- logging, state
    def stats(self) -> dict[str, float]:
        out = {f"coef_{i}": float(c) for i, c in enumerate(self.coef)}
        out["tau2"] = self.tau2
        out["batch_rmse_logit"] = self.last_rmse_logit
        out["tasks_with_residual"] = float(np.count_nonzero(self.res_prec))
        return out

    def state_dict_view(self) -> dict[str, Any]:
        """The state without copies (for reading only)."""
        return {key: getattr(self, key) for key in _STATE_KEYS}

    def state_dict(self) -> dict[str, Any]:
        return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.state_dict_view().items()}

    def check_state(self, state: dict[str, Any]) -> None:
        """Raise ``ValueError`` unless ``state`` fits this pool and reference width (nothing is changed)."""
        require_keys(state, _STATE_KEYS, "irt evidence checkpoint")
        k1 = self.features.shape[1]
        shapes = {
            "gram": (k1, k1),
            "moment": (k1,),
            "coef": (k1,),
            "res_mean": (self.num_tasks,),
            "res_prec": (self.num_tasks,),
        }
        for key, shape in shapes.items():
            check_real_array(f"irt evidence checkpoint {key}", state[key], shape)
        if np.any(np.asarray(state["res_prec"]) < 0):
            raise ValueError("irt evidence checkpoint has negative residual precisions")
        check_real_array("irt evidence checkpoint tau2", state["tau2"], (), positive=True)
        if not isinstance(state["fitted"], bool | np.bool_):
            raise ValueError(f"irt evidence checkpoint fitted must be true or false, got {state['fitted']!r}")
        # NaN before the first batch, so only the type is checked
        rmse = state["last_rmse_logit"]
        if isinstance(rmse, bool) or not isinstance(rmse, float | int | np.floating | np.integer):
            raise ValueError(f"irt evidence checkpoint last_rmse_logit must be a number, got {rmse!r}")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state(state)
        self.commit(
            {
                **{k: np.array(state[k], dtype=np.float64) for k in ("gram", "moment", "coef", "res_mean", "res_prec")},
                "tau2": float(state["tau2"]),
                "fitted": bool(state["fitted"]),
                "last_rmse_logit": float(state["last_rmse_logit"]),
            }
        )
