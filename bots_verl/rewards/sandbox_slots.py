"""How many sandboxes run at once in a process, and the uids that root-run sandboxes drop to."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["ENV_MAX_CONCURRENT", "ROOT_UIDS", "concurrency_slot", "concurrency_slot_check"]

ENV_MAX_CONCURRENT = "BOTS_CODE_MAX_CONCURRENT"
# Root-run sandboxes drop to uid BASE + (pid << 8) + slot: unique per live sandbox on the machine (pid < 2**22).
_UID_BASE = 1 << 31
_UID_SLOTS = 256
# ------------------------------------------------------------------------------------------------- concurrency
_SEMAPHORE: threading.BoundedSemaphore | None = None
_SEMAPHORE_LOCK = threading.Lock()


def _semaphore() -> threading.BoundedSemaphore:
    """The process-wide semaphore of :func:`concurrency_slot`, made on first use.

    Raises:
        ValueError: ``$BOTS_CODE_MAX_CONCURRENT`` out of range.
    """
    global _SEMAPHORE
    with _SEMAPHORE_LOCK:
        if _SEMAPHORE is None:
            slots = int(os.environ.get(ENV_MAX_CONCURRENT) or min(2 * (os.cpu_count() or 1), _UID_SLOTS // 4))
            # A functional answer holds two sandboxes; each live sandbox of a root-run scorer needs a uid slot.
            if not 1 <= slots <= _UID_SLOTS // 2:
                raise ValueError(f"{ENV_MAX_CONCURRENT} must be between 1 and {_UID_SLOTS // 2}, got {slots}")
            _SEMAPHORE = threading.BoundedSemaphore(slots)
        return _SEMAPHORE


def concurrency_slot_check() -> None:
    """Validate ``$BOTS_CODE_MAX_CONCURRENT`` (raises ``ValueError``) before any model output is looked at."""
    _semaphore()


@contextlib.contextmanager
def concurrency_slot() -> Iterator[None]:
    """Hold one of ``$BOTS_CODE_MAX_CONCURRENT`` (default: twice the CPU count, at most 64) slots for running code.

    verl calls the reward from a thread pool of up to 32 threads per reward worker; without a cap, 32 programs at
    1 GiB each would run at once, and wall-clock limits would fail honest programs starved of CPU. A sandbox spends
    part of its life waiting on the kernel (namespaces, fork, pipes), so two per CPU keep the CPUs busy. Waiting for
    a slot does not count against an answer's time limit.

    Raises:
        ValueError: ``$BOTS_CODE_MAX_CONCURRENT`` out of range.
    """
    with _semaphore():
        yield


class _UidSlots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free = list(range(_UID_SLOTS))

    def take(self) -> int:
        with self._lock:
            if not self._free:
                raise RuntimeError(f"more than {_UID_SLOTS} sandboxes at once in one process")
            slot = self._free.pop()
        return _UID_BASE + ((os.getpid() & 0x3FFFFF) << 8) + slot

    def give(self, uid: int) -> None:
        with self._lock:
            self._free.append((uid - _UID_BASE) & (_UID_SLOTS - 1))


#: the uids this process's root-run sandboxes drop to, one per live sandbox
ROOT_UIDS = _UidSlots()
