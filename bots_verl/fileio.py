"""Files on disk: crash-safe writes, one writer per output, and markdown tables. Shared by every package.

**Crash-safe writes.** A writer builds an output under a temporary name beside it and renames it into place, so a
reader (or a rerun after a kill or a power loss) sees the old content or the new one, never a torn file
(:func:`publishing`, and :func:`write_text_atomic`, :func:`write_json_atomic`, :func:`write_table_atomic` on top of
it). A writer that is killed (SIGKILL, OOM killer, power loss: no ``finally`` runs) leaves its temporary behind, and
the next run must tell such leftovers from the work of a writer that is still running. Every temporary name therefore
carries a *writer tag*, ``<host>-<pid>``: a tag of this host whose process no longer exists is stale and safe to
remove; a tag of another host (shared storage) or of a live process is not, and is only reported
(:func:`clean_stale_temps`).

**One writer per output.** :class:`OutputLock` is an exclusive, non-blocking lock (``filelock``, an ``flock`` on
Linux) on ``<output>.lock`` that records its holder's pid, host, start time and command, so that a refused second
writer is told who holds it. A stale lock cannot block anyone: the kernel drops an ``flock`` when its process exits,
however it exits, so the lock file of a killed run is simply taken over; its old content only serves a log line. On
NFS, Linux emulates ``flock`` with byte-range locks, which needs a working lock manager on the mount.

**Markdown tables.** :func:`markdown_table`, the one writer of GitHub tables for reports and summaries.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

__all__ = [
    "TEMP_MARK",
    "OLD_MARK",
    "LockError",
    "OutputLock",
    "clean_stale_temps",
    "describe_holder",
    "fsync_dir",
    "fsync_file",
    "host_name",
    "is_stale_tag",
    "lock_holder",
    "lock_path",
    "markdown_table",
    "parse_writer_tag",
    "pid_alive",
    "publishing",
    "temp_path",
    "write_json_atomic",
    "write_table_atomic",
    "write_text_atomic",
    "writer_tag",
]

#: What stands between an output's name and its writer tag in a temporary name: ``.<name>.tmp-<host>-<pid>``.
TEMP_MARK = ".tmp-"
#: The same for a directory that a new one is replacing, moved aside until the new one is in: ``.<name>.old-<tag>``.
OLD_MARK = ".old-"

_TAG = re.compile(r"^(?P<host>.+)-(?P<pid>[0-9]+)$")


# --------------------------------------------------------------------------------------------------- writer tags


def host_name() -> str:
    """This machine's host name, reduced to characters that are safe in a file name."""
    return re.sub(r"[^A-Za-z0-9._]+", "_", socket.gethostname()) or "localhost"


def writer_tag() -> str:
    """``<host>-<pid>`` of this process, for temporary file and directory names."""
    return f"{host_name()}-{os.getpid()}"


def parse_writer_tag(tag: str) -> tuple[str, int] | None:
    """``(host, pid)`` of a writer tag, or None if ``tag`` is not one."""
    match = _TAG.match(tag)
    return None if match is None else (match["host"], int(match["pid"]))


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (a process of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale_tag(tag: str) -> bool:
    """Whether the writer of ``tag`` is certainly gone: same host, process no longer running.

    A tag of another host is never stale here, because its process cannot be checked from this machine.
    """
    parsed = parse_writer_tag(tag)
    return parsed is not None and parsed[0] == host_name() and not pid_alive(parsed[1])


# ------------------------------------------------------------------------------------------- crash-safe writes


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a file's data to disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Flush a directory's entries to disk, so that a rename into it survives a power loss."""
    fd = os.open(Path(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(path: str | os.PathLike[str]) -> Path:
    """The hidden temporary name of ``path`` for this writer: ``.<name>.tmp-<host>-<pid>`` in the same directory."""
    path = Path(path)
    return path.with_name(f".{path.name}{TEMP_MARK}{writer_tag()}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _fsync_tree(path: Path) -> None:
    if not path.is_dir():
        fsync_file(path)
        return
    for root, _, files in os.walk(path):
        for name in files:
            fsync_file(Path(root) / name)
        fsync_dir(root)


@contextmanager
def publishing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Write ``path`` at once: yields its temporary name (:func:`temp_path`); on a clean exit, publishes it.

    The caller writes a file (or builds a directory) at the yielded path. Publishing flushes it to disk, renames it
    onto ``path`` and flushes the directory; an exception instead removes the temporary and propagates. A directory
    that replaces a directory takes two renames: the old one moves aside (``.<name>.old-<tag>``), the new one moves in,
    then the old one is deleted; a writer killed between the two renames leaves ``path`` missing and the old one
    aside, and :func:`clean_stale_temps` puts it back.

    Args:
        path: The output.

    Yields:
        The temporary path to write.
    """
    path = Path(path)
    tmp = temp_path(path)
    _remove(tmp)
    old = None
    try:
        yield tmp
        _fsync_tree(tmp)
        if tmp.is_dir() and path.is_dir() and not path.is_symlink():
            # os.replace cannot replace a directory that holds files: move it aside first, and back on failure
            old = path.with_name(f".{path.name}{OLD_MARK}{writer_tag()}")
            os.rename(path, old)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(old, path)
                old = None
                raise
        else:
            os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    # The rename itself is only durable once the directory entry is flushed.
    fsync_dir(path.parent)
    if old is not None:
        shutil.rmtree(old)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` by ``text`` at once (UTF-8; see :func:`publishing`)."""
    with publishing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike[str], payload: Any, **dumps: Any) -> None:
    """Replace ``path`` by ``payload`` as JSON at once, with a final newline.

    Args:
        path: The output.
        payload: What to write.
        **dumps: Keyword arguments of :func:`json.dumps` (default ``indent=2``).
    """
    write_text_atomic(path, json.dumps(payload, **{"indent": 2, **dumps}) + "\n")


def write_table_atomic(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Replace ``path`` by ``table`` as a parquet file at once (see :func:`publishing`)."""
    import pyarrow.parquet as pq

    with publishing(path) as tmp:
        pq.write_table(table, tmp)


def clean_stale_temps(path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Remove the temporaries of ``path`` that killed writers left; report those that cannot be judged.

    A directory that a killed writer had moved aside (:func:`publishing`) is put back when ``path`` is missing (the
    writer died between its two renames, so nothing replaced it), and removed otherwise.

    Args:
        path: The output.

    Returns:
        ``(removed, kept)``: removed, temporaries whose writer (this host) is gone (and directories put back);
        kept, those of another host or a live process.
    """
    path = Path(path)
    removed: list[str] = []
    kept: list[str] = []
    for mark in (OLD_MARK, TEMP_MARK):
        prefix = f".{path.name}{mark}"
        for tmp in sorted(path.parent.glob(f"{glob.escape(prefix)}*")):
            if not is_stale_tag(tmp.name[len(prefix) :]):
                kept.append(str(tmp))
                continue
            if mark == OLD_MARK and not path.exists():
                os.rename(tmp, path)
                logger.warning("%s: put back the previous outputs from %s (a killed writer left them)", path, tmp)
            else:
                _remove(tmp)
            removed.append(str(tmp))
    return removed, kept


# ---------------------------------------------------------------------------------------------- one writer each


class LockError(RuntimeError):
    """Another process holds the lock of an output."""


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of an output: ``<path>.lock`` in the same directory."""
    path = Path(path)
    return path.with_name(f"{path.name}.lock")


def _read_info(fd: int) -> dict[str, Any]:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError, RecursionError):
        return {}
    return info if isinstance(info, dict) else {}


def _read_info_at(lock: Path) -> dict[str, Any]:
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return {}
    try:
        return _read_info(fd)
    finally:
        os.close(fd)


def describe_holder(info: dict[str, Any]) -> str:
    """A lock holder as ``pid 123 on host vm, started 2025-01-01 12:00:00 (collect ...)``."""
    if not info:
        return "an unknown process (the lock file is empty)"
    started = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, int | float) else "?"
    text = f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, started {when}"
    return f"{text} ({info['command']})" if info.get("command") else text


def lock_holder(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Who holds the lock of ``path`` now, or None if nobody does (a leftover lock file of a dead process is free).

    Args:
        path: The output (not the lock file).

    Returns:
        The holder's ``{pid, host, started, command}``, or None.
    """
    import filelock

    lock = lock_path(path)
    if not lock.exists():
        return None
    probe = filelock.FileLock(lock, timeout=0, preserve_lock_file=True)
    try:
        probe.acquire()
    except filelock.Timeout:
        return _read_info_at(lock)
    except FileNotFoundError:
        return None
    probe.release()
    return None


class OutputLock:
    """An exclusive lock on one output, held from :meth:`acquire` until :meth:`release`.

    Args:
        path: The output to protect (the lock file is ``<path>.lock``).
        command: What the holder is doing, shown to a refused second writer.
    """

    def __init__(self, path: str | os.PathLike[str], command: str = "") -> None:
        import filelock

        self.path = Path(path)
        self.lock = lock_path(path)
        self.command = command
        self._lock = filelock.FileLock(self.lock, timeout=0, thread_local=False, on_acquired=self._sign)

    def _sign(self, fd: int) -> None:
        previous = _read_info(fd)
        if previous:
            logger.info("%s: took over a stale lock of %s, which has exited", self.lock, describe_holder(previous))
        info = {"pid": os.getpid(), "host": host_name(), "started": time.time(), "command": self.command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)

    def acquire(self) -> OutputLock:
        """Take the lock, or raise.

        Returns:
            self.

        Raises:
            LockError: If another process (or another lock object of this process) holds it; the message names it.
        """
        import filelock

        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise LockError(
                f"{self.path} is being written by another process: {describe_holder(_read_info_at(self.lock))}. "
                f"Two writers would do the same work twice; wait for it to finish, stop it, or write to another "
                f"file. (The lock, {self.lock}, is released automatically when that process exits.)"
            ) from None
        return self

    def try_acquire(self) -> dict[str, Any] | None:
        """Take the lock, or say who holds it: for a caller that words the refusal itself.

        Returns:
            None once the lock is held; else the live holder's ``{pid, host, started, command}``
            (:func:`describe_holder`). A holder that exits between the refusal and the look at it is tried again.
        """
        for _ in range(3):
            try:
                self.acquire()
                return None
            except LockError:
                holder = lock_holder(self.path)
                if holder is not None:
                    return holder
        self.acquire()
        return None

    def release(self) -> None:
        """Release the lock and remove the lock file (no-op if not held)."""
        if not self._lock.is_locked:
            return
        # Unlink while still holding the lock, so that nobody can lock the old inode after we let go.
        self.lock.unlink(missing_ok=True)
        self._lock.release(force=True)

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# ------------------------------------------------------------------------------------------------ markdown tables


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table: one header row, the separator, one line per row (cells as ``str``), no final newline.

    Args:
        header: The column titles.
        rows: The cells, as many per row as titles.

    Raises:
        ValueError: If a row has another number of cells than the header.
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells under {len(header)} titles: {list(row)}")
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return "\n".join(lines)
