"""The ``oracle``: the ceiling for any difficulty-targeting selector, which only a simulator can run.

It knows the policy's true success probabilities, so it is registered in the simulator's
:data:`~bots_verl.sim.selector_registry.SIM_SELECTORS` and not in :data:`bots_verl.core.SELECTORS`. It reaches the
truth through a documented hook: before every ``select`` the simulator calls ``selector.observe_truth(p)`` on any
selector that defines it, with ``p`` the current true success probability of every pool task. Core selectors do not
define the hook and so run unchanged, through the public ``select`` / ``update`` / ``stats`` API only.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bots_verl.core import Selector
from bots_verl.core.paper.selection_rules import top_k
from bots_verl.sim.selector_registry import SIM_SELECTORS

logger = logging.getLogger(__name__)

__all__ = ["OracleSelector"]


@SIM_SELECTORS.register("oracle")
class OracleSelector(Selector):
    """The ceiling for any difficulty-targeting selector: picks the tasks whose true p is closest to ``target``.

    With ``target = 0.5`` this maximises ``p (1 - p)``, the expected reward variance of a group, hence the expected
    GRPO signal. Exact ties are broken at random.

    Hyperparameters:
        target: the target success probability (0.5).
    """

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
