"""Implicit-evidence plug-ins: predicted success rates for the tasks *not* trained this step.

BOTS (arXiv 2510.26374, Sec. 3.3) fuses explicit evidence (the rollouts of the batch) with implicit evidence for every
other task. A plug-in turns one step's observed batch into a prediction ``p_tilde`` over the whole pool; the
posterior then adds ``rho * m * p_tilde`` pseudo-successes and ``rho * m * (1 - p_tilde)`` pseudo-failures to each
unselected task (see :mod:`bots_verl.core.posterior`).

Adding a plug-in is one small class plus its registry line::

    @register_evidence("my_plugin")
    class MyEvidence(ImplicitEvidence):
        DEFAULTS = {"my_param": 1.0}

        def observe(self, indices, rates, attempts):
            ...  # return an array of length num_tasks, or None for "no implicit evidence this step"
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.validation import check_unit_interval

logger = logging.getLogger(__name__)

__all__ = ["EVIDENCE", "ImplicitEvidence", "InterpolationEvidence", "NoEvidence", "register_evidence"]

EVIDENCE: dict[str, type[ImplicitEvidence]] = {}


def register_evidence(name: str):
    """Class decorator that registers an :class:`ImplicitEvidence` subclass under ``name``."""

    def wrap(cls: type[ImplicitEvidence]) -> type[ImplicitEvidence]:
        if name in EVIDENCE:
            raise ValueError(f"evidence plug-in {name!r} is already registered")
        cls.name = name
        EVIDENCE[name] = cls
        return cls

    return wrap


class ImplicitEvidence:
    """Interface of an implicit-evidence plug-in.

    Args:
        num_tasks: the pool size.
        reference: validated reference pass rates, shape ``(num_tasks, K)``, columns weak -> strong, or None.
        **params: the plug-in's hyperparameters; their names and defaults are in ``DEFAULTS``.
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    needs_reference: ClassVar[bool] = False

    def __init__(self, num_tasks: int, reference: np.ndarray | None, **params: Any) -> None:
        self.num_tasks = num_tasks
        self.reference = reference
        self.params = {**self.DEFAULTS, **params}

    def observe(self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray) -> np.ndarray | None:
        """Take one step's observed batch and return predicted success rates over the pool.

        Called once per update, after validation, so it may update internal state.

        Args:
            indices: the validated task indices trained this step.
            rates: their observed success rates (successes / attempts) in [0, 1].
            attempts: their rollout counts (how much each observed rate is worth).

        Returns:
            ``p_tilde`` of length ``num_tasks`` in [0, 1], or None when the plug-in has no prediction this step.
        """
        raise NotImplementedError

    def predict(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        """The current prediction for ``indices`` (all tasks if None) without changing state; None if there is none.

        Lets a selector measure the prediction's error on a batch *before* :meth:`observe` sees it.
        """
        return None

    def stats(self) -> dict[str, float]:
        """Scalars worth logging (e.g. the interpolation capability)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Everything mutable, for checkpoints."""
        return {}

    def check_state(self, state: dict[str, Any]) -> None:
        """Raise ``ValueError`` unless :meth:`load_state_dict` can restore ``state``.

        The selector calls it before it changes anything, so a rejected checkpoint leaves the selector as it was.
        """

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""


@register_evidence("none")
class NoEvidence(ImplicitEvidence):
    """Explicit evidence only: unselected tasks receive nothing (only the forgetting toward the prior)."""

    def observe(self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray) -> None:
        return None


@register_evidence("interpolation")
class InterpolationEvidence(ImplicitEvidence):
    """The paper's plug-in: the policy sits at a global position ``mu`` between a weak and a strong reference model.

    On each batch B (paper Sec. 3.3): ``mu_raw = (mean_B r - mean_B w) / (mean_B s - mean_B w)``, smoothed as
    ``mu = mu_raw`` at the first update and ``mu <- gamma * mu + (1 - gamma) * mu_raw`` after; the prediction is
    ``p_tilde_k = clip(w_k + mu * (s_k - w_k), 0, 1)``. ``mu`` is not clipped, so extrapolation beyond either
    reference is allowed, as in the paper.

    When ``|mean_B s - mean_B w| < degenerate_tol`` the batch says nothing about ``mu`` (the upstream port divides by
    ~1e-6 here and ``mu`` explodes): the previous ``mu`` is kept, and before any informative batch there is no
    prediction at all.

    Hyperparameters:
        gamma: momentum of the ``mu`` smoothing, in [0, 1) (paper code: 0.9).
        degenerate_tol: the smallest reference gap on a batch that updates ``mu``.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"gamma": 0.9, "degenerate_tol": 1e-3}
    needs_reference: ClassVar[bool] = True

    def __init__(self, num_tasks: int, reference: np.ndarray | None, **params: Any) -> None:
        super().__init__(num_tasks, reference, **params)
        if reference is None:
            raise ValueError(
                "the 'interpolation' evidence needs reference_pass_rates with two columns (weak, strong); "
                "pass evidence='none' for explicit evidence only"
            )
        if reference.shape[1] != 2:
            raise ValueError(
                f"the 'interpolation' evidence needs exactly two reference columns (weak, strong), "
                f"got {reference.shape[1]}"
            )
        self.gamma = check_unit_interval("gamma", self.params["gamma"], open_right=True)
        self.degenerate_tol = float(self.params["degenerate_tol"])
        if not self.degenerate_tol > 0:
            raise ValueError(f"degenerate_tol must be > 0, got {self.degenerate_tol}")
        self.weak = np.ascontiguousarray(reference[:, 0])
        self.gap = np.ascontiguousarray(reference[:, 1] - reference[:, 0])
        self.mu: float | None = None
        self.mu_raw: float | None = None
        self.degenerate_batches = 0

    def observe(self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray) -> np.ndarray | None:
        w_mean = float(self.weak[indices].mean())
        gap_mean = float(self.gap[indices].mean())
        if abs(gap_mean) < self.degenerate_tol:
            self.degenerate_batches += 1
            self.mu_raw = None
        else:
            self.mu_raw = (float(rates.mean()) - w_mean) / gap_mean
            self.mu = self.mu_raw if self.mu is None else self.gamma * self.mu + (1.0 - self.gamma) * self.mu_raw
        return self.predict()

    def predict(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        if self.mu is None:
            return None
        weak, gap = (self.weak, self.gap) if indices is None else (self.weak[indices], self.gap[indices])
        p = gap * self.mu
        p += weak
        return np.clip(p, 0.0, 1.0, out=p)

    def stats(self) -> dict[str, float]:
        return {
            "capability_mu": float("nan") if self.mu is None else self.mu,
            "capability_mu_raw": float("nan") if self.mu_raw is None else self.mu_raw,
            "degenerate_batches": float(self.degenerate_batches),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"mu": self.mu, "mu_raw": self.mu_raw, "degenerate_batches": self.degenerate_batches}

    def check_state(self, state: dict[str, Any]) -> None:
        if "mu" not in state:
            raise ValueError("interpolation evidence checkpoint lacks 'mu'")
        if state["mu"] is not None and not np.isfinite(float(state["mu"])):
            raise ValueError(f"interpolation evidence checkpoint has a non-finite mu {state['mu']!r}")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mu = None if state["mu"] is None else float(state["mu"])
        self.mu_raw = None if state.get("mu_raw") is None else float(state["mu_raw"])
        self.degenerate_batches = int(state.get("degenerate_batches", 0))
