"""Implicit-evidence plug-ins: predicted success rates for the tasks *not* trained this step.

BOTS (arXiv 2510.26374, Sec. 3.3) fuses explicit evidence (the rollouts of the batch) with implicit evidence for every
other task. A plug-in turns one step's observed batch into a prediction ``p_tilde`` over the whole pool; the
posterior then adds ``rho * m * p_tilde`` pseudo-successes and ``rho * m * (1 - p_tilde)`` pseudo-failures to each
unselected task (see :mod:`bots_verl.core.paper.posterior`).

An update is all-or-nothing, so a plug-in works in two phases: :meth:`ImplicitEvidence.propose` computes the
prediction and the plug-in's next state without changing anything, and :meth:`ImplicitEvidence.commit` adopts that
state once the selector knows the whole update is valid. Adding a plug-in is one small class::

    @EVIDENCE.register("my_plugin")
    class MyEvidence(ImplicitEvidence):
        DEFAULTS = {"my_param": 1.0}

        def propose(self, indices, rates, attempts):
            ...  # return (p_tilde over the pool or None, the next state)

        def commit(self, state):
            ...
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bots_verl.core import defaults
from bots_verl.core.metric_keys import CAPABILITY_MU_EVIDENCE, CAPABILITY_MU_RAW_EVIDENCE, DEGENERATE_BATCHES_EVIDENCE
from bots_verl.core.registry import Registry
from bots_verl.core.validation import check_count, check_unit_interval, require_keys

if TYPE_CHECKING:
    from bots_verl.core.task_graph import TaskGraph

logger = logging.getLogger(__name__)

__all__ = ["EVIDENCE", "ImplicitEvidence", "InterpolationEvidence", "NoEvidence"]


class ImplicitEvidence:
    """Interface of an implicit-evidence plug-in.

    Args:
        num_tasks: the pool size.
        reference: validated reference pass rates, shape ``(num_tasks, K)``, columns weak -> strong, or None.
        graph: the pool's task graph (:class:`~bots_verl.core.task_graph.TaskGraph`); the selector passes it to
            plug-ins with ``needs_graph`` and None to the others.
        **params: the plug-in's hyperparameters; their names and defaults are in ``DEFAULTS``.
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    needs_reference: ClassVar[bool] = False
    # Whether the plug-in reads the task graph (the selector then builds it from its task_embeddings).
    needs_graph: ClassVar[bool] = False

    def __init__(
        self, num_tasks: int, reference: np.ndarray | None, *, graph: TaskGraph | None = None, **params: Any
    ) -> None:
        self.num_tasks = num_tasks
        self.reference = reference
        self.graph = graph
        self.params = {**self.DEFAULTS, **params}

    @classmethod
    def check_params(cls, params: Mapping[str, Any], num_references: int) -> None:
        """Refuse hyperparameters ``params`` the plug-in cannot run with, given ``num_references`` reference columns
        (its constructor calls it, and a selector's
        :meth:`~bots_verl.core.selector_base.Selector.check_hparams` before any pool exists).

        Raises:
            ValueError: naming the setting.
        """

    @classmethod
    def bytes_per_task(cls, reference_columns: int) -> tuple[int, int]:
        """Bytes per pool task ``(held, working)``: what the plug-in keeps, and the most that :meth:`propose` still
        holds when it returns (its prediction and new state) or allocates while building (see
        :mod:`bots_verl.core.memory`)."""
        return 0, 0

    def propose(
        self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray
    ) -> tuple[np.ndarray | None, dict[str, Any]]:
        """The prediction over the pool after one step's observed batch, and the state after it; changes nothing.

        Args:
            indices: the validated task indices trained this step.
            rates: their observed success rates (successes / attempts) in [0, 1].
            attempts: their rollout counts (how much each observed rate is worth).

        Returns:
            ``p_tilde`` of length ``num_tasks`` in [0, 1] (None when the plug-in has no prediction), and the state
            to pass to :meth:`commit`.
        """
        raise NotImplementedError

    def commit(self, state: dict[str, Any]) -> None:
        """Adopt the state :meth:`propose` returned (the selector calls it once the whole update is valid)."""
        self.load_state_dict(state)

    def observe(self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray) -> np.ndarray | None:
        """Learn from one batch and return the new prediction over the pool (:meth:`propose`, then :meth:`commit`)."""
        p_tilde, state = self.propose(indices, rates, attempts)
        self.commit(state)
        return p_tilde

    def predict(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        """The current prediction for ``indices`` (all tasks if None) without changing state; None if there is none.

        Lets a selector measure the prediction's error on a batch *before* the plug-in learns from it.
        """
        return None

    def stats(self) -> dict[str, float]:
        """Scalars worth logging (e.g. the interpolation capability), named by the key table's ``*_EVIDENCE``; the
        selector logs each as ``implicit/<name>`` (:func:`bots_verl.core.metric_keys.implicit_stat`)."""
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


EVIDENCE: Registry[type[ImplicitEvidence]] = Registry("evidence plug-in")


@EVIDENCE.register("none", group="paper")
class NoEvidence(ImplicitEvidence):
    """Explicit evidence only: unselected tasks receive nothing (only the forgetting toward the prior)."""

    def propose(self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray) -> tuple[None, dict[str, Any]]:
        return None, {}


def _optional_finite(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"interpolation evidence checkpoint {name} must be a number or None, got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"interpolation evidence checkpoint has a non-finite {name} {value!r}")
    return float(value)


@EVIDENCE.register("interpolation", group="paper")
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

    DEFAULTS: ClassVar[dict[str, Any]] = {"gamma": defaults.GAMMA, "degenerate_tol": defaults.DEGENERATE_TOL}
    needs_reference: ClassVar[bool] = True

    @classmethod
    def bytes_per_task(cls, reference_columns: int) -> tuple[int, int]:
        return 16, 8  # weak and gap; the prediction

    @classmethod
    def check_params(cls, params: Mapping[str, Any], num_references: int) -> None:
        """Two reference columns (weak, strong), ``gamma`` in [0, 1), ``degenerate_tol`` > 0."""
        if not num_references:
            raise ValueError(
                "the 'interpolation' evidence needs reference_pass_rates with two columns (weak, strong); "
                "pass evidence='none' for explicit evidence only"
            )
        if num_references != 2:
            raise ValueError(
                f"the 'interpolation' evidence needs exactly two reference columns (weak, strong), got {num_references}"
            )
        check_unit_interval("gamma", params["gamma"], open_right=True)
        degenerate_tol = float(params["degenerate_tol"])
        if not degenerate_tol > 0:
            raise ValueError(f"degenerate_tol must be > 0, got {degenerate_tol}")

    def __init__(self, num_tasks: int, reference: np.ndarray | None, **params: Any) -> None:
        super().__init__(num_tasks, reference, **params)
        self.check_params(self.params, 0 if reference is None else reference.shape[1])
        assert reference is not None  # check_params refuses none
        self.gamma = float(self.params["gamma"])
        self.degenerate_tol = float(self.params["degenerate_tol"])
        self.weak = np.ascontiguousarray(reference[:, 0])
        self.gap = np.ascontiguousarray(reference[:, 1] - reference[:, 0])
        self.mu: float | None = None
        self.mu_raw: float | None = None
        self.degenerate_batches = 0

    def propose(
        self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray
    ) -> tuple[np.ndarray | None, dict[str, Any]]:
        w_mean = float(self.weak[indices].mean())
        gap_mean = float(self.gap[indices].mean())
        state: dict[str, Any] = {"mu": self.mu, "mu_raw": None, "degenerate_batches": self.degenerate_batches}
        if abs(gap_mean) < self.degenerate_tol:
            state["degenerate_batches"] += 1
        else:
            mu_raw = (float(rates.mean()) - w_mean) / gap_mean
            state["mu_raw"] = mu_raw
            state["mu"] = mu_raw if self.mu is None else self.gamma * self.mu + (1.0 - self.gamma) * mu_raw
        return self._interpolate(state["mu"], None), state

    def commit(self, state: dict[str, Any]) -> None:
        self.mu, self.mu_raw, self.degenerate_batches = state["mu"], state["mu_raw"], state["degenerate_batches"]

    def predict(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        return self._interpolate(self.mu, indices)

    def _interpolate(self, mu: float | None, indices: np.ndarray | None) -> np.ndarray | None:
        if mu is None:
            return None
        weak, gap = (self.weak, self.gap) if indices is None else (self.weak[indices], self.gap[indices])
        p = gap * mu
        p += weak
        return np.clip(p, 0.0, 1.0, out=p)

    def stats(self) -> dict[str, float]:
        return {
            CAPABILITY_MU_EVIDENCE: float("nan") if self.mu is None else self.mu,
            CAPABILITY_MU_RAW_EVIDENCE: float("nan") if self.mu_raw is None else self.mu_raw,
            DEGENERATE_BATCHES_EVIDENCE: float(self.degenerate_batches),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"mu": self.mu, "mu_raw": self.mu_raw, "degenerate_batches": self.degenerate_batches}

    def check_state(self, state: dict[str, Any]) -> None:
        require_keys(state, ("mu", "mu_raw", "degenerate_batches"), "interpolation evidence checkpoint")
        _optional_finite("mu", state["mu"])
        _optional_finite("mu_raw", state["mu_raw"])
        check_count("interpolation evidence checkpoint degenerate_batches", state["degenerate_batches"])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state(state)
        self.commit(
            {
                "mu": _optional_finite("mu", state["mu"]),
                "mu_raw": _optional_finite("mu_raw", state["mu_raw"]),
                "degenerate_batches": int(state["degenerate_batches"]),
            }
        )
