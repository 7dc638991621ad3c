"""The BOTS family: Beta posteriors, an implicit-evidence plug-in and a selection rule; the paper's ``bots`` and its
ablation ``implicit_only``. The peer ``mopps`` (:mod:`bots_verl.core.peers.mopps`) and our ``bots_warm``
(:mod:`bots_verl.core.ours.bots_warm`) are presets of the same class. Options beyond the paper join every Beta
selector through :data:`BETA_OPTIONS` (ours register theirs); at their defaults the selector is the paper's.

One step, as :meth:`BetaPosteriorSelector._update` runs it (paper Sec. 3; plainly in
:mod:`bots_verl.core.paper.paper_rules`): the plug-in predicts ``p_tilde`` over the pool from the batch's observed rates
(:mod:`~bots_verl.core.paper.implicit_evidence`), the posterior applies Eq. 1 (:mod:`~bots_verl.core.paper.posterior`),
and the next :meth:`~bots_verl.core.selector_base.Selector.select` runs the selection rule
(:mod:`~bots_verl.core.paper.selection_rules`). Both the plug-in and the posterior compute their next state without
changing anything; both are committed together once the whole step is known to be valid.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core import defaults
from bots_verl.core.metric_keys import (
    AUC_STAT,
    BIAS_STAT,
    ESS_AVG_STAT,
    ESS_MAX_STAT,
    ESS_MIN_STAT,
    IMPLICIT_MAE_STAT,
    NEAR_TARGET_STAT,
    OBSERVED_P_STAT,
    PEARSON_STAT,
    POSTERIOR_ESS_STAT,
    POSTERIOR_MEAN_MAE_STAT,
    POSTERIOR_MEAN_STAT,
    POSTERIOR_MEAN_STD_STAT,
    SAMPLED_P_STAT,
    implicit_stat,
)
from bots_verl.core.paper.implicit_evidence import EVIDENCE, ImplicitEvidence
from bots_verl.core.paper.posterior import BetaPosterior, check_prior
from bots_verl.core.paper.selection_rules import SELECTION_RULES, SelectionRule
from bots_verl.core.registry import Registry, defaults_of
from bots_verl.core.selection_metrics import pearson, roc_auc
from bots_verl.core.selector_base import SELECTORS, Selector, moved_to_simulator
from bots_verl.core.validation import (
    MAX_ATTEMPTS,
    check_not_null,
    check_real_array,
    check_scalars,
    check_unit_interval,
    require_keys,
)

logger = logging.getLogger(__name__)

__all__ = ["BETA_OPTIONS", "BOTSSelector", "BetaOption", "BetaPosteriorSelector", "ImplicitOnlySelector"]


class BetaOption:
    """An option beyond the paper that every Beta selector takes (:data:`BETA_OPTIONS`; the paper has none).

    Its ``DEFAULTS`` are hyperparameters of every Beta selector, a group of their own (a preset may set them in its
    own ``DEFAULTS``); at those defaults the option leaves the selector the paper's, bit for bit. Stateless: the
    hooks get the selector.
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    @classmethod
    def reads_reference(cls, params: Mapping[str, Any]) -> bool:
        """Whether the option reads the reference columns with its hyperparameters ``params``."""
        return False

    @classmethod
    def check_params(cls, params: Mapping[str, Any], num_references: int) -> None:
        """Refuse hyperparameters ``params`` the option cannot run with, given ``num_references`` reference columns
        (the selector's :meth:`~bots_verl.core.selector_base.Selector.check_hparams` and its constructor call it).

        Raises:
            ValueError: naming the setting.
        """

    @classmethod
    def start(cls, selector: BetaPosteriorSelector, params: Mapping[str, Any]) -> None:
        """Set the selector up before step 1 (its posterior is built; nothing is loaded yet; ``params`` checked)."""

    @classmethod
    def lag_weights(cls, selector: BetaPosteriorSelector, lags: np.ndarray) -> np.ndarray | None:
        """Per task of a lagged update (``update(..., lags=)``, not all 0): its explicit counts' factor; None: 1."""
        return None


#: The options every Beta selector takes, by name (:mod:`bots_verl.core.ours` registers the warm start and evidence
#: weighed by its age); each registered class is a :class:`BetaOption`.
BETA_OPTIONS: Registry[type[BetaOption]] = Registry("Beta-selector option")


class BetaPosteriorSelector(Selector):
    """The BOTS family: Beta posteriors, an implicit-evidence plug-in and a selection rule.

    Hyperparameters (paper defaults; see :mod:`bots_verl.core.paper.posterior` for the update rule):
        lam: forgetting rate toward the prior, in [0, 1] (paper: 0.1; old counts are multiplied by ``1 - lam``).
        rho: weight of implicit evidence for tasks not trained this step, in [0, 1] (paper: 0.1).
        target: target success probability ``p*`` (paper: 0.5).
        evidence: implicit-evidence plug-in name (``interpolation``, ``none``, or any registered one).
        implicit_scale: pseudo-count scale ``m``; None uses the mean attempts per task of the current update
            (16 in the paper).
        selection: selection rule name (``thompson``, the paper's; ``greedy``; ``softmax``; any registered one).
        alpha0, beta0: the prior's pseudo-counts (paper: 1, 1).
        plus the options' (:data:`BETA_OPTIONS`), the evidence plug-in's own hyperparameters (``interpolation``:
        ``gamma`` = 0.9, ``degenerate_tol``) and the selection rule's (``softmax``: ``tau`` = 0.1).
        ``python -m bots_verl.core --list`` prints them all.

    Logged per update (:meth:`stats`), over the updated batch: ``estimator/pearson`` and ``estimator/auc`` of the
    plug-in's prediction *before* this update (what the previous step assumed for these tasks) against the observed
    rates (AUC for the label ``rate >= 0.5``; paper Sec. 4.5 / Fig. 5 report Pearson ~0.5), and
    ``selection/sampled_p_mean``, ``selection/observed_p_mean``, ``selection/sampled_p_bias`` over the tasks of the
    last :meth:`select` in this update (the rule's sampled ``p`` against the observed rate; paper Fig. 3), and
    ``selection/posterior_mean_mae`` and ``selection/posterior_ess``: the mean absolute gap between the batch's
    posterior means before this update and its observed rates, and the batch's mean ``alpha + beta`` then (ours, for
    the gap to the oracle, issue 38).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "lam": defaults.LAM,
        "rho": defaults.RHO,
        "target": defaults.TARGET,
        "evidence": defaults.EVIDENCE,
        "implicit_scale": None,
        "selection": defaults.SELECTION,
        "alpha0": defaults.ALPHA0,
        "beta0": defaults.BETA0,
    }
    RETIRED: ClassVar[dict[str, str]] = moved_to_simulator(("prior", "prior_strength", "prior_column"), "bots_ablation")
    # the prior is part of the posterior's state (BetaPosterior.alpha0/beta0), restored from a checkpoint as saved
    CHECKPOINT_HPARAMS: ClassVar[tuple[str, ...]] = ("alpha0", "beta0")
    # where the ``selection`` hyperparameter is looked up (the simulator's ablation adds a rule of its own)
    RULES: ClassVar[Registry[SelectionRule]] = SELECTION_RULES

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        """Counter, references, posterior and plug-in, plus the larger of what select and update allocate."""
        evidence = EVIDENCE.get((hparams or {}).get("evidence", cls.DEFAULTS["evidence"]), ImplicitEvidence)
        held, working = evidence.bytes_per_task(reference_columns)
        # select: Thompson draws, their scores, argpartition's indices; update: the plug-in's prediction and state,
        # then the new alpha and beta and the implicit pseudo-counts
        transient = max(24, working + BetaPosterior.WORKING_BYTES_PER_TASK)
        return super().bytes_per_task(reference_columns, hparams) + BetaPosterior.HELD_BYTES_PER_TASK + held + transient

    @classmethod
    def reads_reference(cls, hparams: Mapping[str, Any] | None = None) -> bool:
        """As the base, or when the evidence plug-in or an option reads the references."""
        hp = {**cls.DEFAULTS, **(hparams or {})}
        evidence = EVIDENCE.get(hp["evidence"], ImplicitEvidence) if isinstance(hp["evidence"], str) else None
        return (
            super().reads_reference(hp)
            or (evidence is not None and evidence.needs_reference)
            or any(option.reads_reference({**cls._option_defaults(option), **hp}) for option in BETA_OPTIONS.values())
        )

    @classmethod
    def _option_defaults(cls, option: type[BetaOption]) -> dict[str, Any]:
        """``option``'s hyperparameters at this selector's defaults (a preset's ``DEFAULTS`` may set them)."""
        return {k: cls.DEFAULTS.get(k, v) for k, v in option.DEFAULTS.items()}

    @classmethod
    def _graph_users(cls, hparams: Mapping[str, Any], missing_reference: bool) -> list[tuple[str, bool]]:
        name = hparams.get("evidence", cls.DEFAULTS["evidence"])
        evidence = EVIDENCE.get(name, ImplicitEvidence) if isinstance(name, str) else ImplicitEvidence
        return [*super()._graph_users(hparams, missing_reference), (f"evidence={name!r}", evidence.needs_graph)]

    @classmethod
    def _param_groups(cls, given: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        for key in ("evidence", "selection"):  # looked up before the groups are split
            check_not_null(key, given.get(key, cls.DEFAULTS[key]), cls.DEFAULTS[key])
        evidence = EVIDENCE.lookup(given.get("evidence", cls.DEFAULTS["evidence"]))
        rule = cls.RULES.lookup(given.get("selection", cls.DEFAULTS["selection"]))
        in_options = {k for option in BETA_OPTIONS.values() for k in option.DEFAULTS}
        base, (name, own) = super()._param_groups(given)
        return [
            base,
            (name, {k: v for k, v in own.items() if k not in in_options}),  # a preset's option values: below
            *((f"option:{option.name}", cls._option_defaults(option)) for option in BETA_OPTIONS.values()),
            (f"evidence:{evidence.name}", evidence.DEFAULTS),
            ("selection rule", {k: v for k, v in defaults_of(rule).items() if k != "target"}),
        ]

    @classmethod
    def _check_values(cls, values: Mapping[str, Any], num_references: int, embeddings: bool) -> None:
        """The base's checks, then the rates, the selection rule's parameters, ``implicit_scale``, the evidence
        plug-in's, the prior's and the options' (:meth:`~bots_verl.core.selector_base.Selector.check_hparams`)."""
        super()._check_values(values, num_references, embeddings)
        for key in ("lam", "rho", "target"):
            check_unit_interval(key, values[key])
        rule, rule_params = cls._selection_rule(values)
        # A dry run on a one-task input checks the rule's parameters now rather than at the first select.
        rule(np.ones(1), np.ones(1), 1, np.random.default_rng(0), **rule_params)
        m = values["implicit_scale"]
        if m is not None and not (np.isfinite(float(m)) and 0 < float(m) <= MAX_ATTEMPTS):
            raise ValueError(f"implicit_scale must be positive (at most {MAX_ATTEMPTS:g}) or None, got {m!r}")
        evidence_cls: type[ImplicitEvidence] = EVIDENCE.lookup(values["evidence"])
        evidence_cls.check_params({k: values[k] for k in evidence_cls.DEFAULTS}, num_references)
        cls._check_prior(values, num_references)
        for option in BETA_OPTIONS.values():
            option.check_params({k: values[k] for k in option.DEFAULTS}, num_references)

    @classmethod
    def _check_prior(cls, values: Mapping[str, Any], num_references: int) -> None:
        """Refuse the prior's hyperparameters (here ``alpha0``, ``beta0``: shared positive numbers; a subclass with
        another :meth:`_prior` checks its own)."""
        for key in ("alpha0", "beta0"):
            check_prior(key, float(values[key]))

    @classmethod
    def _selection_rule(cls, values: Mapping[str, Any]) -> tuple[SelectionRule, dict[str, Any]]:
        """The selection rule ``values`` name, and its parameters (``target`` as a float)."""
        rule = cls.RULES.lookup(values["selection"])
        return rule, {k: float(values[k]) if k == "target" else values[k] for k in defaults_of(rule)}

    def __init__(
        self,
        num_tasks: int,
        *,
        reference_pass_rates: Any = None,
        task_embeddings: Any = None,
        seed: int = 0,
        **hparams: Any,
    ) -> None:
        # the base checks every value (_check_values) before anything is built
        super().__init__(
            num_tasks, reference_pass_rates=reference_pass_rates, task_embeddings=task_embeddings, seed=seed, **hparams
        )
        hp = self.hparams
        self.lam, self.rho, self.target = float(hp["lam"]), float(hp["rho"]), float(hp["target"])
        self._rule, self._rule_params = self._selection_rule(hp)
        m = hp["implicit_scale"]
        self.implicit_scale = None if m is None else float(m)
        evidence_cls: type[ImplicitEvidence] = EVIDENCE.lookup(hp["evidence"])
        evidence_params = {k: hp[k] for k in evidence_cls.DEFAULTS}
        if evidence_cls.needs_graph:
            evidence_params["graph"] = self.task_graph
        self.evidence = evidence_cls(self.num_tasks, self.reference, **evidence_params)
        self.posterior = BetaPosterior(self.num_tasks, *self._prior())
        for option in BETA_OPTIONS.values():
            option.start(self, {k: hp[k] for k in option.DEFAULTS})
        # The tasks of the last select() and the p the rule scored them by; the last update's diagnostics.
        self.last_selection: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.int64), np.empty(0))
        self.last_update_stats: dict[str, float] = {}

    def _prior(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(alpha0, beta0)``: shared scalars here; a subclass may return per-task arrays."""
        return float(self.hparams["alpha0"]), float(self.hparams["beta0"])

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
        picked, p = self._rule(self.posterior.alpha, self.posterior.beta, batch_size, self.rng, **self._rule_params)
        self.last_selection = (picked, p)
        return picked

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        self._step(indices, successes, attempts, successes, attempts - successes)

    def _update_lagged(
        self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray, lags: np.ndarray
    ) -> None:
        """The paper trains synchronously; an option may weigh each task's explicit counts by its lag."""
        explicit_successes, explicit_failures = successes, attempts - successes
        for option in BETA_OPTIONS.values():
            weights = option.lag_weights(self, lags)
            if weights is not None:
                explicit_successes, explicit_failures = weights * explicit_successes, weights * explicit_failures
        self._step(indices, successes, attempts, explicit_successes, explicit_failures)

    def _step(
        self,
        indices: np.ndarray,
        successes: np.ndarray,
        attempts: np.ndarray,
        explicit_successes: np.ndarray,
        explicit_failures: np.ndarray,
    ) -> None:
        """One step: the plug-in reads the observed ``successes / attempts``, Eq. 1 adds the explicit counts."""
        rates = successes / attempts
        predicted_before = self.evidence.predict(indices)
        p_tilde, evidence_state = self.evidence.propose(indices, rates, attempts)
        m = self.implicit_scale if self.implicit_scale is not None else float(attempts.mean())
        alpha, beta = self.posterior.updated(
            indices, explicit_successes, explicit_failures, p_tilde, lam=self.lam, rho=self.rho, m=m
        )
        update_stats = self._diagnostics(indices, rates, predicted_before)
        if p_tilde is not None:
            update_stats[IMPLICIT_MAE_STAT] = float(np.abs(p_tilde[indices] - rates).mean())
        # Commit: nothing above changed the selector, so a rejected step (ValueError) leaves it as it was.
        self.evidence.commit(evidence_state)
        self.posterior.alpha, self.posterior.beta = alpha, beta
        self.last_update_stats = update_stats

    def _diagnostics(self, indices: np.ndarray, rates: np.ndarray, predicted: np.ndarray | None) -> dict[str, float]:
        """O(batch) diagnostics of the estimator and of the selection (see the class docstring)."""
        nan = float("nan")
        out = {
            PEARSON_STAT: nan if predicted is None else pearson(predicted, rates),
            AUC_STAT: nan if predicted is None else roc_auc(predicted, rates >= 0.5),
        }
        picked, sampled = self.last_selection
        _, in_pick, in_batch = np.intersect1d(picked, indices, assume_unique=True, return_indices=True)
        sampled_mean = float(sampled[in_pick].mean()) if in_pick.size else nan
        observed_mean = float(rates[in_batch].mean()) if in_batch.size else nan
        out[SAMPLED_P_STAT] = sampled_mean
        out[OBSERVED_P_STAT] = observed_mean
        out[BIAS_STAT] = sampled_mean - observed_mean
        # issue 38's gap analysis: how far the posterior the batch was chosen on stood from what the batch showed
        a, b = self.posterior.alpha[indices], self.posterior.beta[indices]
        out[POSTERIOR_MEAN_MAE_STAT] = float(np.abs(a / (a + b) - rates).mean())
        out[POSTERIOR_ESS_STAT] = float((a + b).mean())
        return out

    def stats(self) -> dict[str, float]:
        mean = self.posterior.mean()
        ess = self.posterior.ess()
        out = {
            **super().stats(),
            POSTERIOR_MEAN_STAT: float(mean.mean()),
            POSTERIOR_MEAN_STD_STAT: float(mean.std()),
            NEAR_TARGET_STAT: float(np.mean(np.abs(mean - self.target) < 0.25)),
            ESS_AVG_STAT: float(ess.mean()),
            ESS_MIN_STAT: float(ess.min()),
            ESS_MAX_STAT: float(ess.max()),
            **self.last_update_stats,
        }
        out.update({implicit_stat(k): v for k, v in self.evidence.stats().items()})
        return out

    def _state(self) -> dict[str, Any]:
        picked, sampled = self.last_selection
        return {
            "posterior": self.posterior.state_dict(),
            "evidence": self.evidence.state_dict(),
            "last_selection": {"indices": picked.copy(), "p": sampled.copy()},
            "last_update_stats": dict(self.last_update_stats),
        }

    def _check_state(self, extra: Mapping[str, Any]) -> None:
        require_keys(extra, ("posterior", "evidence"), "checkpoint extra")
        BetaPosterior.check_state(extra["posterior"], self.num_tasks)
        require_keys(extra["evidence"], (), "checkpoint evidence")
        self.evidence.check_state(extra["evidence"])
        self._checked_diagnostics(extra)

    def _checked_diagnostics(self, extra: Mapping[str, Any]) -> tuple[tuple[np.ndarray, np.ndarray], dict[str, float]]:
        # Version-1 checkpoints have no last selection, and their update stats are called last_implicit_stats.
        stats = check_scalars(
            "checkpoint last_update_stats", extra.get("last_update_stats", extra.get("last_implicit_stats", {}))
        )
        selection = extra.get("last_selection", {"indices": np.empty(0, np.int64), "p": np.empty(0)})
        require_keys(selection, ("indices", "p"), "checkpoint last_selection")
        size = int(np.size(selection["indices"]))
        picked = check_real_array("checkpoint last_selection indices", selection["indices"], (size,), integer=True)
        if size and picked.max() >= self.num_tasks:
            raise ValueError(f"checkpoint last_selection has indices outside the pool of {self.num_tasks}")
        sampled = check_real_array("checkpoint last_selection p", selection["p"], (size,))
        return (picked, sampled), stats

    def _load_state(self, extra: Mapping[str, Any]) -> None:
        self.last_selection, self.last_update_stats = self._checked_diagnostics(extra)
        self.posterior.load_state_dict(extra["posterior"])
        self.evidence.load_state_dict(extra["evidence"])


@SELECTORS.register("bots", group="paper")
class BOTSSelector(BetaPosteriorSelector):
    """BOTS with the paper's defaults: lam = rho = 0.1, p* = 0.5, interpolation evidence, Thompson sampling."""


@SELECTORS.register("implicit_only", group="paper")
class ImplicitOnlySelector(BetaPosteriorSelector):
    """The paper's DOTS-like ablation: rho = 1, unselected tasks are driven by implicit evidence alone."""

    FIXED: ClassVar[dict[str, Any]] = {"rho": 1.0}
    DEFAULTS: ClassVar[dict[str, Any]] = {**BetaPosteriorSelector.DEFAULTS, **FIXED}
