"""``mopps``: the peer MoPPS as the special case of the BOTS family with explicit evidence only.

A peer, not the paper's method: the paper compares against it. It is the paper's Beta selector
(:class:`~bots_verl.core.paper.bots_selectors.BetaPosteriorSelector`) with ``rho = 0`` and no implicit-evidence
plug-in, so only a task's own rollouts move its posterior.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from bots_verl.core.paper.bots_selectors import BetaPosteriorSelector
from bots_verl.core.selector_base import SELECTORS

logger = logging.getLogger(__name__)

__all__ = ["MoPPSSelector"]


@SELECTORS.register("mopps", group="peers")
class MoPPSSelector(BetaPosteriorSelector):
    """MoPPS as BOTS' special case: explicit evidence only (rho = 0, no plug-in), Thompson sampling.

    MoPPS' own decay multiplies the old counts; here ``lam`` is the forgetting rate (decay = 1 - lam).
    """

    FIXED: ClassVar[dict[str, Any]] = {"rho": 0.0, "evidence": "none"}
    DEFAULTS: ClassVar[dict[str, Any]] = {**BetaPosteriorSelector.DEFAULTS, **FIXED}
