"""A stand-in for ``torch.cuda`` on a machine without an accelerator (the ``device_module`` of the cpu platform).

verl calls ``get_torch_device().<name>`` for memory bookkeeping, RNG state and synchronisation. ``torch.cpu`` has the
stream/event/device-count part; this module adds the rest with CPU meanings: memory queries report 0 (no device
memory is in use) except ``mem_get_info``, which reports the host's free/total RAM; ``empty_cache`` and friends do
nothing; the RNG state is the CPU generator's, so verl's checkpoints save and restore the generator that CPU training
actually uses. Any other name falls through to ``torch.cpu``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger(__name__)


def empty_cache() -> None:
    """No device cache on CPU."""


def ipc_collect() -> None:
    """No CUDA IPC on CPU."""


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """No device memory pool on CPU."""


def reset_peak_memory_stats(device: Any = None) -> None:
    """No device memory statistics on CPU."""


def memory_allocated(device: Any = None) -> int:
    """Device memory in use: none on CPU."""
    return 0


def max_memory_allocated(device: Any = None) -> int:
    """Peak device memory: none on CPU."""
    return 0


def memory_reserved(device: Any = None) -> int:
    """Device memory reserved by a caching allocator: none on CPU."""
    return 0


def max_memory_reserved(device: Any = None) -> int:
    """Peak reserved device memory: none on CPU."""
    return 0


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes of host memory (what a CPU engine can still use)."""
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def get_device_name(device: Any = None) -> str:
    """A readable device name."""
    return "cpu"


def get_rng_state(device: Any = None) -> torch.Tensor:
    """The CPU generator's state (the generator CPU training draws from)."""
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
    """Restore the CPU generator's state."""
    torch.set_rng_state(state)


def manual_seed(seed: int) -> None:
    """Seed the CPU generator."""
    torch.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the CPU generator (there is one)."""
    torch.manual_seed(seed)


def __getattr__(name: str) -> Any:
    # is_available, synchronize, current_device, set_device, device_count, Stream, stream, current_stream, Event
    return getattr(torch.cpu, name)
