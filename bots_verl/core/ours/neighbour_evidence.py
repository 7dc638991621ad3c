"""Reference-free implicit evidence: each step's explicit evidence, propagated to similar tasks (beyond the paper).

BOTS's implicit evidence (arXiv 2510.26374, Sec. 3.3) predicts every unselected task's success rate from two
reference models' pass rates, which cost ``tasks x 16 samples x 2 models`` generations before training starts. This
plug-in predicts it from what the run itself observes: the outcomes of the tasks trained so far, carried over a task
graph (:class:`~bots_verl.core.task_graph.TaskGraph`, the ``k`` most similar tasks by embedding cosine) to the tasks
like them.

The model, and why:

1. **Logit space, a global level plus per-task residuals.** The policy improves during training, so an outcome
   observed 30 steps ago says little about the success rate now, but a lot about how the task compares with the
   others. Each observation is kept as a residual ``r_j = y_j - L_t`` of its empirical logit ``y_j`` (Haldane's
   half-count, so all-0 and all-1 groups stay finite) against the policy's global level ``L_t`` at the time. A
   policy that improves uniformly in logit space (the 2PL picture the IRT plug-in also uses) leaves residuals valid.
2. **The level**: ``L_raw = mean over the batch of (y_j - rhat_j)``, the batch's observed logits less what the
   residuals already predicted for those tasks (on the first batch, nothing: its mean logit), smoothed as the paper
   smooths its ``mu``: ``L = L_raw`` at the first batch, then ``L <- momentum * L + (1 - momentum) * L_raw``. The
   batch is *selected* (near p* = 0.5), so its plain mean logit would stay near 0 however much the policy improves;
   subtracting the predicted residuals removes most of that selection.
3. **The prediction** for task ``i``: ``logit p_tilde_i = L + sum_j a_ij pi_ij r_j / (sum_j a_ij pi_ij + shrink)``,
   a similarity-weighted (``a_ij``) mean of the residuals observed on its neighbours and on itself (``a_ii = 1``),
   each weighted by its precision ``pi``, shrunk toward 0 (the level) by the prior precision ``shrink`` when the
   neighbourhood has little evidence. A residual's precision for its own task is the binomial information
   ``w = n q (1 - q)`` of its empirical logit; for a neighbour it is ``1 / (1 / w + spread)``: a neighbour's residual
   differs from the task's own by ``spread`` (logit^2) even when measured exactly, so one neighbour cannot dominate.
4. **Forgetting**: every stored precision decays by ``1 - forget`` per step (per-task quirks such as memorisation
   change what a residual means), so the prediction follows recent evidence.

An observation on task ``j`` is scattered to ``j`` and its ``k`` graph neighbours (they are the tasks most similar to
``j``); the plug-in keeps two pool-sized sums (weighted residuals, weights). One step costs ``O(batch * k)`` for the
scatter and ``O(N)`` vector operations for the decay and the prediction; nothing loops over the pool in Python.
The numbers this model gives on the simulator: ``recipes/results/sim/noref_results.md``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core import defaults
from bots_verl.core.metric_keys import COVERED_TASKS_EVIDENCE, LEVEL_EVIDENCE, LEVEL_RAW_EVIDENCE
from bots_verl.core.paper.implicit_evidence import EVIDENCE, ImplicitEvidence
from bots_verl.core.task_graph import TaskGraph
from bots_verl.core.validation import check_real_array, check_unit_interval, require_keys

logger = logging.getLogger(__name__)

__all__ = ["NeighbourEvidence"]

_STATE_KEYS = ("level", "level_raw", "num", "den", "graph")


def _sigmoid_inplace(z: np.ndarray) -> np.ndarray:
    """The logistic function of ``z``, computed in ``z`` and returned: ``0.5 * (1 + tanh(z / 2))``, which does not
    overflow, with no pool-sized temporary."""
    z *= 0.5
    np.tanh(z, out=z)
    z += 1.0
    z *= 0.5
    return z


def _optional_float(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"neighbours evidence checkpoint {name} must be a number or None, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"neighbours evidence checkpoint has a non-finite {name} {value!r}")
    return float(value)


def _positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    v = float(value) if not isinstance(value, bool) else float("nan")
    if not (math.isfinite(v) and (v >= 0 if allow_zero else v > 0)):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


@EVIDENCE.register("neighbours", group="ours")
class NeighbourEvidence(ImplicitEvidence):
    """Explicit evidence carried to similar tasks over the task graph: a global level plus neighbours' residuals.

    Needs the task graph (``task_embeddings`` of the selector), no reference columns. See the module docstring for
    the model.

    Hyperparameters:
        momentum: smoothing of the policy's global level, in [0, 1) (0.9, as the paper's ``gamma`` for ``mu``).
        forget: per-step decay of every stored residual's weight, in [0, 1) (0.02: residuals are relative to the
            level, so they stay informative for tens of steps).
        shrink: prior precision that pulls a task's residual toward 0 (the level), in units of the information of
            one empirical logit (4 = one group of 16 at q = 0.5; 0.5: an eighth of that).
        spread: variance (logit^2) of a neighbour's residual around the task's own, beyond measurement noise.

    ``forget`` and ``shrink`` were chosen on the simulator's ``toy`` preset on seeds (100-103) other than those of
    the reported results (``recipes/results/sim/noref_results.md``); ``forget`` 0.01-0.03 and ``shrink`` 0.25-1 were
    within each other's intervals there and on ``math``.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"momentum": defaults.GAMMA, "forget": 0.02, "shrink": 0.5, "spread": 1.0}
    needs_graph: ClassVar[bool] = True

    @classmethod
    def bytes_per_task(cls, reference_columns: int) -> tuple[int, int]:
        # held: the two sums; working: the proposed sums, the two scatter sums (bincount) and the prediction
        return 16, 40

    @classmethod
    def check_params(cls, params: Mapping[str, Any], num_references: int) -> None:
        """``momentum`` and ``forget`` in [0, 1), ``shrink`` > 0, ``spread`` >= 0 (no reference columns needed)."""
        check_unit_interval("momentum", params["momentum"], open_right=True)
        check_unit_interval("forget", params["forget"], open_right=True)
        _positive("shrink", params["shrink"])
        _positive("spread", params["spread"], allow_zero=True)

    def __init__(
        self, num_tasks: int, reference: np.ndarray | None, *, graph: TaskGraph | None = None, **params: Any
    ) -> None:
        super().__init__(num_tasks, reference, graph=graph, **params)
        if graph is None:
            raise ValueError(
                "the 'neighbours' evidence needs the task graph: pass task_embeddings (one row per task) to the "
                "selector"
            )
        if graph.num_tasks != num_tasks:
            raise ValueError(f"the task graph has {graph.num_tasks} tasks, the pool {num_tasks}")
        p = self.params
        self.check_params(p, 0 if reference is None else reference.shape[1])
        self.momentum, self.forget = float(p["momentum"]), float(p["forget"])
        self.shrink, self.spread = float(p["shrink"]), float(p["spread"])
        self.task_graph: TaskGraph = graph
        self.level: float | None = None
        self.level_raw: float | None = None
        self.num = np.zeros(num_tasks)
        self.den = np.zeros(num_tasks)

    # ------------------------------------------------------------------------------------------------- prediction
    def _residual(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        out = den + self.shrink
        np.divide(num, out, out=out)
        return out

    def predict(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        if self.level is None:
            return None
        num, den = (self.num, self.den) if indices is None else (self.num[indices], self.den[indices])
        z = self._residual(num, den)
        z += self.level
        return _sigmoid_inplace(z)

    # ----------------------------------------------------------------------------------------------------- update
    def propose(
        self, indices: np.ndarray, rates: np.ndarray, attempts: np.ndarray
    ) -> tuple[np.ndarray, dict[str, Any]]:
        n = np.asarray(attempts, dtype=np.float64)
        q = (rates * n + 0.5) / (n + 1.0)
        y = np.log(q) - np.log1p(-q)
        info = n * q * (1.0 - q)  # the inverse variance of the empirical logit
        predicted = self._residual(self.num[indices], self.den[indices])
        level_raw = float(np.mean(y - predicted))
        level = level_raw if self.level is None else self.momentum * self.level + (1.0 - self.momentum) * level_raw
        residual = y - level
        # Scatter each observation to its task (similarity 1, its own precision) and to its k neighbours.
        nb = self.task_graph.neighbours[indices]
        a = self.task_graph.weights[indices].astype(np.float64)
        a *= (1.0 / (1.0 / info + self.spread))[:, None]
        targets = np.concatenate([indices, nb.ravel()])
        weight = np.concatenate([info, a.ravel()])
        keep = 1.0 - self.forget
        num = self.num * keep
        num += np.bincount(
            targets,
            weights=weight * np.concatenate([residual, np.repeat(residual, nb.shape[1])]),
            minlength=self.num_tasks,
        )
        den = self.den * keep
        den += np.bincount(targets, weights=weight, minlength=self.num_tasks)
        state = {"level": level, "level_raw": level_raw, "num": num, "den": den}
        z = self._residual(num, den)
        z += level
        return _sigmoid_inplace(z), state

    def commit(self, state: dict[str, Any]) -> None:
        self.level, self.level_raw = state["level"], state["level_raw"]
        self.num, self.den = state["num"], state["den"]

    # ------------------------------------------------------------------------------------------- logging, state
    def stats(self) -> dict[str, float]:
        nan = float("nan")
        return {
            LEVEL_EVIDENCE: nan if self.level is None else self.level,
            LEVEL_RAW_EVIDENCE: nan if self.level_raw is None else self.level_raw,
            COVERED_TASKS_EVIDENCE: float(np.count_nonzero(self.den > 1e-3)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "level_raw": self.level_raw,
            "num": self.num.copy(),
            "den": self.den.copy(),
            "graph": self.task_graph.fingerprint(),
        }

    def check_state(self, state: dict[str, Any]) -> None:
        require_keys(state, _STATE_KEYS, "neighbours evidence checkpoint")
        if state["graph"] != self.task_graph.fingerprint():
            raise ValueError(
                "neighbours evidence checkpoint was saved on another task graph (other task embeddings, pool order "
                "or graph_k): its residuals belong to other neighbourhoods; resume with the embeddings it was "
                "trained with"
            )
        _optional_float("level", state["level"])
        _optional_float("level_raw", state["level_raw"])
        check_real_array("neighbours evidence checkpoint num", state["num"], (self.num_tasks,))
        den = check_real_array("neighbours evidence checkpoint den", state["den"], (self.num_tasks,))
        if np.any(den < 0):
            raise ValueError("neighbours evidence checkpoint has negative weights (den)")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state(state)
        self.commit(
            {
                "level": _optional_float("level", state["level"]),
                "level_raw": _optional_float("level_raw", state["level_raw"]),
                "num": np.array(state["num"], dtype=np.float64),
                "den": np.array(state["den"], dtype=np.float64),
            }
        )
