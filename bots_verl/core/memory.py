"""Memory per pool task, and the refusal of pools that cannot fit.

Every selector holds a few float64 arrays over the whole pool and allocates a few more while it selects or updates. Each
class states its bytes per task (``bytes_per_task``), measured as the peak that ``tracemalloc`` sees while building the
selector, selecting and updating (``python -m bots_verl.speed.selector_speed --memory`` prints the measurement, and
a test keeps the stated figures above it). A selector whose pool would need more than the memory available is refused
when it is built, with the estimate in the message, instead of failing hours later in an update.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["available_memory_bytes", "check_pool_fits"]

_CGROUP_FILES = (
    # (limit, usage): cgroup v2, then v1
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (no limit) reads as None


def available_memory_bytes() -> int | None:
    """Bytes this process can still allocate: ``MemAvailable``, capped by a cgroup limit; None if unknown."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if available is None and hasattr(os, "sysconf"):
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            available = None
    for limit_file, usage_file in _CGROUP_FILES:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None:
            room = max(limit - usage, 0)
            available = room if available is None else min(available, room)
            break
    return available


def check_pool_fits(selector: str, num_tasks: int, bytes_per_task: int) -> None:
    """Raise ``ValueError`` if ``num_tasks * bytes_per_task`` exceeds :func:`available_memory_bytes`.

    Args:
        selector: the selector's name, for the message.
        num_tasks: the pool size.
        bytes_per_task: the selector's peak bytes per task.
    """
    need = num_tasks * bytes_per_task
    available = available_memory_bytes()
    if available is None:
        logger.debug("available memory unknown; not checking the %d-task pool (%.2f GB)", num_tasks, need / 1e9)
        return
    if need > available:
        raise ValueError(
            f"selector {selector!r} on a pool of {num_tasks:,} tasks needs about {need / 1e9:.2f} GB "
            f"({bytes_per_task} bytes per task at its peak), but only {available / 1e9:.2f} GB are available; "
            f"use a smaller pool or a machine with more memory"
        )
