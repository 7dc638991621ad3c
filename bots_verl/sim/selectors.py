"""Deprecated module name: :mod:`bots_verl.sim.oracle` (the oracle) and :mod:`bots_verl.sim.selector_registry`."""

import warnings

from bots_verl.sim.oracle import OracleSelector
from bots_verl.sim.selector_registry import SIM_SELECTORS, make_selector, wants_truth

__all__ = ["SIM_SELECTORS", "OracleSelector", "make_selector", "wants_truth"]

warnings.warn(
    "bots_verl.sim.selectors is split into bots_verl.sim.oracle and bots_verl.sim.selector_registry; "
    "this alias will be removed",
    DeprecationWarning,
    stacklevel=2,
)
