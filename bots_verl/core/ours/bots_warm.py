"""``bots_warm`` (ours, not the paper's): paper BOTS with a warm start before step 1.

The warm start itself is an option of every Beta selector (``warm_start_weight``, ``warm_start_mu``; 0 is the
paper's flat start, :mod:`bots_verl.core.ours.warm_start`); this preset turns it on. The rule written plainly:
:func:`bots_verl.core.ours.ours_rules.warm_start`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from bots_verl.core.ours.warm_start import WarmStart
from bots_verl.core.paper.bots_selectors import BetaPosteriorSelector
from bots_verl.core.selector_base import SELECTORS

logger = logging.getLogger(__name__)

__all__ = ["BOTSWarmSelector"]


@SELECTORS.register("bots_warm", group="ours")
class BOTSWarmSelector(BetaPosteriorSelector):
    """BOTS with a warm start (ours): 16 pseudo-counts per task at the weak reference's rate before step 1.

    The paper's posterior starts flat, so its first batch is random and the first few are nearly so (the cold start;
    the paper's MoPPS comparison and our simulator show it costs most early in training). Before any batch the best
    guess of a task's pass rate is the reference interpolation at a guessed position ``warm_start_mu`` (0: the weak
    reference, the closer one to a small policy), worth ``warm_start_weight`` observations. 16 is what Proposition 2
    says a never-selected task's implicit evidence is worth in the steady state under the paper's defaults
    (``rho * m / lam`` with m = 16), so every task starts as confident as the paper's implicit evidence would
    eventually make it.

    It differs from a reference *prior* (``prior="reference"``, measured and not adopted: the simulator's
    ``bots_ablation``) in what forgetting does to it: a prior is the target of the forgetting, so a reference that is
    miscalibrated for the policy keeps pulling every task back forever; the warm start is evidence, so it fades by
    ``1 - lam`` per step (a third of it is left after 10 steps at ``lam = 0.1``) while the task's own rollouts and the
    fitted interpolation take over. Everything else is the paper's ``bots``; ``warm_start_weight = 0`` is ``bots``
    exactly. The rule, written plainly: :func:`bots_verl.core.ours.ours_rules.warm_start`.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        **BetaPosteriorSelector.DEFAULTS,
        **WarmStart.DEFAULTS,
        "warm_start_weight": 16.0,
    }
