"""Shared toy fixtures: the ``ci`` build, prepared once per session for the tests that train on it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ci_data(tmp_path_factory) -> Path:
    """``python -m bots_verl.toy.prepare --profile ci`` (every stage, calibration included) in a fresh directory.

    Read-only for its users: each writes its runs beside it, under ``<parent>/runs/<arm>_s0``.
    """
    from bots_verl.toy.prepare import prepare

    out = tmp_path_factory.mktemp("toy_ci") / "data"
    prepare(out, seed=0, profile="ci", jobs=1)
    return out
