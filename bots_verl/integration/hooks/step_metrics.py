"""The ``bots/...`` figures a step adds to verl's step metrics (so they reach every ``trainer.logger`` backend).

Every name comes from the key table (:mod:`bots_verl.core.metric_keys`, re-exported by :mod:`bots_verl.runlog`); the
readers in :mod:`analysis` take the same constants. The names are listed in ``bots_verl/integration/README.md``
("Per-step evidence and logging").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bots_verl.core.metric_keys import bots_key

logger = logging.getLogger(__name__)

__all__ = ["bots_metrics"]


def bots_metrics(stats: Mapping[str, float], figures: Mapping[str, float]) -> dict[str, float]:
    """Namespace selector statistics and step figures under ``bots/`` for verl's tracker.

    Args:
        stats: the selector's ``stats()`` (no prefix).
        figures: the step's own figures, keyed by the table's ``*_STAT`` names (``ROLLOUTS_STAT``, ...); they win
            over a statistic of the same name.

    Returns:
        ``{bots_key(name): float(value)}``.
    """
    return {bots_key(k): float(v) for k, v in {**stats, **figures}.items()}
