"""The sandbox module: what a sandbox looks like from inside, the opt-in unconfined mode, the error when isolation
is missing, and an unprivileged (user-namespace) run."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bots_verl.rewards import compute_score, sandbox, sandbox_checks, sandbox_slots
from bots_verl.rewards._seccomp import filter_program
from bots_verl.rewards.sandbox import Limits, SandboxUnavailableError, launch
from bots_verl.rewards.sandbox_checks import check_isolation

REPO = Path(__file__).resolve().parents[2]
STDIN = json.dumps({"inputs": ["2 3\n"], "outputs": ["5\n"]})
FUNCTIONAL = json.dumps({"functional": "assert add(2, 3) == 5\n"})


def _code(body: str) -> str:
    return f"```python\n{body}\n```"


def test_probe_sees_an_isolated_world(sandbox: str) -> None:
    box = launch("probe", {}, sandbox, Limits())
    try:
        report = box.channel.recv(time.monotonic() + 30, 1 << 20)
    finally:
        box.close()
    assert report["uid"] != 0 and report["pid"] <= 3 and report["processes"] == [1, 2]
    assert report["writable"] == ["/tmp"] and report["network"] != "open"
    assert set(report["environ"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD"}
    for ns, link in report["namespaces"].items():
        assert link != os.readlink(f"/proc/self/ns/{ns}")
    if filter_program() is not None:
        assert report["memfd"] == "denied"


def test_close_leaves_no_process(sandbox: str) -> None:
    box = launch("worker", {"kind": "stdin"}, sandbox, Limits())
    children_before = _children()
    box.close()
    box.close()  # idempotent
    assert box.proc.returncode is not None
    assert _children() <= children_before - {box.proc.pid}


def _children() -> set[int]:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
        return {int(pid) for pid in f.read().split()}


def test_seccomp_program_shape() -> None:
    for machine in ("x86_64", "aarch64"):
        program = filter_program(machine)
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64
    assert filter_program("riscv64") is None


def test_unconfined_mode_is_opt_in_loud_and_still_judges(caplog: pytest.LogCaptureFixture, monkeypatch) -> None:
    monkeypatch.setattr(sandbox_checks, "_CHECKED", {})
    with caplog.at_level(logging.WARNING, logger="bots_verl.rewards.sandbox"):
        assert compute_score("codegen__x", _code("def add(a, b):\n    return a + b"), FUNCTIONAL, isolation="none")[
            "acc"
        ]
        compute_score("codegen__x", _code("print(5)"), STDIN, isolation="none")
    assert sum("UNCONFINED" in r.getMessage() for r in caplog.records) == 1  # once per process
    # Without isolation the judging still runs in the scorer / the judge: forged exits still score 0.
    assert compute_score("codegen__x", _code("import os\nos._exit(0)"), FUNCTIONAL, isolation="none")["score"] == 0.0
    assert compute_score("codegen__x", _code("print(5)"), STDIN, isolation="none")["score"] == 1.0


def test_missing_bubblewrap_is_an_error_not_a_silent_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_checks, "_CHECKED", {})
    monkeypatch.setenv("BOTS_BWRAP", "/nonexistent/bwrap")
    assert sandbox.bwrap_binary() is None
    monkeypatch.setattr(sandbox_checks, "bwrap_binary", lambda: None)  # as on a machine without the package
    with pytest.raises(SandboxUnavailableError, match="bubblewrap.*not installed.*isolation=none"):
        compute_score("codegen__x", _code("print(5)"), STDIN)
    with pytest.raises(SandboxUnavailableError):  # the verdict is cached, and raised again
        check_isolation("bwrap")
    # Data and output problems are unaffected: no code block needs no sandbox.
    assert compute_score("codegen__x", "no code here", STDIN)["status"] == "no_code"


def test_broken_bubblewrap_is_reported_with_its_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox_checks, "_CHECKED", {})
    monkeypatch.setenv("BOTS_BWRAP", str(fake))
    with pytest.raises(SandboxUnavailableError, match="No permissions to create new namespace"):
        check_isolation("bwrap")


def test_unknown_isolation_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="isolation"):
        compute_score("codegen__x", _code("print(5)"), STDIN, isolation="docker")


@pytest.mark.parametrize("value", ["0", "1000"])
def test_concurrency_setting_is_checked(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_slots, "_SEMAPHORE", None)
    monkeypatch.setenv("BOTS_CODE_MAX_CONCURRENT", value)
    with pytest.raises(ValueError, match="BOTS_CODE_MAX_CONCURRENT"):
        compute_score("codegen__x", _code("print(5)"), STDIN)


UNPRIVILEGED_RUN = """
import json, sys
sys.path.insert(0, {repo!r})
from bots_verl.rewards import compute_score
tests = json.dumps({{"inputs": ["2 3\\n"], "outputs": ["5\\n"]}})
limited = json.dumps({{"inputs": [""], "outputs": ["limited\\n"]}})
def code(body):
    return "```python\\n" + body + "\\n```"
fork = ("import os, time\\nn = 0\\nfor _ in range(300):\\n    try:\\n        pid = os.fork()\\n    except OSError:\\n"
        "        break\\n    if pid == 0:\\n        time.sleep(30)\\n        os._exit(0)\\n    n += 1\\n"
        "print('limited' if n < 300 else 'unlimited')\\n")
print(json.dumps([
    compute_score("codegen__x", code("a, b = map(int, input().split())\\nprint(a + b)"), tests)["score"],
    compute_score("codegen__x", code("print(6)"), tests)["score"],
    compute_score("codegen__x", code(fork), limited)["score"],
    compute_score("codegen__x", code("import os\\nprint(5 if os.getuid() != 0 else 0)"), tests)["score"],
]))
"""


def test_unprivileged_user_gets_the_same_sandbox(sandbox: str) -> None:
    """Run as an unprivileged uid, bubblewrap uses a user namespace; RLIMIT_NPROC then counts the sandbox only."""
    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not os.path.exists(python) or shutil.which("bwrap") is None:
        pytest.skip("needs root (to switch to an unprivileged uid) and a system python3")
    probe = subprocess.run(
        [python, "-c", f"import os; os.listdir({str(REPO)!r})"], user=65534, group=65534, capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip("the checkout is not readable by an unprivileged user")
    done = subprocess.run(
        [python, "-c", textwrap.dedent(UNPRIVILEGED_RUN.format(repo=str(REPO)))],
        user=65534,
        group=65534,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/tmp",
    )
    if "does not start a sandbox" in done.stderr:
        pytest.skip(f"unprivileged user namespaces are not available here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [1.0, 0.0, 1.0, 1.0]


def test_sandbox_python_is_the_real_interpreter() -> None:
    assert os.path.realpath(sandbox.sandbox_python()) == sandbox.sandbox_python()
    assert Path(sandbox.sandbox_python()).exists() and sys.version_info >= (3, 10)
