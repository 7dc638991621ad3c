"""Shared CPU fixtures: one local Ray + TransferQueue per session, a local tokenizer, a parquet pool.

Helpers (hydra composition, pools, trajectories, running ``bots_verl.main``) live in ``integration_helpers.py``.
"""

from __future__ import annotations

import pytest
from integration_helpers import make_pool


@pytest.fixture(scope="session")
def ray_tq():
    """Local Ray (started first: tq.init() on a small box hangs when it starts Ray itself) and TransferQueue."""
    import ray
    import transfer_queue as tq

    ray.init(address="local", num_cpus=4, include_dashboard=False, namespace="bots_tests", log_to_driver=False)
    tq.init()
    yield
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory):
    """The CPU backend's toy model and tokenizer (bots_verl.verl_cpu.addition_task), built locally once per session."""
    from bots_verl.verl_cpu.addition_task import build_model

    return str(build_model(tmp_path_factory.mktemp("toy_model")))


@pytest.fixture(scope="session")
def tokenizer_dir(toy_model):
    """A local WordLevel tokenizer (the toy model's directory; no hub access)."""
    return toy_model


@pytest.fixture()
def pool(tmp_path):
    path = tmp_path / "train.parquet"
    make_pool(path, 40)
    return str(path)
