"""The ``cpu`` platform for verl 0.9.1 (``VERL_PLATFORM=cpu``).

verl resolves its platform once per process (``verl.plugin.platform.get_platform``); without a registered ``cpu``
platform it falls back to ``nvidia`` on a machine with no GPU, so ``get_device_name()`` says ``cuda`` and the process
group asks for nccl. This platform answers ``cpu``, gloo, and a ``torch.cuda`` stand-in (:mod:`.device`). Ray still
schedules verl's workers on *logical* ``GPU`` resources: verl's resource pools ask for GPU bundles, so the driver
starts Ray with ``num_gpus`` equal to the number of training ranks (:mod:`.launch`).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from verl.plugin.platform import PlatformBase, PlatformRegistry

from bots_verl.verl_cpu import device

logger = logging.getLogger(__name__)

PLATFORM_NAME = "cpu"


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for training and rollout on CPU cores (no accelerator)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return device

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # never auto-detected: only VERL_PLATFORM=cpu selects it, so GPU machines keep their platform
        return False

    def current_device(self) -> str:  # type: ignore[override]
        # verl passes this as ``device=`` (``model.to(device=get_device_id())``); an int would mean accelerator 0
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        """One CPU device; nothing to select."""

    def synchronize(self, device_index: int | None = None) -> None:
        """CPU ops are synchronous."""

    def manual_seed(self, seed: int) -> None:
        device.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        device.manual_seed_all(seed)

    def set_allocator_settings(self, settings: str) -> None:
        """No caching allocator to configure on CPU."""

    def empty_cache(self) -> None:
        """No device cache on CPU."""

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray assigns logical GPU ids through this variable; on CPU it only names the worker's slot
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        """No device profiler on CPU."""

    def profiler_stop(self) -> None:
        """No device profiler on CPU."""

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
