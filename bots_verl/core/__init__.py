"""The BOTS algorithm as a pure-numpy library, usable from any trainer.

Example:
    >>> from bots_verl.core import build_selector
    >>> sel = build_selector("bots", 1000, reference_pass_rates=ref, seed=0)  # ref: (1000, 2), weak -> strong
    >>> batch = sel.select(32)
    >>> sel.update(batch, successes, attempts)   # per task of the batch, e.g. out of 16 rollouts

This package imports only numpy and the standard library.
"""

from __future__ import annotations

from typing import Any

from bots_verl.core.evidence import EVIDENCE, ImplicitEvidence, register_evidence
from bots_verl.core.metrics import effective_task_ratio
from bots_verl.core.posterior import BetaPosterior
from bots_verl.core.selection import SELECTION_RULES
from bots_verl.core.selectors import SELECTORS, BetaPosteriorSelector, Selector, register_selector

# Beyond the paper: importing these registers the ``irt`` evidence, the ``learnability`` rule and ``bots_plus``.
from bots_verl.core import irt_evidence as _irt_evidence  # noqa: E402,F401  isort: skip
from bots_verl.core import bots_plus as _bots_plus  # noqa: E402,F401  isort: skip

__all__ = [
    "EVIDENCE",
    "SELECTION_RULES",
    "SELECTORS",
    "BetaPosterior",
    "BetaPosteriorSelector",
    "ImplicitEvidence",
    "Selector",
    "build_selector",
    "effective_task_ratio",
    "register_evidence",
    "register_selector",
]


def build_selector(
    name: str, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any
) -> Selector:
    """Build a registered selector.

    Args:
        name: ``bots``, ``mopps``, ``implicit_only``, ``random``, ``offline_easy2hard``, ``sequential`` or any name
            added with :func:`register_selector`.
        num_tasks: the pool size; tasks are ``0 .. num_tasks - 1``.
        reference_pass_rates: ``(num_tasks,)`` or ``(num_tasks, K)`` reference pass rates, columns weak -> strong.
        seed: seed of the selector's generator; same seed and same updates give the same selections.
        **hparams: the selector's hyperparameters (``SELECTORS[name].DEFAULTS``) and its evidence plug-in's.

    Returns:
        The selector.

    Raises:
        ValueError: for an unknown name or hyperparameter, or invalid values.
    """
    if name not in SELECTORS:
        raise ValueError(f"unknown selector {name!r}; registered: {sorted(SELECTORS)}")
    return SELECTORS[name](num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
