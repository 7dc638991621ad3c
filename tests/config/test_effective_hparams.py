"""The hyperparameters a run records (its fingerprint, ``meta.json``) come from the selectors' declared tables without
building a selector, and are exactly what they were when they were read from built selectors: checkpoints and the
archived toy runs compare them on resume."""

from __future__ import annotations

import pytest

from bots_verl.core import SELECTORS, Selector, build_selector
from bots_verl.core.settings import effective_hparams
from bots_verl.integration.safety.fingerprint import run_fingerprint

_BOTS = {
    "lam": 0.1,
    "rho": 0.1,
    "target": 0.5,
    "evidence": "interpolation",
    "implicit_scale": None,
    "selection": "thompson",
    "alpha0": 1.0,
    "beta0": 1.0,
    "warm_start_weight": 0.0,
    "warm_start_mu": 0.0,
    "gamma": 0.9,
    "degenerate_tol": 0.001,
}
# computed by the code before issue 50 (a selector built on a stand-in pool, then its .hparams), pinned here
PINNED = {
    "bots": _BOTS,
    "bots_warm": {**_BOTS, "warm_start_weight": 16.0},
    "mopps": {
        **{k: v for k, v in _BOTS.items() if k not in ("gamma", "degenerate_tol")},
        "rho": 0.0,
        "evidence": "none",
    },
    "bots_noref": {
        **{k: v for k, v in _BOTS.items() if k not in ("gamma", "degenerate_tol")},
        "rho": 0.3,
        "evidence": "neighbours",
        "momentum": 0.9,
        "forget": 0.02,
        "shrink": 0.5,
        "spread": 1.0,
    },
}


@pytest.mark.parametrize("selector", sorted(PINNED))
def test_the_recorded_hyperparameters_are_unchanged(selector: str) -> None:
    got = effective_hparams(selector, {})
    assert got == PINNED[selector]
    assert list(got) == list(PINNED[selector])  # the same order too, so a written fingerprint reads the same
    fingerprint = run_fingerprint(
        task_ids=None,
        prompts_sha256=None,
        reference_columns=[],
        reference=None,
        selector=selector,
        hparams=got,
        success_rule="auto",
        success_threshold=0.0,
    )
    assert fingerprint["selector"] == {"name": selector, "hparams": PINNED[selector]}


def test_set_values_replace_the_selectors_own_and_nothing_else() -> None:
    assert effective_hparams("mopps", {"lam": 0.2}) == {**PINNED["mopps"], "lam": 0.2}
    assert effective_hparams("bots", {"evidence": "neighbours"})["momentum"] == 0.9  # the plug-in's own defaults
    assert "gamma" not in effective_hparams("bots", {"evidence": "neighbours"})


@pytest.mark.parametrize(
    "selector, hparams, refs",
    [("bots", {}, 2), ("bots_warm", {"lam": 0.2}, 2), ("mopps", {}, 0), ("pass_rate_oracle", {}, 0), ("dps", {}, 0)],
)
def test_the_tables_agree_with_a_built_selector(selector: str, hparams: dict, refs: int) -> None:
    ref = [[0.2, 0.6]] * 4 if refs else None
    assert (
        effective_hparams(selector, hparams) == build_selector(selector, 4, reference_pass_rates=ref, **hparams).hparams
    )


def test_reading_them_builds_no_selector(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a selector was built")

    monkeypatch.setattr(Selector, "__init__", refuse)
    for name in SELECTORS:
        effective_hparams(name, {})
    assert effective_hparams("bots", {"rho": 0.2})["rho"] == 0.2


@pytest.mark.parametrize(
    "selector, hparams, message",
    [
        ("bots", {"lamb": 0.1}, "unknown hyperparameter 'lamb'"),
        ("random", {"lam": 0.1}, "unknown hyperparameter 'lam'"),
        ("mopps", {"rho": 0.1}, "selector 'mopps' is defined by rho=0.0"),
        ("bots", {"prior": "reference"}, "hyperparameter 'prior' of selector 'bots' was removed"),
        ("bogus", {}, "unknown selector 'bogus'"),
    ],
)
def test_unknown_retired_and_fixed_names_are_refused_naming_the_key(selector: str, hparams: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        effective_hparams(selector, hparams)
