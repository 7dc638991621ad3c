"""Shared pytest setup: Ray on the loopback address; GPU-marked tests are skipped without a CUDA GPU (CI has none)."""

from __future__ import annotations

import os

import pytest

from bots_verl.verl_cpu.cluster import LOOPBACK_ENV

# every Ray cluster the tests start (in this process or in the processes they spawn) listens on 127.0.0.1 only; set
# before anything imports ray, which reads it once
for _key, _value in LOOPBACK_ENV.items():
    os.environ.setdefault(_key, _value)


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
