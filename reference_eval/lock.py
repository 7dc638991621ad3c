"""One writer per results file: an advisory ``flock`` on ``<results>.lock`` that names its holder.

Two ``collect`` runs appending to the same file would both skip the same finished prompts and then evaluate every
remaining prompt twice (and merge would see conflicting duplicates). The writer therefore takes an exclusive,
non-blocking ``flock`` on a lock file next to the results file and writes its pid, host and start time into it; a
second writer is refused with a message naming the first.

Stale locks cannot block anyone: the kernel drops a ``flock`` when its process exits, however it exits (also on
SIGKILL or the OOM killer), so the lock file of a killed run is simply taken over. Its old content only serves the
log line. On NFS, Linux emulates ``flock`` with byte-range locks, which needs a working lock manager on the mount.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from bots_verl.data.atomic import host_name

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["LockError", "OutputLock", "describe_holder", "lock_holder", "lock_path"]


class LockError(RuntimeError):
    """Another process holds the lock of an output."""


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file of an output: ``<path>.lock`` in the same directory."""
    path = Path(path)
    return path.with_name(f"{path.name}.lock")


def _read_info(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError, RecursionError):
        return {}
    return info if isinstance(info, dict) else {}


def describe_holder(info: dict[str, Any]) -> str:
    """A lock holder as ``pid 123 on host vm, started 2025-01-01 12:00:00 (collect ...)``."""
    if not info:
        return "an unknown process (the lock file is empty)"
    started = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, int | float) else "?"
    text = f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, started {when}"
    return f"{text} ({info['command']})" if info.get("command") else text


def lock_holder(path: str | os.PathLike) -> dict[str, Any] | None:
    """Who holds the lock of ``path`` now, or None if nobody does (a leftover lock file of a dead process is free).

    Args:
        path: The output (not the lock file).

    Returns:
        The holder's ``{pid, host, started, command}``, or None.
    """
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class OutputLock:
    """An exclusive lock on one output, held from :meth:`acquire` until :meth:`release`.

    Args:
        path: The output to protect (the lock file is ``<path>.lock``).
        command: What the holder is doing, shown to a refused second writer.
    """

    def __init__(self, path: str | os.PathLike, command: str = "") -> None:
        self.path = Path(path)
        self.lock = lock_path(path)
        self.command = command
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        """Take the lock, or raise.

        Returns:
            self.

        Raises:
            LockError: If another process holds it; the message names that process.
        """
        while True:
            fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                info = _read_info(fd)
                os.close(fd)
                raise LockError(
                    f"{self.path} is being written by another process: {describe_holder(info)}. Two writers would "
                    f"evaluate every prompt twice; wait for it to finish, stop it, or write to another file. "
                    f"(The lock, {self.lock}, is released automatically when that process exits.)"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            # The previous holder may have unlinked the file between our open and our flock; then we locked an
            # orphaned inode that a third process would not see. Retry on the file that is there now.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.lock))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read_info(fd)
        if previous:
            logger.info("%s: took over a stale lock of %s, which has exited", self.lock, describe_holder(previous))
        info = {"pid": os.getpid(), "host": host_name(), "started": time.time(), "command": self.command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock and remove the lock file (no-op if not held)."""
        if self._fd is None:
            return
        # Unlink while still holding the lock, so that nobody can lock the old inode after we let go.
        try:
            os.unlink(self.lock)
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
