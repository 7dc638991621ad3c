"""How a rollout's reward counts as a success: one rule for training and for reference pass rates.

The posterior's evidence (``bots.success.*`` in the trainer) and a reference column computed by ``reference_eval``
must judge a response the same way, or the interpolation compares unlike numbers; both use :class:`SuccessRule`.
Standard library only, like the rest of :mod:`bots_verl.rewards`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["SUCCESS_RULES", "SuccessRule"]

SUCCESS_RULES = ("auto", "acc", "threshold", "score")


@dataclasses.dataclass(frozen=True)
class SuccessRule:
    """Maps a rollout's reward to a success in [0, 1].

    Args:
        rule: ``auto``: ``acc`` (from ``reward_extra_info``, or the reward function's dict) when present and a bool or
            a number in [0, 1], else ``score > threshold`` (math_dapo's +/-1 scores come with a bool ``acc``; verl's
            naive reward manager copies a float score into ``acc``, so a +/-1 float score falls back to the
            threshold). ``acc``: ``acc`` only (must be present). ``threshold``: ``score > threshold``. ``score``: the
            score itself, which must lie in [0, 1] (e.g. fractional test-case pass rates).
        threshold: the score threshold.

    Raises:
        ValueError: for an unknown rule.
    """

    rule: str = "auto"
    threshold: float = 0.0

    def __post_init__(self) -> None:
        if self.rule not in SUCCESS_RULES:
            raise ValueError(f"success rule must be one of {SUCCESS_RULES}, got {self.rule!r}")

    def __call__(self, score: float, extra: Mapping[str, Any] | None) -> float:
        """The success in [0, 1].

        Raises:
            ValueError: if the reward cannot be mapped (NaN score, missing or out-of-range ``acc``/score).
        """
        if not math.isfinite(score):
            raise ValueError(f"reward score {score!r} is not finite")
        acc = None if extra is None else extra.get("acc", None)
        # numpy / torch scalars -> Python scalars (np.bool_ becomes bool)
        acc = acc.item() if hasattr(acc, "item") else acc
        if self.rule in ("auto", "acc") and acc is not None:
            if isinstance(acc, bool):
                return float(acc)
            if isinstance(acc, int | float) and 0.0 <= acc <= 1.0:
                return float(acc)
            if self.rule == "acc" or not (isinstance(acc, int | float) and math.isfinite(acc)):
                raise ValueError(f"reward 'acc'={acc!r} is not a bool or a number in [0, 1]")
        if self.rule == "acc":
            raise ValueError("success rule 'acc' but the reward function gave no 'acc'")
        if self.rule == "score":
            if not 0.0 <= score <= 1.0:
                raise ValueError(f"success rule 'score' needs scores in [0, 1], got {score}")
            return float(score)
        return float(score > self.threshold)
