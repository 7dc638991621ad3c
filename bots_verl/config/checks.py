"""The config checks a layer above ``config/`` owns, registered here and run by the driver's ``check_config``.

``config/`` stands below the verl glue and the CPU backend, so it cannot import their checks; a backend registers
its own instead (:func:`register_config_check`), when the driver imports it: the CPU backend's checks of its
checkpoint engine and known-answer scripts (:mod:`bots_verl.verl_cpu.config_checks`, imported by
``bots_verl.main``). ``bots_verl.main.check_config`` runs them (:func:`run_config_checks`) with the verl checks
(:mod:`.verl_checks`) and the ``bots:`` checks (:mod:`.bots_config`), before Ray starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from omegaconf import DictConfig

logger = logging.getLogger(__name__)

__all__ = ["ConfigCheck", "register_config_check", "registered_checks", "run_config_checks"]

#: a check of the composed config: returns anything (ignored), raises ``ValueError`` naming the key for bad input
ConfigCheck = Callable[[DictConfig], object]

# name -> check, in registration order; keyed by name so that registering a module's checks twice adds nothing
_CHECKS: dict[str, ConfigCheck] = {}


def register_config_check(check: ConfigCheck) -> ConfigCheck:
    """Add ``check`` to the checks :func:`run_config_checks` runs (usable as a decorator).

    Args:
        check: a function of the composed config that raises ``ValueError`` for a setting it refuses.

    Returns:
        ``check`` itself.
    """
    _CHECKS[f"{check.__module__}.{check.__qualname__}"] = check
    return check


def registered_checks() -> tuple[str, ...]:
    """The registered checks' qualified names, in the order they run."""
    return tuple(_CHECKS)


def run_config_checks(config: DictConfig) -> None:
    """Run every registered check on ``config``, in registration order.

    Raises:
        ValueError: the first refusal, as its check raised it.
    """
    for check in _CHECKS.values():
        check(config)
