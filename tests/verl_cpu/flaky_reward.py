"""The toy reward with injected failures, for ``test_agent_loop_on_cpu.py`` (verl's reward worker loads it by path).

A row's ``extra_info.fail`` picks the failure: ``always`` (every rollout's reward raises) or ``some`` (the reward of a
response whose crc32 is odd raises). The score comes back as a dict, so ``reward_extra_info`` carries
several keys.
"""

from __future__ import annotations

import zlib
from typing import Any

from bots_verl.verl_cpu.addition_task import compute_score as toy_score


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> dict[str, float]:
    """The toy score, its response length, or an injected ``ValueError``."""
    fail = (extra_info or {}).get("fail")
    if fail == "always" or (fail == "some" and zlib.crc32(solution_str.encode()) % 2):
        raise ValueError(f"injected reward failure ({fail})")
    score = toy_score(data_source, solution_str, ground_truth, extra_info)
    return {"score": score, "acc": score, "chars": float(len(solution_str))}
