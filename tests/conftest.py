"""Shared pytest setup: Ray on the loopback address; GPU-marked tests are skipped without a CUDA GPU (CI has none)."""

from __future__ import annotations

import pytest

from bots_verl.verl_cpu.cluster import use_loopback

# every Ray cluster the tests start (in this process or in the processes they spawn) listens on 127.0.0.1 only
use_loopback()


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
