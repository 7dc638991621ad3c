"""Evidence weighed by its age (ours, not the paper's): an option of every Beta selector, for asynchronous training.

The paper trains synchronously. verl's asynchronous trainers train on rollouts of an older policy, ``k`` versions
behind (the task's *lag*, ``update(..., lags=)``). Had that evidence arrived when its policy was current, the ``k``
updates since would each have multiplied it by ``1 - lam``; so a trained task with lag ``k`` enters Eq. 1 with its
explicit counts scaled by ``(1 - lam) ** k`` (MoPPS' ``decay ** k``). Lag 0 weighs 1: Eq. 1 bit for bit. Unselected
tasks and the plug-in are untouched: it reads the observed rates as they are (its ``mu`` is a momentum average over
many steps; a lag of a few steps is inside its memory). No hyperparameters. The rule written plainly:
:func:`bots_verl.core.ours.ours_rules.lag_weight`.
"""

from __future__ import annotations

import logging

import numpy as np

from bots_verl.core.paper.bots_selectors import BETA_OPTIONS, BetaOption, BetaPosteriorSelector

logger = logging.getLogger(__name__)

__all__ = ["LaggedEvidence"]


@BETA_OPTIONS.register("lagged_evidence", group="ours")
class LaggedEvidence(BetaOption):
    """Evidence ``lag`` policy versions old weighs ``(1 - lam) ** lag``, what Eq. 1 would have left of it (ours)."""

    @classmethod
    def lag_weights(cls, selector: BetaPosteriorSelector, lags: np.ndarray) -> np.ndarray:
        """``(1 - lam) ** lags``: weight 1 multiplies exactly, so lag 0 is Eq. 1 bit for bit."""
        return (1.0 - selector.lam) ** lags.astype(np.float64)
