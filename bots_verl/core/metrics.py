"""Metric functions shared by the selectors, the simulator, the verl integration and ``analysis/``.

One implementation of each metric lives here (numpy only), so a simulated run and a real run are scored the same way.
"""

from __future__ import annotations

import numpy as np

__all__ = ["effective_task_ratio"]


def effective_task_ratio(successes: np.ndarray, attempts: np.ndarray) -> float:
    """Share of tasks whose rollout group is neither all-wrong nor all-right (``0 < s < n``).

    Those are the tasks with a nonzero GRPO advantage (paper Sec. 4, "ETR"). With fractional successes the same
    strict inequalities apply. Returns NaN for an empty batch.
    """
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(attempts, dtype=np.float64)
    if s.size == 0:
        return float("nan")
    return float(np.mean((s > 0) & (s < n)))
