"""The warm start (ours, not the paper's): an option of every Beta selector, on in ``bots_warm``.

Before step 1 the paper's posterior is the flat prior, so its first batch is random (the cold start). The warm start
adds, once, ``warm_start_weight`` pseudo-counts per task at the reference interpolation's rate at a guessed position
``warm_start_mu`` (0: the weak reference); the prior, the target of Eq. 1's forgetting, is unchanged, so these counts
fade by ``1 - lam`` per step like any evidence. Weight 0 (the default) is the paper's flat start, bit for bit. The
rule written plainly: :func:`bots_verl.core.ours.ours_rules.warm_start`; why 16 in ``bots_warm``:
:class:`~bots_verl.core.ours.bots_warm.BOTSWarmSelector`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core import defaults
from bots_verl.core.paper.bots_selectors import BETA_OPTIONS, BetaOption, BetaPosteriorSelector
from bots_verl.core.validation import MAX_ATTEMPTS

logger = logging.getLogger(__name__)

__all__ = ["WarmStart"]


@BETA_OPTIONS.register("warm_start", group="ours")
class WarmStart(BetaOption):
    """Warm start (ours): ``warm_start_weight`` pseudo-counts per task at the interpolation at ``warm_start_mu``.

    Hyperparameters:
        warm_start_weight: pseudo-counts per task added once before step 1 (0: the paper's flat start).
        warm_start_mu: the policy's guessed position between the first (weak) and last (strong) reference column
            (0: the weak reference; with one column it is moot).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "warm_start_weight": defaults.WARM_START_WEIGHT,
        "warm_start_mu": defaults.WARM_START_MU,
    }

    @classmethod
    def reads_reference(cls, params: Mapping[str, Any]) -> bool:
        """A warm start of positive weight reads the references (its prediction)."""
        weight = params["warm_start_weight"]
        return isinstance(weight, int | float) and not isinstance(weight, bool) and weight > 0

    @classmethod
    def check_params(cls, params: Mapping[str, Any], num_references: int) -> None:
        """Refuse a weight outside ``[0, MAX_ATTEMPTS]`` or not a number, a ``warm_start_mu`` that is not finite, or a
        positive weight without reference columns.

        Raises:
            ValueError: naming the setting.
        """
        weight, mu0 = params["warm_start_weight"], params["warm_start_mu"]
        if isinstance(weight, bool) or not (np.isfinite(float(weight)) and 0 <= float(weight) <= MAX_ATTEMPTS):
            raise ValueError(f"warm_start_weight must be a number in [0, {MAX_ATTEMPTS:g}], got {weight!r}")
        if isinstance(mu0, bool) or not np.isfinite(float(mu0)):
            raise ValueError(f"warm_start_mu must be a finite number, got {mu0!r}")
        if float(weight) > 0 and not num_references:
            raise ValueError(
                f"warm_start_weight={float(weight):g} needs reference_pass_rates (the warm start's prediction)"
            )

    @classmethod
    def start(cls, selector: BetaPosteriorSelector, params: Mapping[str, Any]) -> None:
        """Add the pseudo-counts to ``selector``'s posterior (nothing at weight 0; ``params`` checked by
        :meth:`check_params`)."""
        weight, mu0 = float(params["warm_start_weight"]), float(params["warm_start_mu"])
        if weight == 0.0:  # the paper's flat start, untouched
            return
        assert selector.reference is not None  # check_params refuses a positive weight without references
        weak = selector.reference[:, 0]
        # p0 = clip(weak + mu0 * (strong - weak), 0, 1), in one pool-sized buffer
        p0 = np.subtract(selector.reference[:, -1], weak)
        p0 *= mu0
        p0 += weak
        np.clip(p0, 0.0, 1.0, out=p0)
        implicit = p0 * weight
        posterior = selector.posterior
        posterior.alpha += implicit
        posterior.beta += weight
        posterior.beta -= implicit
