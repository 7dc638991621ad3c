"""``dps``: Dynamics-Predictive Sampling, prompt solving states filtered by a hidden Markov model (beyond the paper).

DPS ("Dynamics-Predictive Sampling", Mao, Qu, Wang, Zou, Ji; ICLR 2026, arXiv 2603.10887) models each prompt as a
three-state hidden Markov chain over its *solving state* under the current policy: unsolved, partially solved, solved.
A GRPO group carries gradient only when it is partially solved, so DPS predicts, per prompt, the probability that its
next group will be partially solved and trains the prompts where that probability is highest. Everything below is as
in the authors' public code (``maoyixiu/DPS``: ``recipe/dps/task_sampler.py``, its config
``recipe/dps/config/our_trainer.yaml`` and the launch scripts ``recipe/dps/scripts/*/*_dps.sh``), rewritten here in
our style; where a fact comes from the code rather than the paper, it says so.

Per task ``k`` the state is a Dirichlet count matrix ``A_k`` (3 x 3, ``A_k[j, i]``: pseudo-counts of the transition
*from* state ``i`` *to* state ``j``), a predicted state distribution ``pi_k`` (for the next group) and the filtered
distribution ``pi_prev_k`` of the step before. The expected transition matrix is ``A_k`` normalised over each column,
``T_k[j, i] = A_k[j, i] / sum_j A_k[j, i]`` (columns sum to 1). Once per training step:

1. **Observation** (code: ``train``). A trained task's group is *unsolved* if no rollout succeeded, *solved* if all
   did, *partially solved* otherwise; the state is read off the rewards exactly (a deterministic emission), so the
   filtered distribution is the one-hot ``e_o`` of the observed state ``o``.
2. **Transition counts** (code: ``update_transition_params``). The two-slice posterior of the last transition,
   ``xi[j, i] = e_o[j] * T_k[j, i] * pi_prev_k[i] / sum_i T_k[o, i] * pi_prev_k[i]``, is added to the decayed counts:
   ``A_k <- d * A_k + (1 - d) * A0 + xi``, with ``A0`` the prior counts and ``d`` the decay (1 keeps every count).
3. **Prediction** (code: ``predict_next_state``). ``pi_prev_k <- e_o`` and ``pi_k <- T'_k e_o`` (column ``o`` of the
   updated matrix).
4. **Tasks not trained this step** receive no observation: their counts decay, ``A_k <- d * A_k + (1 - d) * A0``,
   ``pi_prev_k <- pi_k`` and ``pi_k <- T'_k pi_k`` (the chain runs one step forward without evidence).

**Selection** (code: ``sample_batch``, strategy ``topk``): draw ``candidate_ratio * B`` candidates uniformly from the
pool and take the ``B`` with the largest ``pi_k[partial]`` (ties in the random candidate order). The code's
``topk+entropy`` strategy adds ``entropy_weight`` times the entropy of ``pi_k`` to the score (off by default).

Defaults, with their source:

- ``prior_alpha = 1.0`` (config and every script: a flat Dirichlet, ``A0`` all ones). The code also accepts named
  priors; ``progress`` and ``stability`` are here (``A0`` with 0.5 for the transitions each disfavours). Its
  ``local`` prior puts zero counts on the unsolved <-> solved transitions, which makes ``xi``'s normaliser 0 (NaN in
  the code) when such a jump is observed; it is refused.
- ``prior_pi = "uniform"`` (config; no script overrides it): ``pi`` and ``pi_prev`` of a task never seen. The code's
  ``"1"``, ``"2"``, ``"3"`` are ``"unsolved"``, ``"partial"``, ``"solved"`` here (a one-hot start).
- ``decay = 0.7``: the math scripts (``math_verl_{1.5b,7b}_dps.sh``, experiment name ``...-dps-topk-decay``); the
  Countdown and Geometry3k scripts use 0.5, and the config's default is 1.0 (no decay). We follow the scripts the
  reported runs used, the math ones because this project trains on math.
- ``candidate_ratio = 32``: the math scripts again (Countdown and Geometry3k: 8; the config's default 1.0 would make
  the candidates the batch itself, i.e. uniform sampling). In their math runs 32 x 256 prompts exceed the MATH
  training set, and the dataloader's batch is capped at the dataset, so every step scores the whole pool [our
  reading of ``our_ray_trainer._create_dataloader``]. Set ``candidate_ratio`` to the pool size over ``B`` (or more)
  to score the whole pool here.
- ``entropy_weight = 0.0`` (config; strategy ``topk`` in every script).

How it maps onto the selector API, and where it differs from the authors' trainer:

- DPS's candidates are consecutive batches of a shuffled epoch-wise dataloader (each prompt a candidate once per
  epoch); :meth:`DPSSelector.select` draws each step's candidates independently, without replacement within the
  step, as ``greso`` does.
- The code keeps state only for prompts that have been candidates (they enter its dictionaries when scored) and runs
  step 4 on all of them; a prompt never scored stays at the prior. The ``touched`` mask keeps exactly that. With the
  default flat priors step 4 leaves a never-observed task at the prior anyway.
- A group's state comes from ``successes / attempts`` (0: unsolved, 1: solved). The code binarises each rollout's
  accuracy first (``acc >= 1``); with fractional rewards in [0, 1] a group is unsolved only if every reward is 0 and
  solved only if every reward is 1.
- ``lags`` (asynchronous evidence) are accepted and ignored: the chain advances one step per update.
- The paper describes the filter for a general emission model; the code's emission is deterministic (step 1), and
  that is what is implemented.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.metric_keys import (
    DPS_CANDIDATES_STAT,
    DPS_PARTIAL_RATIO_STAT,
    DPS_PREDICT_ACCURACY_STAT,
    DPS_SELECTED_P_PARTIAL_STAT,
    DPS_TOUCHED_STAT,
)
from bots_verl.core.selector_base import SELECTORS, Selector
from bots_verl.core.validation import check_real_array, check_scalars, check_unit_interval, require_keys

logger = logging.getLogger(__name__)

__all__ = [
    "NAMED_ALPHA_PRIORS",
    "NAMED_PI_PRIORS",
    "STATES",
    "DPSSelector",
    "column_sums",
    "observed_states",
    "transition_matrices",
]

STATES = ("unsolved", "partial", "solved")
_PARTIAL = 1
# The code's named transition priors, A0[to, from] (``task_sampler.BayesianHMMSampler.__init__``).
NAMED_ALPHA_PRIORS: dict[str, tuple[tuple[float, ...], ...]] = {
    # forward moves (toward solved) keep 1, backward ones 0.5
    "progress": ((1.0, 0.5, 0.5), (1.0, 1.0, 0.5), (1.0, 1.0, 1.0)),
    # staying keeps 1, any move 0.5
    "stability": ((1.0, 0.5, 0.5), (0.5, 1.0, 0.5), (0.5, 0.5, 1.0)),
}
NAMED_PI_PRIORS: dict[str, tuple[float, float, float]] = {
    "uniform": (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0),
    "unsolved": (1.0, 0.0, 0.0),
    "partial": (0.0, 1.0, 0.0),
    "solved": (0.0, 0.0, 1.0),
}
_EXTRA_KEYS = ("alpha", "pi", "pi_prev", "touched", "prior_alpha", "prior_pi", "last_select_stats", "last_update_stats")
# rows of a probability vector may be off 1 by rounding, never by more
_SUM_TOL = 1e-9


def observed_states(successes: np.ndarray, attempts: np.ndarray) -> np.ndarray:
    """Each group's solving state (0 unsolved, 1 partially solved, 2 solved) from its successes out of its attempts."""
    states = np.full(successes.shape, _PARTIAL, dtype=np.int64)
    states[successes <= 0] = 0
    states[successes >= attempts] = 2
    return states


def column_sums(alpha: np.ndarray) -> np.ndarray:
    """``alpha[..., to, from]`` summed over ``to``: the normaliser of each column (three adds; numpy's reduction
    over a short middle axis is many times slower on a large pool)."""
    out = alpha[..., 0, :] + alpha[..., 1, :]
    out += alpha[..., 2, :]
    return out


def transition_matrices(alpha: np.ndarray) -> np.ndarray:
    """Expected transition matrices of Dirichlet counts ``alpha[..., to, from]``: each column normalised to sum 1."""
    return alpha / column_sums(alpha)[..., None, :]


def _prior_alpha_matrix(value: Any) -> np.ndarray:
    if isinstance(value, str):
        if value == "local":
            raise ValueError(
                "prior_alpha 'local' (zero counts between unsolved and solved) is not supported: an observed jump "
                "between them has zero probability and the count update divides by zero"
            )
        if value not in NAMED_ALPHA_PRIORS:
            raise ValueError(f"prior_alpha must be a positive number or one of {sorted(NAMED_ALPHA_PRIORS)}: {value!r}")
        return np.array(NAMED_ALPHA_PRIORS[value], dtype=np.float64)
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"prior_alpha must be a positive number or one of {sorted(NAMED_ALPHA_PRIORS)}: {value!r}")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"prior_alpha must be a positive finite number, got {value!r}")
    return np.full((3, 3), float(value))


def _prior_pi_vector(value: Any) -> np.ndarray:
    if not isinstance(value, str) or value not in NAMED_PI_PRIORS:
        raise ValueError(f"prior_pi must be one of {sorted(NAMED_PI_PRIORS)}, got {value!r}")
    return np.array(NAMED_PI_PRIORS[value], dtype=np.float64)


def _check_distributions(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    arr = check_real_array(name, value, shape)
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise ValueError(f"{name} must hold probabilities in [0, 1]")
    if arr.size and np.max(np.abs(arr.sum(axis=-1) - 1.0)) > _SUM_TOL:
        raise ValueError(f"{name} rows must sum to 1")
    return arr


@SELECTORS.register("dps", group="peers")
class DPSSelector(Selector):
    """DPS (arXiv 2603.10887): per-task HMM over solving states; top-B predicted P(partially solved) among candidates.

    Hyperparameters (the authors' math scripts; see the module docstring for every source):
        decay: ``d``, the weight kept by old transition counts per step, the rest going back to the prior (0.7;
            1 keeps all counts).
        candidate_ratio: candidates scored per step, as a multiple of the batch size, capped at the pool (32).
        prior_alpha: Dirichlet prior counts of the transitions: a positive number for all nine, or ``progress`` /
            ``stability`` (1.0).
        prior_pi: the state distribution of a task never seen: ``uniform``, ``unsolved``, ``partial``, ``solved``.
        entropy_weight: weight of the entropy of ``pi`` added to the score (0: the code's ``topk``).

    Logged (:meth:`stats`): ``dps/selected_p_partial`` (mean predicted P(partial) of the last select's batch),
    ``dps/candidates`` (how many it scored), ``dps/partial_ratio`` (share of the last update's groups that were
    partially solved), ``dps/predict_accuracy`` (share whose most probable predicted state was the observed one, the
    code's ``predict_accuracy``), ``dps/touched_frac`` (share of the pool with state beyond the prior).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "decay": 0.7,
        "candidate_ratio": 32.0,
        "prior_alpha": 1.0,
        "prior_pi": "uniform",
        "entropy_weight": 0.0,
    }
    # the priors live in the state (every task not yet touched holds them), restored from a checkpoint as saved
    CHECKPOINT_HPARAMS: ClassVar[tuple[str, ...]] = ("prior_alpha", "prior_pi")
    # prior_alpha: a number for all nine counts, or a named prior (NAMED_ALPHA_PRIORS)
    NAMED_HPARAMS: ClassVar[tuple[str, ...]] = ("prior_alpha",)

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        """Counter and references, the state (alpha 72, pi 24, pi_prev 24, touched 1), plus what update allocates.

        update computes the new state into fresh arrays (alpha, pi, pi_prev: 120) with the column sums (24), the
        normalisers of pi (8), two masks and the finiteness check (11) before committing; select allocates less (the
        candidates, their scores and their order). ``tests/core/test_memory.py`` measures it.
        """
        return super().bytes_per_task(reference_columns, hparams) + 121 + 120 + 24 + 8 + 11

    @classmethod
    def _check_values(cls, values: Mapping[str, Any], num_references: int, embeddings: bool) -> None:
        """``decay`` in [0, 1], ``candidate_ratio`` >= 1, ``entropy_weight`` >= 0, the priors numbers or names."""
        super()._check_values(values, num_references, embeddings)
        check_unit_interval("decay", values["decay"])
        ratio = values["candidate_ratio"]
        if isinstance(ratio, bool) or not isinstance(ratio, int | float | np.integer | np.floating):
            raise ValueError(f"candidate_ratio must be a number >= 1, got {ratio!r}")
        if not (math.isfinite(float(ratio)) and float(ratio) >= 1):
            raise ValueError(f"candidate_ratio must be a finite number >= 1, got {ratio!r}")
        weight = values["entropy_weight"]
        if isinstance(weight, bool) or not isinstance(weight, int | float | np.integer | np.floating):
            raise ValueError(f"entropy_weight must be a number >= 0, got {weight!r}")
        if not (math.isfinite(float(weight)) and float(weight) >= 0):
            raise ValueError(f"entropy_weight must be a finite number >= 0, got {weight!r}")
        _prior_alpha_matrix(values["prior_alpha"])
        _prior_pi_vector(values["prior_pi"])

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        # the base checks every value (_check_values) before anything is built
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        hp = self.hparams
        self.decay = float(hp["decay"])
        self.candidate_ratio = float(hp["candidate_ratio"])
        self.entropy_weight = float(hp["entropy_weight"])
        self.prior_alpha = _prior_alpha_matrix(hp["prior_alpha"])
        self.prior_pi = _prior_pi_vector(hp["prior_pi"])
        n = self.num_tasks
        self.alpha = np.broadcast_to(self.prior_alpha, (n, 3, 3)).copy()
        self.pi = np.broadcast_to(self.prior_pi, (n, 3)).copy()
        self.pi_prev = self.pi.copy()
        self.touched = np.zeros(n, dtype=bool)
        self.last_select_stats: dict[str, float] = {}
        self.last_update_stats: dict[str, float] = {}

    # ------------------------------------------------------------------------------------------------ the rules
    def score(self, tasks: np.ndarray) -> np.ndarray:
        """The selection score of ``tasks``: predicted P(partially solved), plus ``entropy_weight`` x entropy of pi."""
        pi = self.pi[tasks]
        out = pi[:, _PARTIAL].copy()
        if self.entropy_weight > 0:
            # the code's entropy, -sum pi log(pi + 1e-10)
            out -= self.entropy_weight * np.sum(pi * np.log(pi + 1e-10), axis=1)
        return out

    def _select(self, batch_size: int) -> np.ndarray:
        m = min(self.num_tasks, math.ceil(self.candidate_ratio * batch_size))
        # candidates in a uniformly random order; a stable sort keeps that order among equal scores
        if m == self.num_tasks:
            candidates = self.rng.permutation(self.num_tasks)
        else:
            candidates = self.rng.choice(self.num_tasks, size=m, replace=False)
        scores = self.score(candidates)
        best = np.argsort(-scores, kind="stable")[:batch_size]
        picked = candidates[best].astype(np.int64, copy=False)
        self.touched[candidates] = True
        self.last_select_stats = {
            DPS_SELECTED_P_PARTIAL_STAT: float(self.pi[picked, _PARTIAL].mean()),
            DPS_CANDIDATES_STAT: float(m),
        }
        return picked

    def _next_state(
        self, indices: np.ndarray, states: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The state after one step with ``states`` observed on ``indices``, in new arrays (nothing is changed)."""
        d = self.decay
        touched = self.touched.copy()
        touched[indices] = True
        # Step 2 for the observed tasks, with the counts and transition matrix before this step.
        rows = transition_matrices(self.alpha[indices])[np.arange(indices.size), states, :]  # T[o, i]
        joint = rows * self.pi_prev[indices]  # T[o, i] * pi_prev[i]
        xi_row = joint / joint.sum(axis=1, keepdims=True)
        # Steps 2 and 4: every count decays toward the prior; the observed tasks add their transition.
        alpha = self.alpha * d
        alpha += (1.0 - d) * self.prior_alpha
        alpha[indices, states, :] += xi_row
        # Step 4: unobserved tasks predict one step on; step 3: observed ones from their one-hot state.
        pi_prev = self.pi.copy()
        pi_prev[indices] = 0.0
        pi_prev[indices, states] = 1.0
        # T' pi_prev = sum_i A'[:, i] * (pi_prev[i] / colsum[i]): no pool-sized transition matrix is built
        weights = column_sums(alpha)
        np.divide(pi_prev, weights, out=weights)
        pi = np.einsum("nji,ni->nj", alpha, weights)
        del weights
        # as the code does, renormalise: no drift off the simplex over long runs
        pi /= (pi[:, 0] + pi[:, 1] + pi[:, 2])[:, None]
        # Tasks never touched hold the prior exactly (the code has no state for them).
        untouched = ~touched
        alpha[untouched] = self.prior_alpha
        pi[untouched] = self.prior_pi
        pi_prev[untouched] = self.prior_pi
        if not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(pi))):
            raise ValueError("the DPS update produced non-finite values; the state is unchanged")
        return alpha, pi, pi_prev, touched

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        states = observed_states(successes, attempts)
        predicted = np.argmax(self.pi[indices], axis=1)
        alpha, pi, pi_prev, touched = self._next_state(indices, states)
        self.alpha, self.pi, self.pi_prev, self.touched = alpha, pi, pi_prev, touched
        self.last_update_stats = {
            DPS_PARTIAL_RATIO_STAT: float(np.mean(states == _PARTIAL)),
            DPS_PREDICT_ACCURACY_STAT: float(np.mean(predicted == states)),
        }

    # ------------------------------------------------------------------------------------------------- logging
    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            DPS_TOUCHED_STAT: float(np.count_nonzero(self.touched)) / self.num_tasks,
            **self.last_select_stats,
            **self.last_update_stats,
        }

    # ---------------------------------------------------------------------------------------------- checkpoints
    def _state(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha.copy(),
            "pi": self.pi.copy(),
            "pi_prev": self.pi_prev.copy(),
            "touched": self.touched.copy(),
            "prior_alpha": self.prior_alpha.copy(),
            "prior_pi": self.prior_pi.copy(),
            "last_select_stats": dict(self.last_select_stats),
            "last_update_stats": dict(self.last_update_stats),
        }

    def _checked_state(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        require_keys(extra, _EXTRA_KEYS, "checkpoint extra")
        n = self.num_tasks
        prior_alpha = check_real_array("checkpoint prior_alpha", extra["prior_alpha"], (3, 3), positive=True)
        prior_pi = _check_distributions("checkpoint prior_pi", extra["prior_pi"], (3,))
        alpha = check_real_array("checkpoint alpha", extra["alpha"], (n, 3, 3), positive=True)
        pi = _check_distributions("checkpoint pi", extra["pi"], (n, 3))
        pi_prev = _check_distributions("checkpoint pi_prev", extra["pi_prev"], (n, 3))
        touched = np.asarray(extra["touched"])
        if touched.dtype != np.bool_ or touched.shape != (n,):
            raise ValueError(f"checkpoint touched must be a boolean array of shape {(n,)}")
        untouched = ~touched
        if not (
            np.all(alpha[untouched] == prior_alpha)
            and np.all(pi[untouched] == prior_pi)
            and np.all(pi_prev[untouched] == prior_pi)
        ):
            raise ValueError("checkpoint tasks not yet touched must hold the checkpoint's prior exactly")
        out: dict[str, Any] = {
            "alpha": alpha,
            "pi": pi,
            "pi_prev": pi_prev,
            "touched": touched.copy(),
            "prior_alpha": prior_alpha,
            "prior_pi": prior_pi,
        }
        for key in ("last_select_stats", "last_update_stats"):
            out[key] = check_scalars(f"checkpoint {key}", extra[key])
        return out
