"""Fixtures of the CPU-backend tests: the toy model built locally, and a local Ray for the rollout server."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory):
    """The toy Llama and tokenizer (bots_verl.verl_cpu.addition_task), written once per session."""
    from bots_verl.verl_cpu.addition_task import build_model

    return build_model(tmp_path_factory.mktemp("toy_model"))


@pytest.fixture(scope="session")
def local_ray():
    """A local Ray instance (logical CPUs; the server actor takes none)."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(
            address="local", num_cpus=4, include_dashboard=False, namespace="bots_verl_cpu_tests", log_to_driver=False
        )
    yield
    if started:
        ray.shutdown()
