"""Isolation for model-written programs: one bubblewrap sandbox per run (or, opted in, an unconfined subprocess).

``isolation="bwrap"`` (the default) starts each program with `bubblewrap <https://github.com/containers/bubblewrap>`_
(Debian/Ubuntu package ``bubblewrap``, the sandbox Flatpak uses), which gives it:

- its own PID namespace: when the run ends, the kernel kills every process the program started (background children,
  ``setsid`` daemons, fork bombs), and it cannot see or signal any process outside (``/proc`` is its own);
- no network (an empty network namespace), its own IPC and UTS namespaces;
- a read-only view of ``/usr`` and the Python installation only (not ``/etc``, ``/home``, the project, the data or
  checkpoints), a private writable ``/tmp`` (a size-limited tmpfs that vanishes with the sandbox), a minimal
  read-only ``/dev``; an empty environment;
- a non-root uid without capabilities, ``no_new_privs``, and limits on processes (``RLIMIT_NPROC``), address space,
  CPU time, file size and open files, set before any model code runs;
- a seccomp filter (:mod:`bots_verl.rewards._seccomp`) that refuses the calls whose memory the address-space limit
  does not see (memfd, SysV shared memory and queues) and nested namespaces.

Run unprivileged, bubblewrap uses a user namespace (``--unshare-user --disable-userns``); RLIMIT_NPROC then counts the
sandbox's own processes only (Linux >= 5.14 counts per user namespace). Run as root, the sandbox gets no user
namespace and the harness drops to a uid of its own (distinct per concurrent sandbox) after bubblewrap has set up the
mounts, because processes of uid 0 are exempt from RLIMIT_NPROC.

``isolation="none"`` runs the program as a plain subprocess with the same limits and a private temp directory but
none of the namespaces; it must be asked for (reward kwarg or ``BOTS_CODE_ISOLATION=none``) and says so loudly once.
Where bubblewrap is missing or does not work, code scoring raises :class:`SandboxUnavailableError`: it never falls
back to running model code unconfin
The channel to a sandbox is :mod:`bots_verl.rewards.sandbox_channel`, the concurrency limit and uids
:mod:`bots_verl.rewards.sandbox_slots`, and the check that isolation works here :mod:`bots_verl.rewards.sandbox_checks`.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import marshal
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from bots_verl.rewards import _harness, _harness_setup, _wire
from bots_verl.rewards._seccomp import filter_program
from bots_verl.rewards.sandbox_channel import Channel
from bots_verl.rewards.sandbox_slots import ROOT_UIDS

__all__ = [
    "ISOLATIONS",
    "Limits",
    "Sandbox",
    "SandboxUnavailableError",
    "bwrap_argv",
    "bwrap_binary",
    "kill_session",
    "launch",
    "resolve_isolation",
    "sandbox_python",
]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

ISOLATIONS = ("bwrap", "none")
ENV_ISOLATION = "BOTS_CODE_ISOLATION"
ENV_BWRAP = "BOTS_BWRAP"

# The harness travels compiled, in a sealed memfd each sandbox reads and closes first thing (saves compiling 25 KB of
# source per run); the sandbox runs this same interpreter, so the marshal format matches. Three modules, executed in
# order in the sandbox's __main__ namespace: the codec, the process setup, then the roles that use them.
_HARNESS_MODULES = (_wire, _harness_setup, _harness)
_BOOTSTRAP = (
    "import marshal,os,sys;f=int(sys.argv.pop(1));c=os.pread(f,{size},0);os.close(f);"
    "[exec(k,globals()) for k in marshal.loads(c)]"
)
_HARNESS_FD: int | None = None
_HARNESS_SIZE = 0
_HARNESS_LOCK = threading.Lock()
_SECCOMP = filter_program()
# Seconds an idle harness gets to exit on end of file before it is killed.
_GRACE_S = 1.0


class SandboxUnavailableError(RuntimeError):
    """Isolation was asked for but does not work here (a setup problem, not a property of the model's output)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process tree.

    Attributes:
        memory_mb: address space per process (RLIMIT_AS).
        cpu_s: CPU seconds per process (RLIMIT_CPU); the caller's wall-clock deadline bounds the whole run.
        nproc: processes and threads (RLIMIT_NPROC).
        file_mb: largest file a process may write (RLIMIT_FSIZE).
        nofile: open file descriptors (RLIMIT_NOFILE).
        tmpfs_mb: size of the private ``/tmp``.
        max_output_bytes: standard output kept per run; more fails the run, and the output is then dropped inside
            the sandbox (the scorer receives at most this many bytes of a run's output).
    """

    memory_mb: int = 1024
    cpu_s: int = 10
    nproc: int = 16
    file_mb: int = 16
    nofile: int = 128
    tmpfs_mb: int = 64
    max_output_bytes: int = 16 << 20


def resolve_isolation(isolation: str | None) -> str:
    """The isolation to use: the argument, else ``$BOTS_CODE_ISOLATION``, else ``bwrap``.

    Raises:
        ValueError: for an unknown name.
    """
    name = isolation or os.environ.get(ENV_ISOLATION) or "bwrap"
    if name not in ISOLATIONS:
        raise ValueError(f"code isolation must be one of {ISOLATIONS}, got {name!r}")
    return name


# ------------------------------------------------------------------------------------------------- sandbox
class Sandbox:
    """A running sandboxed harness; :meth:`close` ends it and everything it started."""

    def __init__(
        self,
        proc: subprocess.Popen,
        channel: Channel,
        info_fd: int | None,
        uid: int | None,
        workdir: str | None,
    ) -> None:
        self.proc, self.channel, self._uid, self._workdir = proc, channel, uid, workdir
        # A pidfd on the namespace's PID 1, taken while it is certainly bubblewrap's child. bubblewrap's outer process
        # may exit before PID 1 has finished tearing the namespace down (it learns the exit status through an
        # eventfd), so close() waits on PID 1 itself: its exit completes only once every process in it is gone.
        self._init_fd = self._open_init(info_fd) if info_fd is not None else None

    def _open_init(self, info_fd: int) -> int | None:
        """pidfd of the sandbox's PID 1, from bubblewrap's ``--info-fd`` report (``None`` if bubblewrap failed)."""
        data = b""
        try:
            with os.fdopen(info_fd, "rb") as info:  # bubblewrap writes the report right after the clone, then closes
                data = info.read(1 << 16)
            pid = int(json.JSONDecoder().raw_decode(data.decode())[0]["child-pid"])
            pidfd = os.pidfd_open(pid)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == self.proc.pid:  # its parent is our bubblewrap
                return pidfd
        except (OSError, ValueError, IndexError):
            pass
        os.close(pidfd)
        return None

    def _init_exited(self, timeout: float) -> bool:
        assert self._init_fd is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._init_fd, selectors.EVENT_READ)
            return bool(selector.select(timeout))

    def close(self, graceful: bool = False) -> None:
        """End the sandbox and wait until every process in it is gone (idempotent; never raises).

        Args:
            graceful: the harness is idle (between requests): send it end of file and give it a moment to exit, so
                that its processes are reaped through bubblewrap (their CPU time is then accounted to us); if it has
                not exited by then, or without ``graceful``, kill it.
        """
        if graceful and self.proc.returncode is None:
            self.channel.close_writer()
            try:
                self.proc.wait(timeout=_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        if self._init_fd is not None:
            if not (graceful and self._init_exited(_GRACE_S if self.proc.returncode is not None else 0)):
                # Killing PID 1 makes the kernel kill every process of the namespace.
                try:
                    signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
                except OSError:
                    pass
            if not self._init_exited(30):
                logger.error("a code sandbox did not end within 30 s of being killed")
            os.close(self._init_fd)
            self._init_fd = None
        if self.proc.returncode is None:
            kill_session(self.proc)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                logger.error("bubblewrap did not exit within 10 s of being killed")
        self.channel.close()
        if self._uid is not None:
            ROOT_UIDS.give(self._uid)
            self._uid = None
        if self._workdir is not None:
            _remove_tree(self._workdir)
            self._workdir = None


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of a child started with ``start_new_session=True`` (never raises)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _remove_tree(path: str) -> None:
    """Best-effort removal of a temp dir the program may have booby-trapped (no permissions, FIFOs, symlinks)."""
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        logger.warning("could not remove the code sandbox directory %s", path)


def bwrap_binary() -> str | None:
    """``$BOTS_BWRAP``, else ``bwrap`` on PATH or in /usr/bin; ``None`` when that is not an executable file."""
    found = os.environ.get(ENV_BWRAP) or shutil.which("bwrap") or "/usr/bin/bwrap"
    return found if os.path.isfile(found) and os.access(found, os.X_OK) else None


def _harness_fd() -> tuple[int, int]:
    """(descriptor, size) of the sealed memfd holding the compiled harness, made once per process."""
    global _HARNESS_FD, _HARNESS_SIZE
    with _HARNESS_LOCK:
        if _HARNESS_FD is None:
            code = marshal.dumps(
                tuple(
                    compile(Path(module.__file__).read_text(encoding="utf-8"), f"<{module.__name__}>", "exec")
                    for module in _HARNESS_MODULES
                )
            )
            fd = os.memfd_create("bots_harness", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            view = memoryview(code)
            while view:
                view = view[os.write(fd, view) :]
            seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            _HARNESS_FD, _HARNESS_SIZE = fd, len(code)
        return _HARNESS_FD, _HARNESS_SIZE


def _seccomp_pipe() -> int | None:
    """A pipe holding the seccomp filter for bubblewrap to read (one per sandbox: bwrap reads to end of file)."""
    program = _SECCOMP
    if program is None:
        return None
    read_fd, write_fd = os.pipe()  # the program is a few hundred bytes: it fits in the pipe buffer
    os.write(write_fd, program)
    os.close(write_fd)
    return read_fd


def sandbox_python() -> str:
    """The interpreter for programs: the real binary behind this Python (a venv's site-packages stay outside)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _read_only_binds(python: str) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    # Merged-/usr systems have /bin -> usr/bin etc.; others have real directories.
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    prefixes = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(python))}
    made: set[str] = set()
    for prefix in sorted(prefixes):
        if prefix == "/usr" or prefix.startswith("/usr/") or not os.path.isdir(prefix):
            continue
        # bubblewrap creates missing parents (e.g. /root of a pyenv Python) as 0700; the sandbox uid must traverse.
        parents = Path(prefix).parents
        for parent in reversed([str(p) for p in parents if str(p) != "/"]):
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", prefix, prefix]
    return args


def bwrap_argv(bwrap: str, python: str, limits: Limits, info_fd: int, as_root: bool) -> list[str]:
    """The bubblewrap command line of one sandbox (namespaces, mounts, seccomp), up to the program it runs."""
    argv = [bwrap, "--die-with-parent", "--new-session"]
    argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if as_root:
        # No user namespace: the harness needs real CAP_SETUID/CAP_SETGID to drop to its own uid, then has none.
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-user", "--disable-userns"]
    argv += _read_only_binds(python)
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    argv += ["--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp", "--remount-ro", "/"]
    argv += ["--chdir", "/tmp", "--clearenv"]
    for key, value in (("PATH", "/usr/bin:/bin"), ("HOME", "/tmp"), ("TMPDIR", "/tmp"), ("LANG", "C.UTF-8")):
        argv += ["--setenv", key, value]
    return [*argv, "--info-fd", str(info_fd), "--"]


def _settings(role_settings: dict, limits: Limits, uid: int | None, pidns: bool) -> dict:
    return {
        **role_settings,
        "uid": uid,
        "pidns": pidns,
        "memory_bytes": limits.memory_mb << 20,
        "cpu_s": limits.cpu_s,
        "nproc": limits.nproc if (pidns or uid is not None) else None,
        "file_bytes": limits.file_mb << 20,
        "nofile": limits.nofile,
        "max_output_bytes": limits.max_output_bytes,
    }


def launch(
    role: str,
    role_settings: dict,
    isolation: str,
    limits: Limits,
    *,
    stdin: int = subprocess.PIPE,
    stdout: int = subprocess.PIPE,
    pass_fds: tuple[int, ...] = (),
) -> Sandbox:
    """Start the harness in ``role`` (``worker``, ``judge`` or ``probe``) under ``isolation``.

    Args:
        role: the harness role.
        role_settings: extra settings for the role (JSON-able).
        isolation: ``bwrap`` or ``none`` (see :func:`resolve_isolation`; call :func:`check_isolation` first).
        limits: resource limits.
        stdin, stdout: ``subprocess.PIPE`` (the returned channel talks to them) or a file descriptor.
        pass_fds: further descriptors the harness inherits (their numbers are passed in ``role_settings``).

    Returns:
        The running :class:`Sandbox`; always :meth:`Sandbox.close` it.
    """
    python = sandbox_python()
    code_fd, code_size = _harness_fd()
    tail = [python, "-I", "-S", "-c", _BOOTSTRAP.format(size=code_size), str(code_fd), role]
    pass_fds = (*pass_fds, code_fd)
    info_fd = uid = workdir = seccomp_fd = None
    if isolation == "bwrap":
        bwrap = bwrap_binary()
        if bwrap is None:
            raise SandboxUnavailableError("bubblewrap (bwrap) not found")
        as_root = os.geteuid() == 0
        uid = ROOT_UIDS.take() if as_root else None
        info_fd, info_w = os.pipe()
        argv = bwrap_argv(bwrap, python, limits, info_w, as_root)
        seccomp_fd = _seccomp_pipe()
        if seccomp_fd is not None:
            argv[-1:-1] = ["--seccomp", str(seccomp_fd)]
            pass_fds = (*pass_fds, seccomp_fd)
        argv += [*tail, json.dumps(_settings(role_settings, limits, uid, pidns=True))]
        fds = (*pass_fds, info_w)
        cwd = "/"
    else:
        workdir = tempfile.mkdtemp(prefix="bots_code_")
        argv = [*tail, json.dumps(_settings(role_settings, limits, None, pidns=False))]
        fds, info_w, cwd = pass_fds, None, workdir
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir or "/tmp", "TMPDIR": workdir or "/tmp"}
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            pass_fds=fds,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except BaseException:
        for fd in (info_fd, info_w, seccomp_fd):
            if fd is not None:
                os.close(fd)
        if uid is not None:
            ROOT_UIDS.give(uid)
        if workdir is not None:
            _remove_tree(workdir)
        raise
    if info_w is not None:
        os.close(info_w)
    if isolation == "bwrap" and seccomp_fd is not None:
        os.close(seccomp_fd)
    # The channel owns duplicates of the pipe ends; Popen's file objects are closed so nothing else buffers them.
    write_fd = read_fd = None
    if proc.stdin is not None:
        write_fd = os.dup(proc.stdin.fileno())
        proc.stdin.close()
        proc.stdin = None
    if proc.stdout is not None:
        read_fd = os.dup(proc.stdout.fileno())
        proc.stdout.close()
        proc.stdout = None
    channel = Channel(write_fd, read_fd)
    return Sandbox(proc, channel, info_fd, uid, workdir)
