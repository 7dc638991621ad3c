"""Reward functions for GURU's math, code and logic domains, behind one verl-compatible dispatcher.

Use it in verl with ``reward.custom_reward_function.path=pkg://bots_verl.rewards`` and
``reward.custom_reward_function.name=compute_score``. Extra keyword arguments go in
``reward.custom_reward_function.reward_kwargs``: ``timeout_s`` (per answer, math and code), ``memory_limit_mb``,
``isolation`` and ``sandbox_fusion_url`` (code), ``partial_credit`` (zebra).

The scorers are safe to call from any thread (verl calls them from a thread pool) and bounded in time there: code
runs in bubblewrap sandboxes (:mod:`bots_verl.rewards.sandbox`), symbolic math checks in worker processes that are
killed when they overrun (:mod:`bots_verl.rewards.math_verifier`), and answer extraction is linear in the length of
the response.

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

Every scorer returns a dict with at least ``score`` (float) and ``acc`` (bool; BOTS's success bit). Malformed or
hostile model output is a failure (score 0), never an exception; an unknown ``data_source`` or a malformed ground
truth is a configuration/data error and raises ``ValueError``, and a missing sandbox or math-verify raises too
(:class:`~bots_verl.rewards.sandbox.SandboxUnavailableError`, ``ImportError``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["compute_score", "domain_of", "supports"]

_MATH_PREFIXES = ("math", "aime", "amc", "huggingfaceh4/math-500", "lighteval/math", "digitallearninggmbh/math")
_ARC_PREFIXES = ("simulation__arcagi", "simulation__barc", "logic__arcagi", "logic__barc")

# data_source prefix(es) (lower case) -> (domain, "module:function"); the first match wins. Adding a scorer is one line
# here; it is called as ``scorer(solution_str, ground_truth, extra_info=..., **reward_kwargs)`` and must ignore
# options meant for other domains.
_ROUTES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (_MATH_PREFIXES, "math", "bots_verl.rewards.math_reward:compute_score"),
    (("codegen",), "code", "bots_verl.rewards.code_reward:compute_score"),
    (("logic__zebra_puzzle",), "logic", "bots_verl.rewards.logic_reward:score_zebra"),
    (("logic__ordering_puzzle",), "logic", "bots_verl.rewards.logic_reward:score_ordering"),
    (("logic__graph",), "logic", "bots_verl.rewards.logic_reward:score_graph"),
    (_ARC_PREFIXES, "logic", "bots_verl.rewards.logic_reward:score_arc"),
    (("toy__arith",), "arith", "bots_verl.rewards.arith_reward:compute_score"),
)


def _route(data_source: str) -> tuple[str, str] | None:
    """(domain, "module:function") for a data source; ``None`` if unknown."""
    name = data_source.lower()
    for prefixes, domain, target in _ROUTES:
        if name.startswith(prefixes):
            return domain, target
    return None


def _require_route(data_source: Any) -> tuple[str, str]:
    """:func:`_route`, raising ``ValueError`` for a data source without a scorer (or one that is not a string)."""
    route = _route(data_source) if isinstance(data_source, str) else None
    if route is None:
        raise ValueError(f"no BOTS reward for data_source {data_source!r}")
    return route


@functools.cache
def _scorer(target: str) -> Callable[..., dict[str, Any]]:
    """Import a scorer on first use (math-verify and verl's sandbox client are heavy)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


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
        **kwargs: scorer options (``timeout_s``, ``memory_limit_mb``, ``isolation``, ``sandbox_fusion_url``,
            ``partial_credit``); options meant for another domain are ignored.

    Returns:
        ``{"score": float, "acc": bool, ...}``.

    Raises:
        ValueError: unknown ``data_source`` or malformed ground truth.
        SandboxUnavailableError: code isolation does not work here (see :mod:`bots_verl.rewards.sandbox`).
        ImportError: math-verify is missing.
    """
    _, target = _require_route(data_source)
    return _scorer(target)(solution_str, ground_truth, extra_info=extra_info, **kwargs)
