"""The registry of the config checks a layer above ``config/`` owns (``bots_verl.config.checks``)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from bots_verl.config import checks


def test_registered_checks_run_in_order_once_each_and_their_refusal_stands(monkeypatch):
    monkeypatch.setattr(checks, "_CHECKS", {})
    seen = []

    def first(config):
        seen.append(("first", config.x))

    def refuse(config):
        seen.append(("refuse", config.x))
        if config.x < 0:
            raise ValueError(f"x={config.x} must not be negative")

    assert checks.register_config_check(first) is first
    checks.register_config_check(refuse)
    checks.register_config_check(first)  # a module imported twice registers nothing new
    assert checks.registered_checks() == tuple(f"{__name__}.{f.__qualname__}" for f in (first, refuse))
    checks.run_config_checks(OmegaConf.create({"x": 1}))
    assert seen == [("first", 1), ("refuse", 1)]
    with pytest.raises(ValueError, match="x=-1 must not be negative"):
        checks.run_config_checks(OmegaConf.create({"x": -1}))
