"""What ``bots.run_log.method`` may say about a run: the label is derived, or checked against the config it runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from bots_verl.config.settings import resolve_method_label
from bots_verl.core.settings import SelectorSettings, effective_hparams

PAPER_BOTS = {"lam": 0.1, "rho": 0.1, "target": 0.5, "selection": "thompson", "evidence": "interpolation"}


def _label(label: str | None, selector: str, hparams: Mapping[str, Any]) -> str:
    return resolve_method_label(label, SelectorSettings(selector, hparams))


def test_derived_labels_name_the_config() -> None:
    assert _label(None, "bots", {}) == "bots"
    assert _label(None, "bots", {"lam": 0, "rho": 0, "evidence": "none"}) == "bots_mopps"
    assert _label(None, "bots", {"lam": 1, "rho": 1.0, "selection": "greedy"}) == "bots_dots"
    assert _label(None, "bots", {"rho": 0.05}) == "bots_rho0.05"
    assert _label(None, "bots", {"selection": "greedy"}) == "bots_greedy"
    assert _label(None, "random", {}) == "random"
    # no known label: the selector and what differs from its defaults
    assert _label(None, "bots", {"rho": 0.05, "lam": 0.2}) == "bots+lam=0.2,rho=0.05"


def test_a_label_that_disagrees_with_the_config_is_refused() -> None:
    assert _label("bots", "bots", PAPER_BOTS) == "bots"
    assert _label("bots_mopps", "bots", {"lam": 0.0, "rho": 0.0, "evidence": "none"}) == "bots_mopps"
    with pytest.raises(ValueError, match=r"method='bots_mopps' .*lam: label means 0.0, config has 0.1"):
        resolve_method_label(
            "bots_mopps", SelectorSettings("bots", {"rho": 0.0, "evidence": "none"})
        )  # lambda left at 0.1
    with pytest.raises(ValueError, match=r"selector: label means 'bots', config has 'mopps'"):
        _label("bots", "mopps", {})
    # a registered selector's name means that selector at its defaults
    assert _label("mopps", "mopps", {}) == "mopps"
    with pytest.raises(ValueError, match=r"method='implicit_only' .*selector: label means 'implicit_only'"):
        _label("implicit_only", "bots", {"rho": 1.0})
    with pytest.raises(ValueError, match="sweep label"):
        _label("bots_rho2", "bots", {})
    # a free-form label claims nothing and is kept
    assert _label("my_experiment", "bots", {"rho": 0.3}) == "my_experiment"


def test_effective_hparams_include_the_defaults() -> None:
    hp = effective_hparams("bots", {"rho": 0.2})
    assert hp["rho"] == 0.2 and hp["lam"] == 0.1 and hp["selection"] == "thompson" and "gamma" in hp
