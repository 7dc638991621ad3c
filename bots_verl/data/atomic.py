"""Crash-safe file publishing shared by the data prep and ``reference_eval``: fsync helpers and writer tags.

A writer that builds an output under a temporary name and renames it into place leaves that temporary behind when it
is killed (SIGKILL, OOM killer, power loss: no ``finally`` runs). The next run must be able to tell such leftovers
from the work of a writer that is still running. Every temporary name therefore carries a *writer tag*,
``<host>-<pid>``: a tag of this host whose process no longer exists is stale and safe to remove; a tag of another host
(shared storage) or of a live process is not, and is only reported.

Standard library only.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = [
    "fsync_dir",
    "fsync_file",
    "host_name",
    "is_stale_tag",
    "parse_writer_tag",
    "pid_alive",
    "write_text_atomic",
    "writer_tag",
]

_TAG = re.compile(r"^(?P<host>.+)-(?P<pid>[0-9]+)$")


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


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a file's data to disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory's entries to disk, so that a rename into it survives a power loss."""
    fd = os.open(Path(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` by ``text`` at once: a tagged hidden temp file beside it, fsync, rename, fsync the directory.

    A reader (or a rerun after a kill or a power loss) sees the old content or the new one, never a torn file; a
    killed writer leaves only ``.<name>.tmp-<host>-<pid>``, which :func:`is_stale_tag` recognises.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{writer_tag()}")
    try:
        tmp.write_text(text)
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
