"""A run's selector settings are checked without building a selector (issue 61: "No selector is built to validate").

:meth:`Selector.check_hparams <bots_verl.core.selector_base.Selector.check_hparams>` makes every check of the
constructor that needs no pool, through the same functions: a value it refuses, the constructor refuses with the same
exception and message. :meth:`SelectorSettings.check <bots_verl.core.settings.SelectorSettings.check>`, what the
driver runs before Ray starts, calls it and builds nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bots_verl.core import EVIDENCE, SELECTORS
from bots_verl.core.paper.posterior import BetaPosterior
from bots_verl.core.registry import GROUPS
from bots_verl.core.selector_base import Selector
from bots_verl.core.settings import SelectorSettings
from bots_verl.core.task_graph import TaskGraph

N = 20

# (selector, hyperparameters, reference columns, task embeddings given, seed): refused, whether at config time or
# when built. Gathered from the tests of each constructor (test_validation, test_dps, test_greso, test_warm_start,
# test_neighbour_evidence, test_pass_rate_oracle, test_task_graph, test_registry, test_bots_config).
BAD: list[tuple[str, dict[str, Any], int, bool, Any]] = [
    # names, nulls, booleans and quoted numbers (the base: effective_hparams)
    ("bots", {"lamda": 0.1}, 2, False, 0),
    ("bots", {"tau": 0.1}, 2, False, 0),
    ("bots", {"prior": "reference"}, 2, False, 0),
    ("bots", {"gamma": None}, 2, False, 0),
    ("bots", {"lam": True}, 2, False, 0),
    ("bots", {"lam": "0.1"}, 2, False, 0),
    ("bots", {"evidence": "magic"}, 2, False, 0),
    ("bots", {"selection": "magic"}, 2, False, 0),
    ("bots", {"graph_k": 8}, 2, True, 0),
    ("random", {"lam": 0.3}, 0, False, 0),
    ("random", {"graph_k": 8}, 0, True, 0),
    ("sequential", {"target": 0.5}, 0, False, 0),
    ("mopps", {"rho": 0.5}, 0, False, 0),
    ("implicit_only", {"rho": 0.5}, 2, False, 0),
    ("bots_noref", {"evidence": "none"}, 0, True, 0),
    ("bots_partial_ref", {"reference_nan": "error"}, 2, True, 0),
    # the seed and what every selector reads
    ("random", {}, 0, False, -1),
    ("random", {}, 0, False, 1.5),
    ("random", {}, 0, False, True),
    ("greso", {}, 0, False, "3"),
    ("sequential", {}, 0, False, np.float64(2.0)),
    ("bots", {"reference_nan": "bogus"}, 2, False, 0),
    ("random", {"reference_nan": "bogus"}, 0, False, 0),
    # reference columns and task embeddings
    ("offline_easy2hard", {}, 0, False, 0),
    ("bots_partial_ref", {}, 0, True, 0),
    ("bots", {}, 0, False, 0),
    ("bots", {}, 1, False, 0),
    ("bots", {}, 3, False, 0),
    ("bots_noref", {}, 0, False, 0),
    ("bots", {"evidence": "neighbours"}, 2, False, 0),
    ("bots_noref", {"graph_k": 0}, 0, True, 0),
    ("bots_noref", {"graph_k": -3}, 0, True, 0),
    ("bots_noref", {"graph_k": 2.5}, 0, True, 0),
    # the Beta selectors' rates, rule, implicit scale, prior
    ("bots", {"lam": 1.5}, 2, False, 0),
    ("bots", {"rho": -0.1}, 2, False, 0),
    ("bots", {"target": 2.0}, 2, False, 0),
    ("mopps", {"lam": float("nan")}, 0, False, 0),
    ("bots", {"selection": "softmax", "tau": 0}, 2, False, 0),
    ("mopps", {"selection": "softmax", "tau": -1.0}, 0, False, 0),
    ("bots", {"implicit_scale": -1}, 2, False, 0),
    ("bots", {"implicit_scale": 1e308}, 2, False, 0),
    ("bots", {"alpha0": 0}, 2, False, 0),
    ("mopps", {"beta0": -1.0}, 0, False, 0),
    ("mopps", {"alpha0": float("inf")}, 0, False, 0),
    # the evidence plug-ins
    ("bots", {"gamma": 1.0}, 2, False, 0),
    ("bots", {"degenerate_tol": 0.0}, 2, False, 0),
    ("bots_noref", {"shrink": 0}, 0, True, 0),
    ("bots_noref", {"spread": -1}, 0, True, 0),
    ("bots_noref", {"forget": 1.0}, 0, True, 0),
    ("bots_noref", {"momentum": -0.5}, 0, True, 0),
    # the warm start
    ("bots_warm", {"warm_start_weight": -1.0}, 2, False, 0),
    ("bots_warm", {"warm_start_weight": float("nan")}, 2, False, 0),
    ("bots_warm", {"warm_start_weight": 1e12}, 2, False, 0),
    ("bots_warm", {"warm_start_mu": float("inf")}, 2, False, 0),
    ("bots_warm", {}, 0, False, 0),
    ("mopps", {"warm_start_weight": 4.0}, 0, False, 0),
    # greso
    ("greso", {"p_min": 0.6, "p_max": 0.4}, 0, False, 0),
    ("greso", {"p_min": 0.0}, 0, False, 0),
    ("greso", {"p_easy": 0.99}, 0, False, 0),
    ("greso", {"p_hard": 0.01}, 0, False, 0),
    ("greso", {"p_easy": 1.5}, 0, False, 0),
    ("greso", {"target_zero_variance": 1.2}, 0, False, 0),
    ("greso", {"easy_share": -0.1}, 0, False, 0),
    ("greso", {"p_step": float("nan")}, 0, False, 0),
    ("greso", {"keep_floor": 2.0}, 0, False, 0),
    ("greso", {"easy_threshold": 0.5, "hard_threshold": 0.5}, 0, False, 0),
    ("greso", {"hard_threshold": -0.1}, 0, False, 0),
    ("greso", {"skip": 0.5}, 0, False, 0),
    # dps
    ("dps", {"decay": 1.5}, 0, False, 0),
    ("dps", {"decay": -0.1}, 0, False, 0),
    ("dps", {"candidate_ratio": 0.5}, 0, False, 0),
    ("dps", {"candidate_ratio": float("inf")}, 0, False, 0),
    ("dps", {"candidate_ratio": "32"}, 0, False, 0),
    ("dps", {"prior_alpha": 0.0}, 0, False, 0),
    ("dps", {"prior_alpha": float("nan")}, 0, False, 0),
    ("dps", {"prior_alpha": True}, 0, False, 0),
    ("dps", {"prior_alpha": "local"}, 0, False, 0),
    ("dps", {"prior_alpha": "stay"}, 0, False, 0),
    ("dps", {"prior_pi": "1"}, 0, False, 0),
    ("dps", {"entropy_weight": -1.0}, 0, False, 0),
    ("dps", {"hmm_transition_decay_ratio": 0.7}, 0, False, 0),
    # pass_rate_oracle
    ("pass_rate_oracle", {"truth_source": "no colon"}, 0, False, 0),
    ("pass_rate_oracle", {"truth_args": {"x": 1}}, 0, False, 0),
    ("pass_rate_oracle", {"truth_source": "a:b", "truth_args": [1]}, 0, False, 0),
    ("pass_rate_oracle", {"target": 1.5}, 0, False, 0),
]


def _inputs(references: int, embeddings: bool) -> dict[str, Any]:
    """A pool's reference columns and task embeddings, valid in themselves (what refuses a case is its settings)."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"reference_pass_rates": rng.uniform(0.1, 0.9, (N, references)) if references else None}
    if embeddings:
        out["task_embeddings"] = rng.normal(size=(N, 4))
    return out


def _raised(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises((TypeError, ValueError)) as refused:
        call()
    return refused.type, str(refused.value)


def test_the_cases_cover_every_registered_selector():
    assert {case[0] for case in BAD} == {name for name in SELECTORS if SELECTORS.group_of(name) in GROUPS}


@pytest.mark.parametrize(("name", "hparams", "references", "embeddings", "seed"), BAD)
def test_the_class_check_and_the_constructor_refuse_alike(name, hparams, references, embeddings, seed):
    cls = SELECTORS.lookup(name)
    checked = _raised(lambda: cls.check_hparams(hparams, num_references=references, embeddings=embeddings, seed=seed))
    built = _raised(lambda: cls(N, seed=seed, **_inputs(references, embeddings), **hparams))
    assert checked == built


def _documented_settings() -> list[tuple[str, dict[str, Any]]]:
    """Every registered selector with nothing set and with every hyperparameter set to its declared default, and the
    documented variants the recipes and the README use."""
    cases = [(name, {}) for name in sorted(SELECTORS)]
    cases += [(name, SELECTORS.lookup(name).effective_hparams({})) for name in sorted(SELECTORS)]
    return cases + [
        ("bots", {"selection": "softmax", "tau": 0.05}),
        ("bots", {"selection": "greedy", "evidence": "none"}),
        ("bots", {"evidence": "neighbours", "graph_k": 8}),
        ("bots_noref", {"graph_k": 4, "rho": 0.1}),
        ("bots_partial_ref", {"graph_k": 8}),
        ("mopps", {"lam": 0.3}),
        ("pass_rate_oracle", {"truth_source": "bots_verl.toy.rollout_truth:RolloutServerTruth"}),
    ]


@pytest.fixture
def nothing_is_built(monkeypatch):
    """Every selector's, plug-in's, posterior's and task graph's construction raises."""

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__} was built")

    def refuse_graph(cls, *args, **kwargs):
        raise AssertionError("a task graph was built")

    for cls in {Selector, *SELECTORS.values(), *EVIDENCE.values(), BetaPosterior}:
        monkeypatch.setattr(cls, "__init__", refuse)
    monkeypatch.setattr(TaskGraph, "from_embeddings", classmethod(refuse_graph))


@pytest.mark.parametrize(("name", "hparams"), _documented_settings())
def test_the_settings_check_builds_no_selector(nothing_is_built, name, hparams):
    settings = SelectorSettings(name, hparams, seed=3)
    settings.check(2, True)
    with pytest.raises(AssertionError, match="was built"):  # the patch holds: building is what it refuses
        settings.build(N, reference_pass_rates=np.full((N, 2), 0.5))


def test_the_settings_check_refuses_bad_values_without_building(nothing_is_built):
    with pytest.raises(ValueError, match=r"lam must lie in \[0, 1\], got 1.5"):
        SelectorSettings("bots", {"lam": 1.5}).check(2, False)
    with pytest.raises(ValueError, match="needs task_embeddings .* evidence='neighbours'"):
        SelectorSettings("bots_noref").check(0, False)
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        SelectorSettings("random", seed=-1).check(0, False)


def test_what_needs_the_pool_stays_with_the_constructor():
    """graph_k against the pool's size: the settings pass, a pool of N tasks refuses more than N - 1 neighbours (the
    settings check used to build a stand-in pool of 17 tasks and refused any graph_k of 4096 or more)."""
    SelectorSettings("bots_noref", {"graph_k": 5000}).check(0, True)
    with pytest.raises(ValueError, match=rf"graph_k must be an integer in \[1, {N - 1}\] \(fewer than the {N} tasks\)"):
        SelectorSettings("bots_noref", {"graph_k": N}).build(N, task_embeddings=_inputs(0, True)["task_embeddings"])
