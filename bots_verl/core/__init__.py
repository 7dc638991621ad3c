"""The BOTS algorithm as a pure-numpy library, usable from any trainer.

Example:
    >>> from bots_verl.core import build_selector
    >>> sel = build_selector("bots", 1000, reference_pass_rates=ref, seed=0)  # ref: (1000, 2), weak -> strong
    >>> batch = sel.select(32)
    >>> sel.update(batch, successes, attempts)   # per task of the batch, e.g. out of 16 rollouts

``python -m bots_verl.core --list`` prints every registered selector, evidence plug-in and selection rule with its
hyperparameters. The paper's rules, written plainly, are in :mod:`bots_verl.core.paper.paper_rules`.

This package imports only numpy and the standard library.
"""

from __future__ import annotations

from typing import Any

# Importing the three groups registers their entries: the paper's selectors, plug-ins and rules and its baselines,
# the peers, and ours (python -m bots_verl.core --list prints them by group).
from bots_verl.core import ours as _ours  # noqa: F401
from bots_verl.core import paper as _paper  # noqa: F401
from bots_verl.core import peers as _peers  # noqa: F401
from bots_verl.core.paper.bots_selectors import BetaPosteriorSelector
from bots_verl.core.paper.implicit_evidence import EVIDENCE, ImplicitEvidence
from bots_verl.core.paper.posterior import BetaPosterior
from bots_verl.core.paper.selection_rules import SELECTION_RULES
from bots_verl.core.registry import Registry
from bots_verl.core.selection_metrics import effective_task_ratio
from bots_verl.core.selector_base import SELECTORS, Selector

__all__ = [
    "EVIDENCE",
    "SELECTION_RULES",
    "SELECTORS",
    "BetaPosterior",
    "BetaPosteriorSelector",
    "ImplicitEvidence",
    "Registry",
    "Selector",
    "build_selector",
    "effective_task_ratio",
]


def build_selector(
    name: str,
    num_tasks: int,
    *,
    reference_pass_rates: Any = None,
    task_embeddings: Any = None,
    seed: int = 0,
    **hparams: Any,
) -> Selector:
    """Build a registered selector.

    Args:
        name: a name in :data:`SELECTORS` (``python -m bots_verl.core --list`` prints them with their
            hyperparameters), e.g. ``bots``, ``mopps``, ``random``.
        num_tasks: the pool size; tasks are ``0 .. num_tasks - 1``.
        reference_pass_rates: ``(num_tasks,)`` or ``(num_tasks, K)`` reference pass rates, columns weak -> strong.
        task_embeddings: ``(num_tasks, d)`` task embeddings, for what reads the task graph (``bots_noref``,
            ``bots_partial_ref``, ``evidence="neighbours"``, ``reference_nan="neighbours"``); ignored otherwise.
        seed: seed of the selector's generator; same seed and same updates give the same selections.
        **hparams: the selector's hyperparameters, its evidence plug-in's and its selection rule's.

    Returns:
        The selector.

    Raises:
        ValueError: for an unknown name or hyperparameter, invalid values, an override of a preset's defining
            setting (e.g. ``rho`` for ``mopps``), or a pool too large for the available memory.
    """
    cls = SELECTORS.lookup(name)
    if task_embeddings is None:  # selectors that take no embeddings keep working unchanged
        return cls(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
    return cls(
        num_tasks, reference_pass_rates=reference_pass_rates, task_embeddings=task_embeddings, seed=seed, **hparams
    )
