"""Scoring responses with the reward functions training uses.

A reference pass rate is only comparable with the policy's observed pass rate if both are judged by the same rule, so
the default scorer is ``bots_verl.rewards.compute_score`` (the function the BOTS training recipes plug into verl).
Where that module is not importable, ``auto`` falls back to verl's ``default_compute_score`` and says so; the scorer's
name is part of the results' settings, so results from different scorers never mix.

Whether a response is a success is decided by :class:`bots_verl.rewards.success.SuccessRule`, the same rule (and the
same ``--success-rule``/``--success-threshold`` as ``bots.success.rule``/``threshold``) the trainer applies to the
policy's rollouts, so the reference column and the observed pass rates are comparable. A scorer that returns a plain
number gives no ``acc``; under the default ``auto`` rule it then counts as a success when ``score > threshold``.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bots_verl.rewards.success import SuccessRule

from .data import DataError, Task

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["ScoreError", "Scorer", "check_scorable", "resolve_scorer"]

# Examples per data source in the error of check_scorable: enough to find the pattern, short enough to read.
_EXAMPLES = 3


class ScoreError(RuntimeError):
    """The scorer raised on a generated response (and ``--on-score-error raise`` stops the run)."""


ScoreFn = Callable[..., Any]

_BOTS = "bots_verl.rewards:compute_score"
_VERL = "verl.utils.reward_score:default_compute_score"


@dataclass
class Scorer:
    """A named scoring function with the success rule applied.

    Attributes:
        name: ``module:function`` of the underlying function; recorded with every result.
        fn: ``fn(data_source, solution_str, ground_truth, extra_info=None)`` returning a float or a dict with
            ``score`` and optionally ``acc``.
        rule: How a scored response counts as a success (the trainer's rule).
    """

    name: str
    fn: ScoreFn
    rule: SuccessRule = SuccessRule()

    def score(self, task: Task, response: str) -> tuple[float, float]:
        """Score one response.

        Args:
            task: The task the response answers.
            response: The generated text (without the prompt).

        Returns:
            ``(success in [0, 1], score)``.

        Raises:
            ValueError: if the reward cannot be mapped to a success (see :class:`SuccessRule`).
        """
        out = self.fn(task.data_source, response, task.ground_truth, extra_info=task.extra_info)
        if isinstance(out, dict):
            if "score" not in out:
                # verl's reward managers require 'score' too; reading a missing one as 0.0 would invent a failure.
                raise ValueError(f"the reward dict has no 'score' (keys: {sorted(out)})")
            score = float(out["score"])
            return self.rule(score, out), score
        score = float(out)
        return self.rule(score, None), score


def _load(spec: str) -> ScoreFn:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"scorer must be 'auto', 'bots', 'verl' or 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module), attr)


def resolve_scorer(spec: str = "auto", rule: SuccessRule | None = None) -> Scorer:
    """Find the scoring function.

    Args:
        spec: ``auto`` (bots_verl.rewards, else verl's default with a warning), ``bots``, ``verl``, or
            ``module:function`` for a custom reward (the same one given to verl's ``custom_reward_function``).
        rule: The success rule (default: ``SuccessRule()``, the trainer's default).

    Returns:
        The scorer.

    Raises:
        ImportError: If the requested module cannot be imported (``auto`` only raises if neither can).
    """
    rule = rule or SuccessRule()
    if spec == "auto":
        try:
            return Scorer(_BOTS, _load(_BOTS), rule)
        except (ImportError, AttributeError) as err:
            logger.warning("bots_verl.rewards.compute_score unavailable (%s); scoring with verl's default", err)
            return Scorer(_VERL, _load(_VERL), rule)
    spec = {"bots": _BOTS, "verl": _VERL}.get(spec, spec)
    return Scorer(spec, _load(spec), rule)


def check_scorable(scorer: Scorer, tasks: list[Task]) -> None:
    """Score an empty response for every task, so that a bad row fails before generation, not hours into it.

    Every reward in :mod:`bots_verl.rewards` parses and checks the ground truth before it looks at the response, and
    an empty string runs no code (code scorers find no code block in it), so this validates each row's data source
    and ground truth cheaply (3-10 µs a row on a 2-core VM, about 0.2 s for 54k math rows).

    Args:
        scorer: The scorer.
        tasks: All tasks to be evaluated.

    Raises:
        DataError: With the number of failing rows per data source and the first few rows and errors of each.
    """
    failures: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for task in tasks:
        try:
            scorer.score(task, "")
        except Exception as err:  # noqa: BLE001 - any failure here means this row cannot be scored
            counts[task.data_source] = counts.get(task.data_source, 0) + 1
            examples = failures.setdefault(task.data_source, [])
            if len(examples) < _EXAMPLES:
                examples.append(f"row {task.row} (id {task.task_id!r}): {type(err).__name__}: {err}")
    if failures:
        parts = [
            f"data_source {source!r}: {counts[source]} rows, e.g. " + "; ".join(examples)
            for source, examples in failures.items()
        ]
        total = sum(counts.values())
        raise DataError(
            f"scorer {scorer.name} rejects {total} of {len(tasks)} rows before any generation: " + " | ".join(parts)
        )
