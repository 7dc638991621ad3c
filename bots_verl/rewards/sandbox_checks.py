"""Whether the asked-for isolation works here, checked once per process before any model code runs."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time

from bots_verl.rewards.sandbox import (
    _SECCOMP,
    ENV_ISOLATION,
    Limits,
    SandboxUnavailableError,
    bwrap_argv,
    bwrap_binary,
    launch,
    sandbox_python,
)
from bots_verl.rewards.sandbox_channel import ChannelClosed, DeadlineExceeded

__all__ = ["check_isolation"]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

# ------------------------------------------------------------------------------------------------- checks
_CHECKED: dict[str, BaseException | None] = {}
_CHECK_LOCK = threading.Lock()


def check_isolation(isolation: str) -> None:
    """Make sure ``isolation`` works here, once per process (thread-safe).

    ``bwrap`` starts one probe sandbox and checks what the program would see: no network, no foreign processes, a
    non-root uid, only ``/tmp`` writable, an empty environment. ``none`` logs a loud warning once.

    Raises:
        SandboxUnavailableError: bubblewrap is missing, fails to start, or does not isolate as promised.
    """
    with _CHECK_LOCK:
        if isolation not in _CHECKED:
            try:
                if isolation == "none":
                    logger.warning(
                        "CODE ANSWERS RUN UNCONFINED (isolation='none'): model-written programs can read and write "
                        "your files, use the network and leave processes behind. Install bubblewrap or use a "
                        "SandboxFusion server for training."
                    )
                else:
                    _probe_bwrap()
                _CHECKED[isolation] = None
            except SandboxUnavailableError as err:
                _CHECKED[isolation] = err
        error = _CHECKED[isolation]
    if error is not None:
        raise error


def _probe_bwrap() -> None:
    hint = (
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; unprivileged users also need user "
        "namespaces enabled), or score code on a SandboxFusion server (reward kwarg sandbox_fusion_url), or accept "
        f"running model code unconfined with {ENV_ISOLATION}=none / reward kwarg isolation=none"
    )
    if bwrap_binary() is None:
        raise SandboxUnavailableError(f"bubblewrap (bwrap) is not installed: {hint}")
    box = launch("probe", {}, "bwrap", Limits())
    try:
        report = box.channel.recv(time.monotonic() + 30, 1 << 20)
    except (ChannelClosed, DeadlineExceeded) as err:
        box.close()
        detail = _bwrap_error()
        raise SandboxUnavailableError(f"bubblewrap does not start a sandbox here ({detail or err}): {hint}") from err
    box.close()
    problems = []
    if not isinstance(report, dict):
        problems.append("no report")
    else:
        if report.get("uid") == 0:
            problems.append("runs as root")
        if report.get("network") == "open":
            problems.append("network reachable")
        if _SECCOMP is not None and report.get("memfd") != "denied":
            problems.append("seccomp filter not applied")
        theirs = report.get("namespaces") or {}
        shared = [ns for ns in ("net", "pid", "mnt", "ipc", "uts") if theirs.get(ns, "?") == _own_namespace(ns)]
        if shared:
            problems.append(f"namespaces shared with the scorer: {shared}")
        if report.get("writable") != ["/tmp"]:
            problems.append(f"writable: {report.get('writable')}")
        if any(pid > 3 for pid in report.get("processes", [99])):
            problems.append("foreign processes visible")
        if set(report.get("environ", ["?"])) - {"PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD"}:
            problems.append(f"environment leaks: {report.get('environ')}")
    if problems:
        raise SandboxUnavailableError(f"bubblewrap sandbox does not isolate as required ({'; '.join(problems)})")
    logger.info("code answers run in bubblewrap sandboxes (%s)", bwrap_binary())


def _own_namespace(ns: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/ns/{ns}")
    except OSError:
        return None


def _bwrap_error() -> str:
    """bubblewrap's own error message for a trivial sandbox (for the error raised when the probe fails)."""
    bwrap = bwrap_binary()
    if bwrap is None:
        return "bwrap not found"
    as_root = os.geteuid() == 0
    info_r, info_w = os.pipe()
    argv = [*bwrap_argv(bwrap, sandbox_python(), Limits(), info_w, as_root), "/usr/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, pass_fds=(info_w,), timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    finally:
        os.close(info_r)
        os.close(info_w)
    return done.stderr.decode(errors="replace").strip()[:500]
