"""The CPU backend's process-group fix (``bots_verl.verl_cpu.compat.gloo_process_group``) with real torch.distributed:
a one-process group whose rendezvous port was taken before it was bound retries on a fresh port; a group of several
ranks re-raises, because the other ranks would still dial the old port."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def taken_port():
    """A port held by a listening socket, as another run's store would hold it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@pytest.fixture
def verl_distributed(monkeypatch):
    import verl.utils.distributed as distributed

    from bots_verl.verl_cpu.compat import gloo_process_group

    # the wrapper replaces the module attribute: monkeypatch puts verl's own function back afterwards
    monkeypatch.setattr(
        distributed, "initialize_global_process_group_ray", distributed.initialize_global_process_group_ray
    )
    gloo_process_group(distributed)
    return distributed


def _env(monkeypatch, port: int, world_size: int) -> None:
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.delenv("DIST_INIT_METHOD", raising=False)


def test_a_one_process_group_whose_port_was_taken_starts_on_a_fresh_port(verl_distributed, taken_port, monkeypatch):
    import os

    import torch.distributed as dist

    _env(monkeypatch, taken_port, 1)
    assert not dist.is_initialized()
    try:
        verl_distributed.initialize_global_process_group_ray(timeout_second=30)
        assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_backend() == "gloo"
        assert os.environ["MASTER_PORT"] != str(taken_port)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_a_group_of_several_ranks_reraises(verl_distributed, taken_port, monkeypatch):
    import torch.distributed as dist

    _env(monkeypatch, taken_port, 2)
    with pytest.raises(RuntimeError, match="EADDRINUSE"):
        verl_distributed.initialize_global_process_group_ray(timeout_second=30)
    assert not dist.is_initialized()
