"""The ``bots/...`` figures a step adds to verl's step metrics (so they reach every ``trainer.logger`` backend).

The names are read back by :mod:`analysis` (``bots/select_ms``, ``bots/rollouts``, ...) and listed in
``bots_verl/integration/README.md`` ("Per-step evidence and logging").
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

__all__ = ["PREFIX", "bots_metrics"]

PREFIX = "bots/"


def bots_metrics(stats: dict[str, float], **extra: float) -> dict[str, float]:
    """Namespace selector statistics and step figures under ``bots/`` for verl's tracker.

    Args:
        stats: the selector's ``stats()`` (no prefix).
        **extra: the step's own figures (``rollouts``, ``select_ms``, ...); they win over a statistic of the same name.

    Returns:
        ``{"bots/<name>": float(value)}``.
    """
    return {f"{PREFIX}{k}": float(v) for k, v in {**stats, **extra}.items()}
