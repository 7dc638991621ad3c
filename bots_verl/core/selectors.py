"""Deprecated module name: the selectors moved to modules named for what they hold.

- :mod:`bots_verl.core.selector_base`: :class:`Selector` (the API every selector implements) and ``STATE_VERSION``;
- :mod:`bots_verl.core.beta_selectors`: the BOTS family (``bots``, ``mopps``, ``implicit_only``);
- :mod:`bots_verl.core.baseline_selectors`: ``random``, ``sequential``, ``offline_easy2hard``;
- :mod:`bots_verl.core.registry`: ``SELECTORS`` (``register_selector`` is ``SELECTORS.register``).
"""

import warnings

from bots_verl.core.baseline_selectors import OfflineEasy2HardSelector, RandomSelector, SequentialSelector
from bots_verl.core.beta_selectors import BetaPosteriorSelector, BOTSSelector, ImplicitOnlySelector, MoPPSSelector
from bots_verl.core.selector_base import SELECTORS, STATE_VERSION, Selector, register_selector

__all__ = [
    "SELECTORS",
    "STATE_VERSION",
    "BOTSSelector",
    "BetaPosteriorSelector",
    "ImplicitOnlySelector",
    "MoPPSSelector",
    "OfflineEasy2HardSelector",
    "RandomSelector",
    "Selector",
    "SequentialSelector",
    "register_selector",
]

warnings.warn(
    "bots_verl.core.selectors is split into bots_verl.core.selector_base, beta_selectors and baseline_selectors; "
    "import from there (or from bots_verl.core); this alias will be removed",
    DeprecationWarning,
    stacklevel=2,
)
