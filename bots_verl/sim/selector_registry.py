"""Simulator-only selectors by name, and the one function that builds any selector for the simulator.

:data:`SIM_SELECTORS` holds what only a simulator can run or only its ablation needs: the
``oracle`` (:mod:`~bots_verl.sim.oracle_selector`, it sees the true success probabilities) and the directions
measured and not adopted (:mod:`~bots_verl.sim.ablation_selectors`). Everything else comes from the core registry,
:data:`bots_verl.core.SELECTORS`. Both modules register themselves when :mod:`bots_verl.sim` is imported.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from bots_verl.core import Registry, Selector, build_selector

logger = logging.getLogger(__name__)

__all__ = ["SIM_SELECTORS", "make_selector", "wants_truth"]

SIM_SELECTORS: Registry[type[Selector]] = Registry("simulator selector")


def wants_truth(selector: Any) -> bool:
    """Whether ``selector`` implements the simulator's ``observe_truth`` hook (:mod:`bots_verl.sim.oracle_selector`)."""
    return callable(getattr(selector, "observe_truth", None))


def make_selector(
    name: str,
    num_tasks: int,
    *,
    reference_pass_rates: np.ndarray | None,
    seed: int,
    task_embeddings: np.ndarray | None = None,
    **hparams: Any,
) -> Selector:
    """Build a simulator-only selector or any selector in the core registry (``task_embeddings``: for the selectors
    that read the task graph; the others ignore them).

    Raises:
        ValueError: for an unknown name or hyperparameter (the core's message lists the registered names).
    """
    if task_embeddings is not None:
        hparams = {**hparams, "task_embeddings": task_embeddings}
    if name in SIM_SELECTORS:
        return SIM_SELECTORS[name](num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
    return build_selector(name, num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
