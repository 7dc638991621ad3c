"""Reward functions for GURU's math, code and logic domains, behind one verl-compatible dispatcher.

Use it in verl with ``reward.custom_reward_function.path=pkg://bots_verl.rewards`` and
``reward.custom_reward_function.name=compute_score``. Extra keyword arguments (``timeout_s``, ``memory_limit_mb``,
``sandbox_fusion_url`` for code; ``partial_credit`` for zebra) go in ``reward.custom_reward_function.reward_kwargs``.

Importing this package is cheap (standard library only); math-verify and verl's sandbox client are imported lazily by
the scorers that need them, so ``reference_eval`` can score samples without importing torch or verl.

Routing by ``data_source`` (GURU's names, guru.md §1; ARC/BARC rows keep the ``simulation__`` prefix even in the
``logic__`` files):

============================================  ===========================================
prefix                                        scorer
============================================  ===========================================
``math``, ``aime``, ``amc``, MATH-500 names   :func:`bots_verl.rewards.math_reward.compute_score`
``codegen``                                   :func:`bots_verl.rewards.code_reward.compute_score`
``logic__zebra_puzzle``                       :func:`bots_verl.rewards.logic_reward.score_zebra`
``logic__ordering_puzzle``                    :func:`bots_verl.rewards.logic_reward.score_ordering`
``logic__graph``                              :func:`bots_verl.rewards.logic_reward.score_graph`
``simulation__arcagi``/``barc``, ``logic__``  :func:`bots_verl.rewards.logic_reward.score_arc`
``toy__arith`` (the toy testbed)              :func:`bots_verl.rewards.arith_reward.compute_score`
============================================  ===========================================

Every scorer returns a dict with at least ``score`` (float) and ``acc`` (bool; BOTS's success bit). Malformed model
output is a failure (score 0), never an exception; an unknown ``data_source`` or a malformed ground truth is a
configuration/data error and raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["compute_score", "domain_of", "supports"]

_MATH_PREFIXES = ("math", "aime", "amc", "huggingfaceh4/math-500", "lighteval/math", "digitallearninggmbh/math")
_ARC_PREFIXES = ("simulation__arcagi", "simulation__barc", "logic__arcagi", "logic__barc")


def _route(data_source: str) -> tuple[str, Callable[..., dict[str, Any]]] | None:
    """(domain, scorer) for a data source, importing the scorer's module on first use; ``None`` if unknown."""
    name = data_source.lower()
    if name.startswith("toy__arith"):
        from bots_verl.rewards.arith_reward import compute_score as score_arith

        return "arith", score_arith
    if name.startswith(_MATH_PREFIXES):
        from bots_verl.rewards.math_reward import compute_score as score_math

        return "math", score_math
    if name.startswith("codegen"):
        from bots_verl.rewards.code_reward import compute_score as score_code

        return "code", score_code
    from bots_verl.rewards import logic_reward

    if name.startswith("logic__zebra_puzzle"):
        return "logic", logic_reward.score_zebra
    if name.startswith("logic__ordering_puzzle"):
        return "logic", logic_reward.score_ordering
    if name.startswith("logic__graph"):
        return "logic", logic_reward.score_graph
    if name.startswith(_ARC_PREFIXES):
        return "logic", logic_reward.score_arc
    return None


def _require_route(data_source: Any) -> tuple[str, Callable[..., dict[str, Any]]]:
    """:func:`_route`, raising ``ValueError`` for a data source without a scorer (or one that is not a string)."""
    route = _route(data_source) if isinstance(data_source, str) else None
    if route is None:
        raise ValueError(f"no BOTS reward for data_source {data_source!r}")
    return route


def supports(data_source: str) -> bool:
    """Whether :func:`compute_score` has a scorer for ``data_source``."""
    return isinstance(data_source, str) and _route(data_source) is not None


def domain_of(data_source: str) -> str:
    """``"math"``, ``"code"``, ``"logic"`` or ``"arith"`` (the toy testbed) for a supported data source.

    Raises:
        ValueError: for an unknown data source.
    """
    return _require_route(data_source)[0]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one response (verl ``custom_reward_function`` signature).

    Args:
        data_source: the row's ``data_source`` (selects the scorer).
        solution_str: the decoded response.
        ground_truth: ``reward_model.ground_truth``.
        extra_info: the row's ``extra_info`` (code reads ``prefix``).
        **kwargs: scorer options (``timeout_s``, ``memory_limit_mb``, ``sandbox_fusion_url``, ``partial_credit``);
            options meant for another domain are ignored.

    Returns:
        ``{"score": float, "acc": bool, ...}``.

    Raises:
        ValueError: unknown ``data_source`` or malformed ground truth.
    """
    domain, scorer = _require_route(data_source)
    if domain == "code":
        return scorer(solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if not isinstance(solution_str, str):
        solution_str = ""
    if scorer.__name__ == "score_zebra":
        return scorer(solution_str, ground_truth, partial_credit=bool(kwargs.get("partial_credit", False)))
    return scorer(solution_str, ground_truth)
