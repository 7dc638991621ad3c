"""Deprecated module name: the selection rules live in :mod:`bots_verl.core.selection_rules`."""

import warnings

from bots_verl.core.selection_rules import SELECTION_RULES, top_k

__all__ = ["SELECTION_RULES", "top_k"]

warnings.warn(
    "bots_verl.core.selection is renamed bots_verl.core.selection_rules (rules now take keyword parameters and "
    "return (indices, p)); this alias will be removed",
    DeprecationWarning,
    stacklevel=2,
)
