"""Fixtures for the analysis tests; the log writers live in ``analysis_fixtures.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_fixtures import CURVES, ETR, ROLLOUTS, write_run


@pytest.fixture
def known(tmp_path: Path) -> Path:
    """The known-answer runs (see ``analysis_fixtures``); returns their root."""
    root = tmp_path / "runs"
    for (method, seed), curve in CURVES.items():
        write_run(root, method, seed, curve, rollouts=ROLLOUTS[method], etr=ETR[(method, seed)])
    return root
