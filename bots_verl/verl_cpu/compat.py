"""Two small fixes that verl 0.9.1 needs to train without an accelerator.

1. **Process-group backend.** ``verl.utils.distributed.initialize_global_process_group_ray`` defaults to
   ``f"cpu:gloo,{device}:{backend}"``, which on the cpu platform reads ``"cpu:gloo,cpu:gloo"`` and torch rejects it
   (``Duplicate device type cpu in backend string``). The wrapper passes plain ``"gloo"`` when the caller gave no
   backend; callers that name one (the checkpoint engine passes ``"cpu:gloo"``) are unchanged. A one-process group
   whose rendezvous port was taken between verl choosing it (``get_free_port`` on the driver) and the worker binding
   it (``EADDRINUSE``: another run or Ray took it meanwhile) retries once on a fresh port: no other rank reads
   ``MASTER_PORT``, so the port is the worker's own to change. Groups of several ranks re-raise.
2. **Reference-model offload.** verl's FSDP2 engine offloads forward-only (reference) models with
   ``CPUOffloadPolicy(pin_memory=True)``; pinning needs an accelerator (``RuntimeError: Cannot access accelerator
   device when none is available``). On CPU the engine gets a policy that never pins (offloading to the memory the
   model already lives in costs nothing).

Both are applied by :mod:`.verl_registrations` only when ``VERL_PLATFORM=cpu`` (pinned in
:mod:`bots_verl.integration.safety.verl_pins`).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)

CPU_BACKEND = "gloo"


def gloo_process_group(distributed: ModuleType) -> None:
    """Make ``initialize_global_process_group_ray`` default to the plain gloo backend (idempotent).

    Args:
        distributed: the ``verl.utils.distributed`` module.
    """
    original = distributed.initialize_global_process_group_ray
    if getattr(original, "_bots_cpu_fix", False):
        return

    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second: Any = None, backend: str | None = None) -> None:
        try:
            return original(timeout_second=timeout_second, backend=backend or CPU_BACKEND)
        except RuntimeError as err:  # torch's DistNetworkError is a RuntimeError
            if "EADDRINUSE" not in str(err) or os.environ.get("WORLD_SIZE", "1") != "1":
                raise
            port = _fresh_port(os.environ.get("MASTER_ADDR", "127.0.0.1"))
            logger.warning(
                "process group: port %s was taken before it was bound; retrying on %d",
                os.environ.get("MASTER_PORT"),
                port,
            )
            os.environ["MASTER_PORT"] = str(port)
            return original(timeout_second=timeout_second, backend=backend or CPU_BACKEND)

    initialize_global_process_group_ray._bots_cpu_fix = True
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def _fresh_port(address: str) -> int:
    """A port the OS reports free on ``address`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def unpinned_offload_policy(transformer_impl: ModuleType) -> None:
    """Give verl's FSDP engine a ``CPUOffloadPolicy`` that never pins memory (idempotent).

    Args:
        transformer_impl: the ``verl.workers.engine.fsdp.transformer_impl`` module.
    """
    policy = transformer_impl.CPUOffloadPolicy
    if policy is None or getattr(policy, "_bots_cpu_fix", False):
        return

    class UnpinnedCPUOffloadPolicy(policy):
        """``CPUOffloadPolicy`` with ``pin_memory`` forced off (pinning needs an accelerator)."""

        _bots_cpu_fix = True

        def __init__(self, pin_memory: bool = True) -> None:
            super().__init__(pin_memory=False)

    transformer_impl.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy
