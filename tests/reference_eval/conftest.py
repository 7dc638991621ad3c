"""Fixtures for the reference_eval tests (helpers live in reference_eval_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_eval_fixtures import build_tiny_model, make_rows, write_rows


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def backend(tiny_model: Path):
    from reference_eval.backends import make_backend

    return make_backend("transformers", str(tiny_model), device="cpu")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_rows(make_rows(), tmp_path / "train.parquet")
