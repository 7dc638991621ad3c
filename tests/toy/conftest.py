"""Shared toy fixtures: the ``ci`` build, prepared once per session for the tests that train on it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ci_data(tmp_path_factory) -> Path:
    """``python -m bots_verl.toy.prepare --profile ci --jobs 2`` (every stage, calibration included) in a fresh
    directory, through the command line (``test_prepare.py`` checks what it built).

    Read-only for its users: each writes its runs beside it, under ``<parent>/runs/<arm>_s0``, or copies it.
    """
    from bots_verl.toy.prepare import main

    out = tmp_path_factory.mktemp("toy_ci") / "data"
    # two jobs: warm-ups in spawned worker processes, the reference collections as `python -m reference_eval` children
    assert main(["--out", str(out), "--profile", "ci", "--jobs", "2", "--seed", "0"]) == 0
    return out
