"""Registers the CPU backend with verl in this process; named in ``VERL_USE_EXTERNAL_MODULES``.

verl imports it at ``import verl`` (``verl/__init__.py``), so it must only import what is cheap there: the platform
registry and the post-import hooks (:mod:`.verl_registrations`).
"""

from __future__ import annotations

import logging

from bots_verl.verl_cpu import verl_registrations
from bots_verl.verl_cpu.platform import PLATFORM_NAME, PlatformCPU

logger = logging.getLogger(__name__)

__all__ = ["PLATFORM_NAME", "PlatformCPU"]

verl_registrations.install()
