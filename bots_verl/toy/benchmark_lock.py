"""The lock that keeps a second toy benchmark out of a directory that one is writing."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bots_verl.fileio import LockError, OutputLock, describe_holder, lock_holder

__all__ = ["LOCK_NAME", "directory_lock"]

logger = logging.getLogger(__name__)

#: the lock of a benchmark directory (``bots_verl.fileio``: an ``flock`` naming its holder, free when it dies)
LOCK_NAME = ".benchmark"


@contextmanager
def directory_lock(root: Path) -> Iterator[None]:
    """Hold the benchmark directory ``root`` for this process: a second benchmark on it is refused.

    Two benchmarks on one ``--out`` would train the same runs into the same run directories at once (two verl
    processes writing one checkpoint directory and run log). The lock is ``<root>/.benchmark.lock``, an advisory
    ``flock`` (:class:`bots_verl.fileio.OutputLock`) that records the holder's pid, host, start time and command;
    the kernel drops it when its process dies however it dies (SIGKILL included), so a killed benchmark's leftover
    lock file is recognised as stale and taken over, with a log line naming the dead holder.

    Raises:
        RuntimeError: another live process holds it; the message names that process.
    """
    root.mkdir(parents=True, exist_ok=True)
    lock = OutputLock(root / LOCK_NAME, command=" ".join(["python -m bots_verl.toy.benchmark", *sys.argv[1:]]))
    for _ in range(3):  # the holder may exit between the refusal and the look at who it was: then try again
        try:
            lock.acquire()
            break
        except LockError as exc:
            holder = lock_holder(root / LOCK_NAME)
            if holder is None:
                continue
            raise RuntimeError(
                f"{root} is in use by another toy benchmark: {describe_holder(holder)}. Two benchmarks on one --out "
                f"would train the same runs into the same directories; wait for it, stop it, or give this one "
                f"another --out. (Its lock, {lock.lock}, is freed automatically when that process exits.)"
            ) from exc
    else:
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
