"""The selector contract every trainer codes against: ``select``, ``update``, ``stats``, ``state_dict``.

:class:`Selector` owns what all selectors share: boundary validation (:mod:`bots_verl.core.validation`) before any
state changes, so a rejected call leaves the selector exactly as it was; its own RNG; counters; the memory check of
the pool size (:mod:`bots_verl.core.memory`); and checkpoints that carry the whole state, RNG included, and are
checked whole before anything is loaded. Subclasses fill in ``_select`` / ``_update`` and their part of the state.

Adding a selector is one small class::

    @SELECTORS.register("my_selector")
    class MySelector(Selector):
        DEFAULTS = {"my_param": 1}

        def _select(self, batch_size):
            ...  # unique int64 indices

A selector whose hyperparameters need checking checks them in a ``_check_values`` classmethod, which both its
constructor (through the base's) and :meth:`Selector.check_hparams` run, so settings are checked before a trainer
starts without building the selector.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.memory import check_pool_fits
from bots_verl.core.metric_keys import (
    ETR_STAT,
    EVER_SELECTED_STAT,
    STEPS_STAT,
    SUCCESS_STAT,
)
from bots_verl.core.registry import Registry
from bots_verl.core.selection_metrics import batch_composition, effective_task_ratio
from bots_verl.core.task_graph import TaskGraph, check_embeddings, check_graph_k, impute_reference
from bots_verl.core.validation import (
    check_batch_size,
    check_count,
    check_indices,
    check_lags,
    check_nan_policy,
    check_outcomes,
    check_real_array,
    check_reference,
    check_scalars,
    check_seed,
    require_keys,
    split_known_params,
)

logger = logging.getLogger(__name__)

__all__ = ["SELECTORS", "STATE_VERSION", "Selector"]

# 2: Beta selectors also carry their last selection and update diagnostics. Version-1 checkpoints still load.
STATE_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_STATE_KEYS = (
    "version",
    "selector",
    "num_tasks",
    "seed",
    "hparams",
    "rng",
    "steps",
    "selections",
    "times_selected",
    "last_batch_stats",
    "extra",
)
_INT32_MAX = int(np.iinfo(np.int32).max)
# The checkpoint key of the task graph's fingerprint (present only when the selector built a graph).
_GRAPH_KEY = "task_graph"


def moved_to_simulator(keys: tuple[str, ...], selector: str) -> dict[str, str]:
    """``RETIRED`` entries for hyperparameters measured, not adopted, and kept by the simulator's ablation."""
    message = (
        "it was measured and not adopted (recipes/results/sim/bots_plus_results.md); the simulator's ablation keeps "
        "it as "
        f"selector {selector!r} (bots_verl/sim/ablation_selectors.py)"
    )
    return dict.fromkeys(keys, message)


class Selector:
    """Base class: input validation, RNG, counters and checkpoint plumbing shared by every selector.

    Args:
        num_tasks: pool size N; tasks are ``0 .. N-1``.
        reference_pass_rates: optional ``(N,)`` or ``(N, K)`` reference pass rates, columns ordered weak -> strong.
        task_embeddings: optional ``(N, d)`` task embeddings, one row per task (finite, no all-zero row). The
            selector builds the task graph (:class:`~bots_verl.core.task_graph.TaskGraph`, ``graph_k`` neighbours)
            from them once, and only when something needs it: ``reference_nan="neighbours"`` with missing values, or
            an evidence plug-in with ``needs_graph`` (``neighbours``). The embeddings themselves are not kept.
        seed: seed of the selector's own ``numpy`` generator (PCG64).
        **hparams: hyperparameters; names and defaults in ``DEFAULTS``, plus two for every selector:
            ``reference_nan``, the policy for missing reference values (``"impute"``: column means; ``"error"``;
            ``"neighbours"``: imputed from labelled similar tasks over the task graph,
            :func:`~bots_verl.core.task_graph.impute_reference`), and ``graph_k`` (16), the task graph's
            neighbours per task.

    Raises:
        ValueError: for an invalid pool size, reference array, embeddings or hyperparameter, a value that
            contradicts a preset's defining setting (``FIXED``), something that needs the task graph without
            ``task_embeddings``, or a pool (or its graph) too large for the available memory.
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    # Settings that define a preset (e.g. rho = 0 for mopps): passing another value is an error, not a silent variant.
    FIXED: ClassVar[dict[str, Any]] = {}
    # Hyperparameters that were removed, with the message that says where they went.
    RETIRED: ClassVar[dict[str, str]] = {}
    needs_reference: ClassVar[bool] = False
    # Hyperparameters whose value lives in the checkpointed state (e.g. the prior inside the posterior): on resume the
    # checkpoint's value stays, whatever the selector was built with, so a change is reported as not applied.
    CHECKPOINT_HPARAMS: ClassVar[tuple[str, ...]] = ()
    # Numeric hyperparameters that also take a word, checked by the selector itself (a quoted number in any other
    # numeric hyperparameter is refused: :func:`~bots_verl.core.validation.check_number_param`).
    NAMED_HPARAMS: ClassVar[tuple[str, ...]] = ()
    _BASE_DEFAULTS: ClassVar[dict[str, Any]] = {"reference_nan": "impute", "graph_k": 16}

    def __init__(
        self,
        num_tasks: int,
        *,
        reference_pass_rates: Any = None,
        task_embeddings: Any = None,
        seed: int = 0,
        **hparams: Any,
    ) -> None:
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, int | np.integer) or num_tasks < 1:
            raise ValueError(f"num_tasks must be a positive integer, got {num_tasks!r}")
        self.num_tasks = int(num_tasks)
        base, self.hparams = self._resolve_hparams(hparams)
        columns = 0 if reference_pass_rates is None else (np.shape(reference_pass_rates)[1:] or (1,))[0]
        check_pool_fits(self.name, self.num_tasks, self.bytes_per_task(columns, hparams))
        self.seed = check_seed(seed)
        embeddings = None if task_embeddings is None else check_embeddings(task_embeddings, self.num_tasks)
        self.reference: np.ndarray | None = None
        if reference_pass_rates is not None:
            self.reference = check_reference(reference_pass_rates, self.num_tasks, nan_policy=base["reference_nan"])
        values = {**base, **self.hparams}
        # the checks of the values alone, the ones check_hparams makes before a trainer starts; the pool's below
        self._check_values(values, 0 if self.reference is None else self.reference.shape[1], embeddings is not None)
        missing_reference = self.reference is not None and bool(np.isnan(self.reference).any())
        self.task_graph: TaskGraph | None = None
        if self._graph_needs(values, missing_reference, embeddings is not None):
            self.task_graph = TaskGraph.from_embeddings(embeddings, base["graph_k"])
        if missing_reference:
            assert self.task_graph is not None  # reference_nan="neighbours" is the only policy that keeps NaN
            self.reference = impute_reference(self.reference, self.task_graph)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self.steps = 0
        self.selections = 0
        self.times_selected = np.zeros(self.num_tasks, dtype=np.int32)
        self.last_batch_stats: dict[str, float] = {}

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        """Peak bytes per pool task (see :mod:`bots_verl.core.memory`): the selection counter and the references.

        Args:
            reference_columns: columns of the reference pass rates (0 without).
            hparams: the hyperparameters the selector is built with (they may choose what it allocates).
        """
        hparams = hparams or {}
        base = 4 + 8 * reference_columns
        if hparams.get("reference_nan", cls._BASE_DEFAULTS["reference_nan"]) == "neighbours":
            base += 8 * reference_columns  # the imputed copy
        k = hparams.get("graph_k", cls._BASE_DEFAULTS["graph_k"])
        if isinstance(k, int | np.integer) and any(needed for _, needed in cls._graph_users(hparams, True)):
            base += TaskGraph.bytes_per_task(int(k))  # graph_k itself is checked when the graph is built
        return base

    @classmethod
    def reads_reference(cls, hparams: Mapping[str, Any] | None = None) -> bool:
        """Whether a run with ``hparams`` reads the reference columns it is given (issue 36's cost accounting: a run
        that does not read them costs no reference generations, whatever columns its config names).

        Args:
            hparams: the hyperparameters the selector runs with (defaults fill the rest).
        """
        return cls.needs_reference

    @classmethod
    def task_graph_k(cls, hparams: Mapping[str, Any]) -> Any:
        """The task graph's neighbours per task under ``hparams`` (set, else the default; checked where the graph is
        built)."""
        return hparams.get("graph_k", cls._BASE_DEFAULTS["graph_k"])

    @classmethod
    def check_for_training(cls, hparams: Mapping[str, Any]) -> None:
        """What the selector needs from a trainer beyond its constructor's checks (nothing here; a selector that
        reads something only a trainer provides checks it).

        Args:
            hparams: the hyperparameters it runs with (defaults included).

        Raises:
            ValueError: naming the setting.
        """

    @classmethod
    def check_hparams(cls, hparams: Mapping[str, Any], *, num_references: int, embeddings: bool, seed: Any = 0) -> None:
        """Every check the constructor makes that needs no pool, made without building the selector: the names
        (:meth:`effective_hparams`), the seed, and the values: their ranges, the selection rule's parameters, what
        needs reference columns (and how many) or task embeddings (:meth:`_check_values`).

        The constructor makes the same checks, through the same functions, so a value refused here is refused there
        with the same message. What depends on the pool stays with the constructor: the reference array's and the
        embeddings' shapes and values, ``graph_k`` against the pool size, the memory the pool needs.

        Args:
            hparams: the hyperparameters set (the rest keep the selector's defaults).
            num_references: reference columns the selector will get (0: none).
            embeddings: whether it will get task embeddings.
            seed: seed of its generator.

        Raises:
            ValueError: as the constructor raises it.
        """
        base, own = cls._resolve_hparams(hparams)
        check_seed(seed)
        cls._check_values({**base, **own}, num_references, embeddings)

    @classmethod
    def _check_values(cls, values: Mapping[str, Any], num_references: int, embeddings: bool) -> None:
        """Refuse ``values`` (every hyperparameter, the base ones included) that this selector cannot run with,
        given ``num_references`` reference columns and whether task embeddings are given. Subclasses add their own
        checks after ``super()``'s; what only the pool can tell (the reference values, the graph's size) is not
        checked here.

        Raises:
            ValueError: naming the setting.
        """
        check_nan_policy(values["reference_nan"])
        if cls.needs_reference and not num_references:
            raise ValueError(f"selector {cls.name!r} needs reference_pass_rates")
        # a reference without missing values is assumed: whether the pool's has some is the constructor's to tell
        cls._graph_needs(values, False, embeddings)
        check_graph_k(values["graph_k"])

    @classmethod
    def _graph_needs(cls, values: Mapping[str, Any], missing_reference: bool, embeddings: bool) -> list[str]:
        """What needs the task graph under ``values`` (empty: nothing).

        Raises:
            ValueError: when something needs it and no task embeddings are given.
        """
        need = [why for why, needed in cls._graph_users(values, missing_reference) if needed]
        if need and not embeddings:
            raise ValueError(
                f"selector {cls.name!r} needs task_embeddings (one row per task) for the task graph: {', '.join(need)}"
            )
        return need

    @classmethod
    def _graph_users(cls, hparams: Mapping[str, Any], missing_reference: bool) -> list[tuple[str, bool]]:
        """What might need the task graph, and whether it does under ``hparams`` (subclasses add their own)."""
        nan_policy = hparams.get("reference_nan", cls._BASE_DEFAULTS["reference_nan"])
        needed = nan_policy == "neighbours" and missing_reference
        return [("reference_nan='neighbours' with missing reference values", needed)]

    @classmethod
    def effective_hparams(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every hyperparameter this selector runs with (``self.hparams`` once built): ``given`` over the declared
        defaults, its own ``DEFAULTS`` and its parts' (a Beta selector's evidence plug-in and selection rule).

        Read from the declared tables alone: nothing is built, so no pool, reference or value check is involved.
        A copy: a caller that changes it (a mapping default such as ``truth_args``) cannot change the table.

        Raises:
            ValueError: for an unknown or retired name, or a value that contradicts a preset's defining setting.
        """
        return copy.deepcopy(cls._resolve_hparams(given)[1])

    @classmethod
    def _resolve_hparams(cls, given: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(base, hparams)``: ``reference_nan`` and ``graph_k``, which every selector reads, and
        :meth:`effective_hparams`.

        A base setting given with another value than the selector's default is part of ``hparams`` too (so of the
        method label, ``meta.json`` and the checkpoint): it changes what runs (how missing reference values are
        handled, the task graph). At its default it is left out, so that the records of runs that never set it stay
        as they were. ``graph_k`` where nothing can build a task graph has no effect and is refused.
        """
        cls._refuse(given)
        base, own, *extra = split_known_params(given, cls._param_groups(given), cls.NAMED_HPARAMS)
        hparams = {**own, **{k: v for group in extra for k, v in group.items()}}
        if "graph_k" in given and not any(needed for _, needed in cls._graph_users({**base, **hparams}, True)):
            raise ValueError(
                f"graph_k={given['graph_k']!r} has no effect on selector {cls.name!r} with these settings: it sizes "
                "the task graph, which only reference_nan='neighbours' or a graph-reading evidence plug-in "
                "(evidence='neighbours') builds; leave graph_k out"
            )
        changed = {k: v for k, v in base.items() if k in given and v != cls._BASE_DEFAULTS[k]}
        return base, {**hparams, **changed}

    @classmethod
    def _refuse(cls, hparams: Mapping[str, Any]) -> None:
        for key, message in cls.RETIRED.items():
            if key in hparams:
                raise ValueError(f"hyperparameter {key!r} of selector {cls.name!r} was removed: {message}")
        for key, value in cls.FIXED.items():
            if key in hparams and hparams[key] != value:
                raise ValueError(
                    f"selector {cls.name!r} is defined by {key}={value!r}; it refuses {key}={hparams[key]!r} "
                    f"(for that variant use selector 'bots' with {key}={hparams[key]!r})"
                )

    @classmethod
    def _param_groups(cls, given: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("base", cls._BASE_DEFAULTS), (cls.name, cls.DEFAULTS)]

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

    def update(self, indices: Any, successes: Any, attempts: Any, lags: Any = None) -> None:
        """Feed one training step's outcomes: per task, ``successes`` out of ``attempts`` rollouts.

        Successes may be fractional (rewards in [0, 1] summed over the rollouts). One call is one step: the
        forgetting toward the prior is applied once per call. The update is all-or-nothing.

        Args:
            indices: the tasks trained this step (unique).
            successes: per task, its successes (fractional allowed).
            attempts: per task, its rollouts.
            lags: ours, for asynchronous training: per task, how many policy versions older than the policy this
                step trains its rollouts' policy was (non-negative integers). None or all zeros is the paper's
                synchronous update, exactly; the Beta selectors weigh older evidence by ``(1 - lam) ** lag``
                (:mod:`bots_verl.core.ours.lagged_evidence`), selectors without a posterior ignore it.

        Raises:
            ValueError: on indices out of range or repeated, arrays of different lengths, successes that are not real
                numbers, negative, above attempts, NaN or infinite, attempts that are not positive or absurdly large,
                lags that are not non-negative integers, or counts that would overflow the posterior. The state is
                then unchanged.
        """
        idx = check_indices(indices, self.num_tasks)
        s, n = check_outcomes(successes, attempts, idx.size)
        k = None if lags is None else check_lags(lags, idx.size)
        if k is None or not k.any():
            self._update(idx, s, n)
        else:
            self._update_lagged(idx, s, n, k)
        self.steps += 1
        self.last_batch_stats = {
            ETR_STAT: effective_task_ratio(s, n),
            SUCCESS_STAT: float(s.sum() / n.sum()),
            **batch_composition(s, n, self.times_selected[idx]),
        }

    def stats(self) -> dict[str, float]:
        """Scalar summaries for logging (no prefix; the caller namespaces them, e.g. ``bots/``)."""
        return {
            STEPS_STAT: float(self.steps),
            EVER_SELECTED_STAT: float(np.count_nonzero(self.times_selected)),
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
            # only with a graph, so the checkpoints of selectors without one are as they were
            **({_GRAPH_KEY: self.task_graph.fingerprint()} if self.task_graph is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; every field is checked before any is assigned.

        Raises:
            ValueError: if the checkpoint belongs to another selector or pool size, lacks a key, or holds a value of
                the wrong type, shape or range (negative or huge counters, a NaN or negative prior, ...).
        """
        require_keys(state, _STATE_KEYS, "selector checkpoint")
        version = state["version"]
        if isinstance(version, bool) or version not in _READABLE_VERSIONS:
            raise ValueError(f"unsupported selector state version {version!r}; readable: {_READABLE_VERSIONS}")
        if state["selector"] != self.name:
            raise ValueError(f"checkpoint is for selector {state['selector']!r}, not {self.name!r}")
        if state["num_tasks"] != self.num_tasks:
            raise ValueError(f"checkpoint has {state['num_tasks']} tasks, this pool has {self.num_tasks}")
        mine = None if self.task_graph is None else self.task_graph.fingerprint()
        if state.get(_GRAPH_KEY) != mine:
            raise ValueError(
                f"checkpoint was saved with task graph {state.get(_GRAPH_KEY)!r}, this selector has {mine!r} "
                "(None: no graph): resume with the same task_embeddings (same rows, same order) and graph_k"
            )
        rng = np.random.Generator(np.random.PCG64())
        try:
            rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"checkpoint rng is not a PCG64 state: {exc!r}") from exc
        steps = check_count("checkpoint steps", state["steps"])
        selections = check_count("checkpoint selections", state["selections"])
        times = check_real_array("checkpoint times_selected", state["times_selected"], (self.num_tasks,), integer=True)
        if times.size and times.max() > _INT32_MAX:
            raise ValueError(f"checkpoint times_selected exceeds {_INT32_MAX}")
        if not isinstance(state["hparams"], Mapping):
            raise ValueError(f"checkpoint hparams must be a dict, got {type(state['hparams']).__name__}")
        last_batch_stats = check_scalars("checkpoint last_batch_stats", state["last_batch_stats"])
        extra = state["extra"]
        require_keys(extra, (), "checkpoint extra")
        self._check_state(extra)
        changed = {k: (v, self.hparams.get(k)) for k, v in state["hparams"].items() if self.hparams.get(k) != v}
        kept = {k: v for k, v in changed.items() if k in self.CHECKPOINT_HPARAMS}
        applied = {k: v for k, v in changed.items() if k not in kept}
        if applied:
            logger.warning(
                "resuming with changed hyperparameters, applied from now on {name: (checkpoint, now)}: %s", applied
            )
        if kept:
            logger.warning(
                "resuming with changed hyperparameters that live in the checkpoint's state: NOT applied, the "
                "checkpoint's values stay {name: (checkpoint, now)}: %s",
                kept,
            )
        # hparams must describe what runs: the kept ones take the checkpoint's values
        self.hparams.update({k: checkpoint for k, (checkpoint, _) in kept.items()})
        self.rng = rng
        self.steps = steps
        self.selections = selections
        self.times_selected = times.astype(np.int32)
        self.last_batch_stats = last_batch_stats
        self._load_state(extra)

    # ------------------------------------------------------------------------------------------ subclass hooks
    def _select(self, batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        """Selectors without a posterior ignore outcomes (they are still validated)."""

    def _update_lagged(
        self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray, lags: np.ndarray
    ) -> None:
        """An update whose evidence is ``lags`` (validated, not all 0) policy versions old.

        Selectors that keep no evidence-weighted state (``random``, ``greso``'s streaks, ...) treat it as any
        update; the Beta selectors override it to discount old evidence.
        """
        self._update(indices, successes, attempts)

    def _state(self) -> dict[str, Any]:
        return {}

    def _checked_state(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        """``extra`` checked and converted: attribute name -> value, what :meth:`_load_state` sets (none here).

        Raises ``ValueError`` if ``extra`` cannot be loaded. A subclass whose state is plain attributes overrides
        this alone; one with state objects of its own overrides :meth:`_check_state` and :meth:`_load_state`.
        """
        return {}

    def _check_state(self, extra: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` if ``extra`` cannot be loaded (called before any state changes)."""
        self._checked_state(extra)

    def _load_state(self, extra: Mapping[str, Any]) -> None:
        """Restore ``extra`` (already checked by :meth:`_check_state`)."""
        for name, value in self._checked_state(extra).items():
            setattr(self, name, value)


SELECTORS: Registry[type[Selector]] = Registry("selector")
