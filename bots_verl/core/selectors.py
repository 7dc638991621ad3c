"""Task selectors: the BOTS family (Beta posteriors + evidence plug-ins) and the paper's baselines.

Adding a selector is one small class plus its registry line::

    @register_selector("my_selector")
    class MySelector(Selector):
        DEFAULTS = {"my_param": 1}

        def _select(self, batch_size):
            ...  # unique int64 indices

Every selector validates its input at the boundary (:mod:`bots_verl.core.validation`) before changing any state, so a
rejected call leaves it exactly as it was, and carries its whole state, RNG included, in :meth:`Selector.state_dict`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.evidence import EVIDENCE, ImplicitEvidence
from bots_verl.core.metrics import effective_task_ratio
from bots_verl.core.posterior import BetaPosterior
from bots_verl.core.selection import SELECTION_RULES
from bots_verl.core.validation import (
    check_batch_size,
    check_indices,
    check_outcomes,
    check_reference,
    check_unit_interval,
    split_known_params,
)

logger = logging.getLogger(__name__)

__all__ = [
    "SELECTORS",
    "BOTSSelector",
    "BetaPosteriorSelector",
    "ImplicitOnlySelector",
    "MoPPSSelector",
    "OfflineEasy2HardSelector",
    "RandomSelector",
    "Selector",
    "SequentialSelector",
    "register_selector",
]

STATE_VERSION = 1

SELECTORS: dict[str, type[Selector]] = {}


def register_selector(name: str):
    """Class decorator that registers a :class:`Selector` subclass under ``name``."""

    def wrap(cls: type[Selector]) -> type[Selector]:
        if name in SELECTORS:
            raise ValueError(f"selector {name!r} is already registered")
        cls.name = name
        SELECTORS[name] = cls
        return cls

    return wrap


class Selector:
    """Base class: input validation, RNG, counters and checkpoint plumbing shared by every selector.

    Args:
        num_tasks: pool size N; tasks are ``0 .. N-1``.
        reference_pass_rates: optional ``(N,)`` or ``(N, K)`` reference pass rates, columns ordered weak -> strong.
        seed: seed of the selector's own ``numpy`` generator (PCG64).
        **hparams: hyperparameters; names and defaults in ``DEFAULTS`` (plus ``reference_nan``: ``"impute"`` or
            ``"error"``, the policy for missing reference values).
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    needs_reference: ClassVar[bool] = False
    _BASE_DEFAULTS: ClassVar[dict[str, Any]] = {"reference_nan": "impute"}

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, int | np.integer) or num_tasks < 1:
            raise ValueError(f"num_tasks must be a positive integer, got {num_tasks!r}")
        self.num_tasks = int(num_tasks)
        self.seed = int(seed)
        base, own, *extra = split_known_params(hparams, self._param_groups(hparams))
        self.hparams = {**own, **{k: v for group in extra for k, v in group.items()}}
        self.reference: np.ndarray | None = None
        if reference_pass_rates is not None:
            self.reference = check_reference(reference_pass_rates, self.num_tasks, nan_policy=base["reference_nan"])
        elif self.needs_reference:
            raise ValueError(f"selector {self.name!r} needs reference_pass_rates")
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self.steps = 0
        self.selections = 0
        self.times_selected = np.zeros(self.num_tasks, dtype=np.int32)
        self.last_batch_stats: dict[str, float] = {}

    def _param_groups(self, given: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("base", self._BASE_DEFAULTS), (self.name, self.DEFAULTS)]

    # ----------------------------------------------------------------------------------------------- public API
    def select(self, batch_size: int) -> np.ndarray:
        """Return ``batch_size`` unique task indices (int64) for the next training step.

        Raises:
            ValueError: if ``batch_size`` is not a positive integer or exceeds the pool.
        """
        batch_size = check_batch_size(batch_size, self.num_tasks)
        indices = self._select(batch_size)
        self.times_selected[indices] += 1
        self.selections += 1
        return indices

    def update(self, indices: Any, successes: Any, attempts: Any) -> None:
        """Feed one training step's outcomes: per task, ``successes`` out of ``attempts`` rollouts.

        Successes may be fractional (rewards in [0, 1] summed over the rollouts). One call is one step: the
        forgetting toward the prior is applied once per call.

        Raises:
            ValueError: on indices out of range or repeated, arrays of different lengths, successes negative, above
                attempts, NaN or infinite, or attempts that are not positive. The state is then unchanged.
        """
        idx = check_indices(indices, self.num_tasks)
        s, n = check_outcomes(successes, attempts, idx.size)
        self._update(idx, s, n)
        self.steps += 1
        self.last_batch_stats = {
            "batch/effective_task_ratio": effective_task_ratio(s, n),
            "batch/success_rate": float(s.sum() / n.sum()),
        }

    def stats(self) -> dict[str, float]:
        """Scalar summaries for logging (no prefix; the caller namespaces them, e.g. ``bots/``)."""
        return {
            "steps": float(self.steps),
            "tasks_ever_selected": float(np.count_nonzero(self.times_selected)),
            **self.last_batch_stats,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this selector is, RNG included (copies, numpy arrays)."""
        return {
            "version": STATE_VERSION,
            "selector": self.name,
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "hparams": dict(self.hparams),
            "rng": self.rng.bit_generator.state,
            "steps": self.steps,
            "selections": self.selections,
            "times_selected": self.times_selected.copy(),
            "last_batch_stats": dict(self.last_batch_stats),
            "extra": self._state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the state is checked whole before anything changes.

        Raises:
            ValueError: if the checkpoint belongs to another selector or pool size, or is malformed.
        """
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported selector state version {state.get('version')!r}")
        if state.get("selector") != self.name:
            raise ValueError(f"checkpoint is for selector {state.get('selector')!r}, not {self.name!r}")
        if state.get("num_tasks") != self.num_tasks:
            raise ValueError(f"checkpoint has {state.get('num_tasks')} tasks, this pool has {self.num_tasks}")
        # Read every field before assigning any, so a malformed checkpoint changes nothing.
        try:
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["rng"]
            steps, selections = int(state["steps"]), int(state["selections"])
            times_selected = np.array(state["times_selected"], dtype=np.int32)
            hparams, extra = dict(state["hparams"]), state["extra"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed selector checkpoint: {exc!r}") from exc
        if times_selected.shape != (self.num_tasks,):
            raise ValueError("checkpoint times_selected has the wrong shape")
        self._check_state(extra)
        changed = {k: (v, self.hparams.get(k)) for k, v in hparams.items() if self.hparams.get(k) != v}
        if changed:
            logger.warning("resuming with changed hyperparameters {name: (checkpoint, now)}: %s", changed)
        self.rng = rng
        self.steps = steps
        self.selections = selections
        self.times_selected = times_selected
        self.last_batch_stats = dict(state.get("last_batch_stats", {}))
        self._load_state(extra)

    # ------------------------------------------------------------------------------------------ subclass hooks
    def _select(self, batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        """Selectors without a posterior ignore outcomes (they are still validated)."""

    def _state(self) -> dict[str, Any]:
        return {}

    def _check_state(self, extra: dict[str, Any]) -> None:
        """Raise ``ValueError`` if ``extra`` cannot be loaded (called before any state changes)."""

    def _load_state(self, extra: dict[str, Any]) -> None:
        pass


class BetaPosteriorSelector(Selector):
    """The BOTS family: Beta posteriors, an implicit-evidence plug-in and a selection rule.

    Hyperparameters (paper defaults; see :mod:`bots_verl.core.posterior` for the update rule):
        lam: forgetting rate toward the prior, in [0, 1] (paper: 0.1; old counts are multiplied by ``1 - lam``).
        rho: weight of implicit evidence for tasks not trained this step, in [0, 1] (paper: 0.1).
        target: target success probability ``p*`` (paper: 0.5).
        evidence: implicit-evidence plug-in name (``interpolation``, ``none``, or any registered one).
        implicit_scale: pseudo-count scale ``m``; None uses the mean attempts per task of the current update
            (16 in the paper).
        selection: ``thompson`` (paper), ``greedy`` (posterior mean) or ``softmax``.
        tau: temperature of ``softmax`` selection.
        alpha0, beta0: the uniform prior's pseudo-counts (paper: 1, 1).
        prior: ``uniform`` (``Beta(alpha0, beta0)`` for all tasks) or ``reference``: per task
            ``alpha0_k = alpha0 + prior_strength * p_k`` and ``beta0_k = beta0 + prior_strength * (1 - p_k)``, where
            ``p_k`` is reference column ``prior_column`` (default 0, the weakest reference, which is the closest to
            a small policy). The per-task prior is also the target of the forgetting.
        prior_strength: pseudo-observations the reference prior is worth.
        prior_column: which reference column sets the prior.
        plus the evidence plug-in's own hyperparameters (``interpolation``: ``gamma`` = 0.9, ``degenerate_tol``).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "lam": 0.1,
        "rho": 0.1,
        "target": 0.5,
        "evidence": "interpolation",
        "implicit_scale": None,
        "selection": "thompson",
        "tau": 0.1,
        "alpha0": 1.0,
        "beta0": 1.0,
        "prior": "uniform",
        "prior_strength": 4.0,
        "prior_column": 0,
    }

    def _param_groups(self, given: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        evidence = given.get("evidence", self.DEFAULTS["evidence"])
        if evidence not in EVIDENCE:
            raise ValueError(f"unknown evidence plug-in {evidence!r}; registered: {sorted(EVIDENCE)}")
        return [*super()._param_groups(given), (f"evidence:{evidence}", EVIDENCE[evidence].DEFAULTS)]

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        hp = self.hparams
        self.lam = check_unit_interval("lam", hp["lam"])
        self.rho = check_unit_interval("rho", hp["rho"])
        self.target = check_unit_interval("target", hp["target"])
        if hp["selection"] not in SELECTION_RULES:
            raise ValueError(f"unknown selection rule {hp['selection']!r}; known: {sorted(SELECTION_RULES)}")
        self._rule = SELECTION_RULES[hp["selection"]]
        self.tau = float(hp["tau"])
        if hp["selection"] == "softmax" and not self.tau > 0:
            raise ValueError(f"softmax selection needs tau > 0, got {hp['tau']!r}")
        m = hp["implicit_scale"]
        if m is not None and not (np.isfinite(float(m)) and float(m) > 0):
            raise ValueError(f"implicit_scale must be positive or None, got {m!r}")
        self.implicit_scale = None if m is None else float(m)
        evidence_cls: type[ImplicitEvidence] = EVIDENCE[hp["evidence"]]
        evidence_params = {k: hp[k] for k in evidence_cls.DEFAULTS}
        self.evidence = evidence_cls(self.num_tasks, self.reference, **evidence_params)
        self.posterior = BetaPosterior(self.num_tasks, *self._prior())
        self.last_implicit_stats: dict[str, float] = {}

    def _prior(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        hp = self.hparams
        a0, b0 = float(hp["alpha0"]), float(hp["beta0"])
        if hp["prior"] == "uniform":
            return a0, b0
        if hp["prior"] != "reference":
            raise ValueError(f"prior must be 'uniform' or 'reference', got {hp['prior']!r}")
        if self.reference is None:
            raise ValueError("prior='reference' needs reference_pass_rates")
        col = int(hp["prior_column"])
        if not -self.reference.shape[1] <= col < self.reference.shape[1]:
            raise ValueError(f"prior_column {col} out of range for {self.reference.shape[1]} reference columns")
        kappa = float(hp["prior_strength"])
        if not (np.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"prior_strength must be >= 0, got {hp['prior_strength']!r}")
        p = self.reference[:, col]
        return a0 + kappa * p, b0 + kappa * (1.0 - p)

    @property
    def alpha(self) -> np.ndarray:
        """Posterior pseudo-successes per task (read-only view)."""
        view = self.posterior.alpha.view()
        view.flags.writeable = False
        return view

    @property
    def beta(self) -> np.ndarray:
        """Posterior pseudo-failures per task (read-only view)."""
        view = self.posterior.beta.view()
        view.flags.writeable = False
        return view

    def _select(self, batch_size: int) -> np.ndarray:
        return self._rule(self.posterior.alpha, self.posterior.beta, self.target, batch_size, self.rng, self.tau)

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        rates = successes / attempts
        p_tilde = self.evidence.observe(indices, rates, attempts)
        self.last_implicit_stats = {}
        if p_tilde is not None:
            err = p_tilde[indices] - rates
            self.last_implicit_stats = {"implicit/batch_mae": float(np.abs(err).mean())}
        m = self.implicit_scale if self.implicit_scale is not None else float(attempts.mean())
        self.posterior.step(indices, successes, attempts - successes, p_tilde, lam=self.lam, rho=self.rho, m=m)

    def stats(self) -> dict[str, float]:
        mean = self.posterior.mean()
        ess = self.posterior.ess()
        out = {
            **super().stats(),
            "posterior/mean_avg": float(mean.mean()),
            "posterior/mean_std": float(mean.std()),
            "posterior/near_target_frac": float(np.mean(np.abs(mean - self.target) < 0.25)),
            "posterior/ess_avg": float(ess.mean()),
            "posterior/ess_min": float(ess.min()),
            "posterior/ess_max": float(ess.max()),
            **self.last_implicit_stats,
        }
        out.update({f"implicit/{k}": v for k, v in self.evidence.stats().items()})
        return out

    def _state(self) -> dict[str, Any]:
        return {
            "posterior": self.posterior.state_dict(),
            "evidence": self.evidence.state_dict(),
            "last_implicit_stats": dict(self.last_implicit_stats),
        }

    def _check_state(self, extra: dict[str, Any]) -> None:
        BetaPosterior.check_state(extra["posterior"], self.num_tasks)
        self.evidence.check_state(extra["evidence"])

    def _load_state(self, extra: dict[str, Any]) -> None:
        self.posterior.load_state_dict(extra["posterior"])
        self.evidence.load_state_dict(extra["evidence"])
        self.last_implicit_stats = dict(extra.get("last_implicit_stats", {}))


@register_selector("bots")
class BOTSSelector(BetaPosteriorSelector):
    """BOTS with the paper's defaults: lam = rho = 0.1, p* = 0.5, interpolation evidence, Thompson sampling."""


@register_selector("mopps")
class MoPPSSelector(BetaPosteriorSelector):
    """MoPPS as BOTS' special case: explicit evidence only (rho = 0, no plug-in), Thompson sampling.

    MoPPS' own decay multiplies the old counts; here ``lam`` is the forgetting rate (decay = 1 - lam).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {**BetaPosteriorSelector.DEFAULTS, "rho": 0.0, "evidence": "none"}


@register_selector("implicit_only")
class ImplicitOnlySelector(BetaPosteriorSelector):
    """The paper's DOTS-like ablation: rho = 1, unselected tasks are driven by implicit evidence alone."""

    DEFAULTS: ClassVar[dict[str, Any]] = {**BetaPosteriorSelector.DEFAULTS, "rho": 1.0}


@register_selector("random")
class RandomSelector(Selector):
    """Uniform sampling: unique within a batch, independent across batches (the paper's normalising baseline)."""

    def _select(self, batch_size: int) -> np.ndarray:
        return self.rng.choice(self.num_tasks, size=batch_size, replace=False).astype(np.int64)


class _CursorSelector(Selector):
    """Serves a fixed order of the pool batch by batch, wrapping around at the end."""

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        self.cursor = 0
        self.order = self._order()

    def _order(self) -> np.ndarray:
        return np.arange(self.num_tasks, dtype=np.int64)

    def _select(self, batch_size: int) -> np.ndarray:
        positions = (self.cursor + np.arange(batch_size)) % self.num_tasks
        self.cursor = int((self.cursor + batch_size) % self.num_tasks)
        return self.order[positions]

    def _state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def _check_state(self, extra: dict[str, Any]) -> None:
        cursor = extra.get("cursor")
        if isinstance(cursor, bool) or not isinstance(cursor, int | np.integer) or not 0 <= cursor < self.num_tasks:
            raise ValueError(f"checkpoint cursor {cursor!r} is not a position in a pool of {self.num_tasks}")

    def _load_state(self, extra: dict[str, Any]) -> None:
        self.cursor = int(extra["cursor"])


@register_selector("sequential")
class SequentialSelector(_CursorSelector):
    """Dataset order, batch by batch, wrapping around."""


@register_selector("offline_easy2hard")
class OfflineEasy2HardSelector(_CursorSelector):
    """A fixed curriculum by reference pass rate, easiest first (the paper's offline baseline).

    Tasks are ordered by the first (weakest) reference column, descending; ties by the next columns, descending,
    then by index. The order wraps around, restarting the curriculum.
    """

    needs_reference: ClassVar[bool] = True

    def _order(self) -> np.ndarray:
        ref = self.reference
        keys = [np.arange(self.num_tasks)] + [-ref[:, j] for j in range(ref.shape[1] - 1, -1, -1)]
        return np.lexsort(keys).astype(np.int64)
