"""``pass_rate_oracle``: selection on the current policy's true pass rates, the ceiling of difficulty targeting.

Issue 38, item 1 (the toy testbed's ``oracle`` arm). At every ``select`` the selector reads the true pass rate of
every pool task under the policy that will generate the next rollouts and takes the ``B`` tasks nearest ``target``
(p* = 0.5, the largest expected reward variance ``p (1 - p)`` of a group, hence the most GRPO signal); exact ties
are broken by its seeded generator. The rollouts and the update are every other arm's: it only chooses differently.

The true pass rates reach it in one of two ways, both through numpy arrays only:

- ``observe_truth(p, version)`` before every ``select`` (the simulator's hook, :mod:`bots_verl.sim.oracle_selector`,
  and any caller that knows the truth); a ``select`` without a fresh observation raises, so a stale truth is never
  used;
- a **truth source** named by the hyperparameter ``truth_source`` (``"package.module:factory"``): the first
  ``select`` imports it and calls ``factory(num_tasks, **truth_args)`` once, which returns a callable; every
  ``select`` then calls it and gets ``p`` or ``(p, version)``. This is how a trainer whose selector lives in another
  process (verl's, :mod:`bots_verl.integration.transport.selector_service`) supplies it: the toy's source,
  :class:`bots_verl.toy.rollout_truth.RolloutServerTruth`, computes the exact pass rates on the rollout server's
  weights.
  The core imports nothing beyond numpy: the source is the caller's module, loaded by name.

``version`` is what the source says the pass rates were computed from (the toy: the rollout server's weight
version, verl's ``global_steps`` of the last weight sync); it is logged as ``oracle/truth_version`` so a run shows
which weights each selection saw. The last truth rides in the checkpoint for inspection; a resumed selector reads a
new one before it selects.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.metric_keys import (
    ORACLE_GAP_MAX_STAT,
    ORACLE_POOL_PASS_STAT,
    ORACLE_SELECTED_PASS_STAT,
    ORACLE_TRUTH_MS_STAT,
    ORACLE_TRUTH_VERSION_STAT,
)
from bots_verl.core.selector_base import SELECTORS, Selector
from bots_verl.core.validation import check_real_array, check_scalars, check_unit_interval

logger = logging.getLogger(__name__)

__all__ = ["PassRateOracleSelector", "TruthSource", "load_truth_factory"]

#: what a truth source returns on each call: the pass rates, or the pass rates and the version they were computed from
TruthSource = Callable[[], "np.ndarray | tuple[np.ndarray, int | None]"]

_SOURCE_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def load_truth_factory(spec: str) -> Callable[..., TruthSource]:
    """The factory a ``truth_source`` names (``"package.module:factory"``), imported; nothing is called.

    Raises:
        ValueError: naming ``spec`` when it is malformed, its module does not import, the attribute is missing or it
            is not callable.
    """
    if not isinstance(spec, str) or not _SOURCE_SPEC.match(spec):
        raise ValueError(f"truth_source must be 'package.module:factory', got {spec!r}")
    module_name, _, attr = spec.partition(":")
    try:
        factory: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            factory = getattr(factory, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"truth_source={spec!r} cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise ValueError(f"truth_source={spec!r} names a {type(factory).__name__}, not a factory (a callable)")
    return factory


@SELECTORS.register("pass_rate_oracle", group="ours")
class PassRateOracleSelector(Selector):
    """The tasks whose true pass rate is nearest ``target`` (the toy benchmark's ``oracle`` arm; issue 38).

    Hyperparameters:
        target: the target pass rate (0.5).
        truth_source: ``"package.module:factory"`` of a truth source (module docstring); empty: the caller calls
            :meth:`observe_truth` before every ``select``.
        truth_args: keyword arguments of the factory (a mapping).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"target": 0.5, "truth_source": "", "truth_args": {}}

    @classmethod
    def _check_values(cls, values: Mapping[str, Any], num_references: int, embeddings: bool) -> None:
        """``target`` in [0, 1], ``truth_source`` a ``package.module:factory`` or empty, ``truth_args`` a mapping
        that goes with a source (whether the source imports: :meth:`check_for_training`)."""
        super()._check_values(values, num_references, embeddings)
        check_unit_interval("target", values["target"])
        spec = values["truth_source"]
        if not isinstance(spec, str) or (spec and not _SOURCE_SPEC.match(spec)):
            raise ValueError(f"truth_source must be 'package.module:factory' or empty, got {spec!r}")
        args = values["truth_args"]
        if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
            raise ValueError(f"truth_args must be a mapping of names to values, got {args!r}")
        if args and not spec:
            raise ValueError("truth_args without a truth_source")

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        # the base checks every value (_check_values) before anything is built
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        self.target = float(self.hparams["target"])
        self.hparams["truth_args"] = dict(self.hparams["truth_args"])
        self._source: TruthSource | None = None
        self.truth: np.ndarray | None = None
        self.truth_version: int | None = None
        self._fresh = False
        self._truth_ms = float("nan")
        self.selection_stats: dict[str, float] = {}

    @classmethod
    def check_for_training(cls, hparams: Mapping[str, Any]) -> None:
        """In a trainer nothing calls :meth:`observe_truth`: the oracle reads the true pass rates from
        ``truth_source``.

        Raises:
            ValueError: when it is not set or does not load (:func:`load_truth_factory`).
        """
        need = (
            "pass_rate_oracle in a verl run reads the true pass rates from a truth source, "
            "+bots.hparams.truth_source='package.module:factory' (a factory(num_tasks, **truth_args) returning a "
            "callable that gives the pass rates; the toy's is bots_verl.toy.rollout_truth:RolloutServerTruth)"
        )
        spec = hparams["truth_source"]
        if not spec:
            raise ValueError(f"bots.hparams.truth_source is not set: {need}")
        try:
            load_truth_factory(spec)
        except ValueError as exc:
            raise ValueError(f"bots.hparams.{exc}: {need}") from exc

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        # the truth and its checked copy, the gaps, the tie-break keys, lexsort's result and work space (float64/int64)
        return super().bytes_per_task(reference_columns, hparams) + 64

    # ------------------------------------------------------------------------------------------------ the truth
    def observe_truth(self, probs: Any, version: int | None = None) -> None:
        """The true pass rate of every pool task under the policy the next selection trains; used by one ``select``.

        Args:
            probs: ``(num_tasks,)`` pass rates in [0, 1].
            version: what they were computed from (e.g. a weight version), or None.

        Raises:
            ValueError: for another shape, or values that are not finite or outside [0, 1].
        """
        p = check_real_array("true pass rates", probs, (self.num_tasks,))
        if p.size and (p.min() < 0.0 or p.max() > 1.0):
            raise ValueError(f"true pass rates must lie in [0, 1], got range [{p.min()}, {p.max()}]")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int | np.integer)):
            raise ValueError(f"truth version must be an integer or None, got {version!r}")
        self.truth = p
        self.truth_version = None if version is None else int(version)
        self._fresh = True

    def _truth_source(self) -> TruthSource:
        """The truth source of ``truth_source``, built on first use (ValueError naming it if it cannot be)."""
        if self._source is None:
            spec = self.hparams["truth_source"]
            source = load_truth_factory(spec)(self.num_tasks, **self.hparams["truth_args"])
            if not callable(source):
                raise ValueError(f"truth_source={spec!r} returned {type(source).__name__}, not a callable")
            self._source = source
            logger.info("pass_rate_oracle: true pass rates from %s(%s)", spec, self.hparams["truth_args"])
        return self._source

    def _read_truth(self) -> None:
        source = self._truth_source()
        t0 = time.perf_counter()
        reading = source()
        probs, version = reading if isinstance(reading, tuple) else (reading, None)
        self.observe_truth(probs, version)
        self._truth_ms = (time.perf_counter() - t0) * 1e3

    # ------------------------------------------------------------------------------------------------ selection
    def _select(self, batch_size: int) -> np.ndarray:
        if self.hparams["truth_source"]:
            self._read_truth()
        if not self._fresh or self.truth is None:
            raise RuntimeError(
                "pass_rate_oracle: observe_truth() must be called before every select() (or set truth_source); "
                "it never selects on the truth of an older policy"
            )
        self._fresh = False
        gap = np.abs(self.truth - self.target)
        # nearest the target first; exact ties in a random order from the selector's own generator
        picked = np.lexsort((self.rng.random(self.num_tasks), gap))[:batch_size].astype(np.int64)
        chosen = self.truth[picked]
        self.selection_stats = {
            ORACLE_TRUTH_VERSION_STAT: float("nan") if self.truth_version is None else float(self.truth_version),
            ORACLE_TRUTH_MS_STAT: self._truth_ms,
            ORACLE_POOL_PASS_STAT: float(self.truth.mean()),
            ORACLE_SELECTED_PASS_STAT: float(chosen.mean()),
            ORACLE_GAP_MAX_STAT: float(gap[picked].max()),
        }
        return picked

    def stats(self) -> dict[str, float]:
        """The base statistics plus the last selection's ``oracle/...`` figures (module docstring)."""
        return {**super().stats(), **self.selection_stats}

    # ------------------------------------------------------------------------------------------------ checkpoints
    def _state(self) -> dict[str, Any]:
        return {
            "truth": np.zeros(0) if self.truth is None else self.truth.copy(),
            "truth_version": -1 if self.truth_version is None else self.truth_version,
            "selection_stats": dict(self.selection_stats),
        }

    def _check_state(self, extra: Mapping[str, Any]) -> None:
        truth = np.asarray(extra.get("truth", np.zeros(0)))
        if truth.size:
            truth = check_real_array("checkpoint truth", truth, (self.num_tasks,))
            if truth.min() < 0.0 or truth.max() > 1.0:
                raise ValueError("checkpoint truth must lie in [0, 1]")
        version = extra.get("truth_version", -1)
        if isinstance(version, bool) or not isinstance(version, int | np.integer) or version < -1:
            raise ValueError(f"checkpoint truth_version must be an integer >= -1, got {version!r}")
        check_scalars("checkpoint selection_stats", extra.get("selection_stats", {}))

    def _load_state(self, extra: Mapping[str, Any]) -> None:
        truth = np.asarray(extra.get("truth", np.zeros(0)), dtype=np.float64)
        self.truth = truth.copy() if truth.size else None
        version = int(extra.get("truth_version", -1))
        self.truth_version = None if version < 0 else version
        self.selection_stats = check_scalars("checkpoint selection_stats", extra.get("selection_stats", {}))
        # the checkpoint's truth belongs to the policy of its step: read a new one before selecting
        self._fresh = False
