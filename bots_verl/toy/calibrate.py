"""Calibration of a starting policy: pass-rate distribution, mixed-group share, held-out accuracy, references.

Every figure uses the exact pass probabilities of :func:`bots_verl.toy.likelihood.answer_stats` (temperature 1),
so it carries no rollout noise:

- pool shares ``at 0`` (p < 0.01), ``at 1`` (p > 0.99) and in between;
- the expected share of **mixed groups** at n rollouts, ``mean_k(1 - p_k^n - (1 - p_k)^n)``: the share of a uniformly
  random batch's groups that give GRPO a non-zero advantage;
- held-out accuracy (mean p over held-out prompts) with its standard error over prompts, and the standard error that
  a sampled evaluation with ``n`` responses per prompt would add;
- the same per cell, for the table in the report.

Correlations with the reference columns come from ``reference_eval stats`` (one implementation of them), run on a
parquet holding the policy's pass rates beside the references'.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["heldout_summary", "mixed_share", "per_cell", "pool_summary"]


def mixed_share(p: np.ndarray, n: int) -> float:
    """Expected share of groups of ``n`` rollouts with at least one success and one failure."""
    p = np.asarray(p, dtype=float)
    return float(np.mean(1.0 - p**n - (1.0 - p) ** n))


def pool_summary(p: np.ndarray, ns: Sequence[int] = (8, 16)) -> dict[str, Any]:
    """Distribution of pool pass rates: mean, shares at 0 / 1 / between, mixed-group shares at each ``n``."""
    p = np.asarray(p, dtype=float)
    at0, at1 = float(np.mean(p < 0.01)), float(np.mean(p > 0.99))
    out: dict[str, Any] = {
        "tasks": int(p.size),
        "mean": float(p.mean()),
        "share_at_0": at0,
        "share_at_1": at1,
        "share_between": 1.0 - at0 - at1,
    }
    for n in ns:
        out[f"mixed_share_n{n}"] = mixed_share(p, n)
        out[f"all_fail_share_n{n}"] = float(np.mean((1.0 - p) ** n))
        out[f"all_pass_share_n{n}"] = float(np.mean(p**n))
    return out


def heldout_summary(p: np.ndarray, greedy: np.ndarray, ns: Sequence[int] = (4, 8)) -> dict[str, Any]:
    """Held-out accuracy at temperature 1 with standard errors, and greedy accuracy.

    ``se_prompts`` is the standard error over the prompt sample alone (exact pass rates); ``se_sampled_n<k>`` adds the
    binomial noise of estimating each prompt's pass rate from ``k`` sampled responses, as verl's validation does.
    """
    p = np.asarray(p, dtype=float)
    k = p.size
    var_prompts = float(np.var(p, ddof=1)) if k > 1 else 0.0
    out: dict[str, Any] = {
        "prompts": int(k),
        "accuracy": float(p.mean()),
        "se_prompts": math.sqrt(var_prompts / k),
        "greedy_accuracy": float(np.mean(greedy)),
    }
    for n in ns:
        out[f"se_sampled_n{n}"] = math.sqrt(var_prompts / k + float(np.mean(p * (1 - p))) / (k * n))
    return out


def per_cell(cells: Sequence[str], values: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Mean of each value column per cell, plus the cell's task count."""
    cells_arr = np.asarray(cells)
    out: dict[str, dict[str, float]] = {}
    for cell in sorted(set(cells_arr.tolist())):
        mask = cells_arr == cell
        row: dict[str, float] = {"tasks": int(mask.sum())}
        for name, col in values.items():
            row[name] = float(np.nanmean(np.asarray(col, dtype=float)[mask]))
        out[cell] = row
    return out
