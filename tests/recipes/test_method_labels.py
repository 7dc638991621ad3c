"""What ``bots.run_log.method`` may say about a run: the label is derived, or checked against the config it runs."""

from __future__ import annotations

import pytest

from bots_verl.config.bots_config import effective_hparams, resolve_method_label

PAPER_BOTS = {"lam": 0.1, "rho": 0.1, "target": 0.5, "selection": "thompson", "evidence": "interpolation"}


def test_derived_labels_name_the_config() -> None:
    assert resolve_method_label(None, "bots", {}) == "bots"
    assert resolve_method_label(None, "bots", {"lam": 0, "rho": 0, "evidence": "none"}) == "bots_mopps"
    assert resolve_method_label(None, "bots", {"lam": 1, "rho": 1.0, "selection": "greedy"}) == "bots_dots"
    assert resolve_method_label(None, "bots", {"rho": 0.05}) == "bots_rho0.05"
    assert resolve_method_label(None, "bots", {"selection": "greedy"}) == "bots_greedy"
    assert resolve_method_label(None, "random", {}) == "random"
    # no known label: the selector and what differs from its defaults
    assert resolve_method_label(None, "bots", {"rho": 0.05, "lam": 0.2}) == "bots+lam=0.2,rho=0.05"


def test_a_label_that_disagrees_with_the_config_is_refused() -> None:
    assert resolve_method_label("bots", "bots", PAPER_BOTS) == "bots"
    assert resolve_method_label("bots_mopps", "bots", {"lam": 0.0, "rho": 0.0, "evidence": "none"}) == "bots_mopps"
    with pytest.raises(ValueError, match=r"method='bots_mopps' .*lam: label means 0.0, config has 0.1"):
        resolve_method_label("bots_mopps", "bots", {"rho": 0.0, "evidence": "none"})  # lambda left at 0.1
    with pytest.raises(ValueError, match=r"selector: label means 'bots', config has 'mopps'"):
        resolve_method_label("bots", "mopps", {})
    # a registered selector's name means that selector at its defaults
    assert resolve_method_label("mopps", "mopps", {}) == "mopps"
    with pytest.raises(ValueError, match=r"method='implicit_only' .*selector: label means 'implicit_only'"):
        resolve_method_label("implicit_only", "bots", {"rho": 1.0})
    with pytest.raises(ValueError, match="sweep label"):
        resolve_method_label("bots_rho2", "bots", {})
    # a free-form label claims nothing and is kept
    assert resolve_method_label("my_experiment", "bots", {"rho": 0.3}) == "my_experiment"


def test_effective_hparams_include_the_defaults() -> None:
    hp = effective_hparams("bots", {"rho": 0.2})
    assert hp["rho"] == 0.2 and hp["lam"] == 0.1 and hp["selection"] == "thompson" and "gamma" in hp
