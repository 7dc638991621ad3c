"""Simulator-only selectors and the one function that builds any selector for the simulator.

The ``oracle`` knows the policy's true success probabilities, which only a simulator has, so it is registered here and
not in :data:`bots_verl.core.SELECTORS`. It reaches the truth through a documented hook: before every ``select`` the
simulator calls ``selector.observe_truth(p)`` on any selector that defines it, with ``p`` the current true success
probability of every pool task. Core selectors do not define the hook and so run unchanged, through the public
``select`` / ``update`` / ``stats`` API only.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core import Selector, build_selector
from bots_verl.core.selection import top_k

logger = logging.getLogger(__name__)

__all__ = ["SIM_SELECTORS", "OracleSelector", "make_selector", "wants_truth"]


class OracleSelector(Selector):
    """The ceiling for any difficulty-targeting selector: picks the tasks whose true p is closest to ``target``.

    With ``target = 0.5`` this maximises ``p (1 - p)``, the expected reward variance of a group, hence the expected
    GRPO signal. Exact ties are broken at random.

    Hyperparameters:
        target: the target success probability (0.5).
    """

    name: ClassVar[str] = "oracle"
    DEFAULTS: ClassVar[dict[str, Any]] = {"target": 0.5}

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        self.target = float(self.hparams["target"])
        self.truth: np.ndarray | None = None

    def observe_truth(self, probs: np.ndarray) -> None:
        """The simulator's hook: the true success probability of every task before this selection."""
        probs = np.asarray(probs, dtype=np.float64)
        if probs.shape != (self.num_tasks,):
            raise ValueError(f"expected {self.num_tasks} probabilities, got shape {probs.shape}")
        self.truth = probs

    def _select(self, batch_size: int) -> np.ndarray:
        if self.truth is None:
            raise RuntimeError("oracle: observe_truth() must be called before select()")
        score = -np.abs(self.truth - self.target) + self.rng.random(self.num_tasks) * 1e-12
        return top_k(score, batch_size)


SIM_SELECTORS: dict[str, type[Selector]] = {"oracle": OracleSelector}


def wants_truth(selector: Any) -> bool:
    """Whether ``selector`` implements the simulator's ``observe_truth`` hook."""
    return callable(getattr(selector, "observe_truth", None))


def make_selector(name: str, num_tasks: int, *, reference_pass_rates: np.ndarray, seed: int, **hparams: Any):
    """Build a simulator-only selector (``oracle``) or any selector in the core registry.

    Raises:
        ValueError: for an unknown name or hyperparameter (the core's message lists the registered names).
    """
    if name in SIM_SELECTORS:
        return SIM_SELECTORS[name](num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
    return build_selector(name, num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
