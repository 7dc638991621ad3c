"""Shared fixtures for the reward tests: is bubblewrap usable here, and did anything escape a sandbox?

Tests that run model code need a working bubblewrap sandbox. Without one they are skipped with the reason, unless
``BOTS_REQUIRE_SANDBOX=1`` (set by ``.ci/run``), where a missing sandbox fails the run instead of hiding it.
"""

from __future__ import annotations

import os
import secrets

import pytest

from bots_verl.rewards.sandbox import SandboxUnavailableError
from bots_verl.rewards.sandbox_checks import check_isolation


@pytest.fixture(scope="session")
def sandbox() -> str:
    """``"bwrap"`` when bubblewrap sandboxes work here; skip (or fail under BOTS_REQUIRE_SANDBOX=1) otherwise."""
    try:
        check_isolation("bwrap")
    except SandboxUnavailableError as err:
        if os.environ.get("BOTS_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"BOTS_REQUIRE_SANDBOX=1 but no working sandbox: {err}")
        pytest.skip(f"no working bubblewrap sandbox: {err}")
    return "bwrap"


@pytest.fixture
def tag() -> str:
    """A 15-character process name (the kernel's comm limit) unique to this test, for finding escaped processes."""
    return "bt" + secrets.token_hex(6) + "x"


def _processes_named(tag: str) -> list[int]:
    """Host pids whose name (comm) or command line carries ``tag``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm", "rb") as f:
                comm = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # exited while we looked
            continue
        if tag.encode() in comm or tag.encode() in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def survivors(tag: str):
    """``survivors()`` lists host pids of processes the test's program named with its tag (none may outlive it)."""
    return lambda: _processes_named(tag)


@pytest.fixture
def mark(tag: str) -> str:
    """Source to prepend to a hostile program: ``mark()`` gives the calling process the test's tag as its name,
    visible on the host outside the sandbox's PID namespace."""
    return (
        "def mark():\n"
        "    try:\n"
        "        with open('/proc/self/comm', 'w') as f:\n"
        f"            f.write({tag!r})\n"
        "    except OSError:\n"
        "        pass\n"
    )
