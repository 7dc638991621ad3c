"""Hostile programs against the code reward: every case asserts the score AND that nothing escaped the sandbox.

The attack classes: forging a pass (early exit, atexit, patched builtins, always-equal objects, protocol garbage),
reaching the expected outputs or the trainer's secrets, leaving processes behind (fork bombs, setsid daemons,
background children), exhausting time, memory, output and the temp dir, writing outside the sandbox, the network,
and signals. All run through the public ``compute_score`` in real bubblewrap sandboxes.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bots_verl.rewards import compute_score
from bots_verl.rewards.code_tests import deep_eq_test_code

pytestmark = pytest.mark.usefixtures("sandbox")

REPO = Path(__file__).resolve().parents[2]
STDIN = json.dumps({"inputs": ["2 3\n", "10 -4\n"], "outputs": ["5\n", "6\n"]})
ADD = "a, b = map(int, input().split())\nprint(a + b)"
CALLS = json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]})
LEETCODE = json.dumps(
    {
        "functional": "def check(candidate):\n"
        "    assert candidate(nums=[2, 7, 11, 15], target=9) == [0, 1]\n"
        "    assert candidate(nums=[3, 2, 4], target=6) == [1, 2]\n\n"
        "check(Solution().twoSum)\n"
    }
)
# The same checks in a form only the judge sandbox runs (a statement that is not `assert call == literal`).
JUDGED = json.dumps(
    {
        "functional": "def check(candidate):\n"
        "    result = candidate(nums=[2, 7, 11, 15], target=9)\n"
        "    assert sorted(result) == [0, 1]\n"
        "    assert candidate(nums=[3, 2, 4], target=6) == [1, 2]\n\n"
        "check(Solution().twoSum)\n"
    }
)
# GURU's TACO/PrimeIntellect form: a _deep_eq loop over literal inputs and outputs.
TACO = json.dumps({"functional": deep_eq_test_code([[1, 2], [3, 4]], [[3], [7]], "add")})
TWO_SUM = (
    "class Solution:\n"
    "    def twoSum(self, nums, target):\n"
    "        seen = {}\n"
    "        for i, x in enumerate(nums):\n"
    "            if target - x in seen:\n"
    "                return [seen[target - x], i]\n"
    "            seen[x] = i\n"
)


def _score(tests: str, body: str, **kwargs) -> dict:
    return compute_score("codegen__taco", f"```python\n{body}\n```", tests, **kwargs)


def _stdin_tests(pairs: list[tuple[str, str]]) -> str:
    return json.dumps({"inputs": [i for i, _ in pairs], "outputs": [o for _, o in pairs]})


# ------------------------------------------------------------------------------------------------- forging a pass
FUNCTIONAL_FORGERIES = {
    "sys.exit(0) at import": "import sys\nsys.exit(0)",
    "os._exit(0) at import": "import os\nos._exit(0)",
    "os._exit(0) in the method": "import os\nclass Solution:\n    def twoSum(self, nums, target):\n        os._exit(0)",
    "atexit hook exits 0": "import atexit, os\natexit.register(lambda: os._exit(0))\nraise SystemExit(1)",
    "SystemExit(0) in the method": "class Solution:\n    def twoSum(self, nums, target):\n        raise SystemExit(0)",
    "always-equal object": "class E:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
    "class Solution:\n    def twoSum(self, nums, target):\n        return E()",
    "list subclass equal to all": "class L(list):\n    def __eq__(self, other):\n        return True\n"
    "class Solution:\n    def twoSum(self, nums, target):\n        return L([9, 9])",
    "patched builtins": "import builtins\nbuiltins.AssertionError = type('Nope', (BaseException,), {})\n"
    "builtins.isinstance = lambda *a: True\n"
    "class Solution:\n    def twoSum(self, nums, target):\n        return [5, 5]",
    "frame walking to the test": "import sys\nclass Solution:\n    def twoSum(self, nums, target):\n"
    "        f = sys._getframe(1)\n        while f is not None:\n            f.f_globals['check'] = lambda c: None\n"
    "            f = f.f_back\n        return []",
}


@pytest.mark.parametrize("tests", [LEETCODE, JUDGED], ids=["read as calls", "judge sandbox"])
@pytest.mark.parametrize("body", FUNCTIONAL_FORGERIES.values(), ids=FUNCTIONAL_FORGERIES.keys())
def test_functional_forgeries_score_zero(body: str, tests: str) -> None:
    result = _score(tests, body)
    assert result["score"] == 0.0 and result["acc"] is False


def test_functional_correct_answers_score() -> None:
    assert _score(LEETCODE, TWO_SUM)["score"] == 1.0
    assert _score(JUDGED, TWO_SUM)["score"] == 1.0
    assert _score(TACO, "def add(a, b):\n    return a + b")["score"] == 1.0


def test_functional_dataset_tolerance_cannot_be_patched() -> None:
    """TACO's _deep_eq compares floats with a tolerance; the program cannot replace _deep_eq or math.isclose."""
    body = "import math\nmath.isclose = lambda *a, **k: True\ndef _deep_eq(*a, **k):\n    return True\n"
    assert _score(TACO, body + "def add(a, b):\n    return 0.5")["score"] == 0.0


CALL_FORGERIES = {
    "always-equal object": "class E:\n    def __eq__(self, other):\n        return True\n"
    "def add(a, b):\n    return E()",
    "int subclass equal to all": "class I(int):\n    def __eq__(self, other):\n        return True\n"
    "def add(a, b):\n    return I(0)",
    "os._exit(0) in the call": "import os\ndef add(a, b):\n    os._exit(0)",
    "protocol garbage": "import os\ndef add(a, b):\n    for fd in range(3, 40):\n        try:\n"
    "            os.write(fd, b'\\xff\\xff\\xff\\xff' + b'{}' * 10)\n        except OSError:\n            pass\n"
    "    return a + b",
    "fake replies on every fd": "import os, json, struct\ndef add(a, b):\n"
    "    frame = json.dumps({'ok': True, 'value': {'r': 0, 'n': []}}).encode()\n"
    "    for fd in range(3, 40):\n        try:\n            os.write(fd, struct.pack('>I', len(frame)) + frame)\n"
    "        except OSError:\n            pass\n    return 0",
}


@pytest.mark.parametrize("body", CALL_FORGERIES.values(), ids=CALL_FORGERIES.keys())
def test_call_forgeries_score_zero(body: str) -> None:
    result = _score(CALLS, body)
    assert result["score"] == 0.0 and result["acc"] is False


def test_integers_compare_exactly_floats_with_tolerance() -> None:
    assert _score(_stdin_tests([("", "1000000\n")]), "print(1000001)")["score"] == 0.0
    assert _score(_stdin_tests([("", "1000000\n")]), "print(1000000.0)")["score"] == 1.0
    assert _score(_stdin_tests([("", "0.5\n")]), "print(0.5000001)")["score"] == 1.0
    ints = json.dumps({"fn_name": "f", "inputs": [[]], "outputs": [1000000]})
    assert _score(ints, "def f():\n    return 1000001")["score"] == 0.0
    assert _score(ints, "def f():\n    return 1000000.0000001")["score"] == 0.0
    floats = json.dumps({"fn_name": "f", "inputs": [[]], "outputs": [0.1]})
    assert _score(floats, "def f():\n    return 0.1 + 1e-9")["score"] == 1.0


def test_exit_builtins_work_as_in_python() -> None:
    assert _score(STDIN, ADD + "\nexit()")["score"] == 1.0
    assert _score(STDIN, ADD + "\nquit(0)")["score"] == 1.0
    assert _score(STDIN, ADD + "\nexit(1)")["score"] == 0.0


def test_stdin_needs_a_clean_exit() -> None:
    assert _score(STDIN, "import sys\nsys.exit(0)")["score"] == 0.0
    assert _score(STDIN, ADD + "\nimport sys\nsys.exit(3)")["score"] == 0.0
    assert _score(STDIN, ADD + "\nimport os\nos._exit(0)")["score"] == 0.0  # unflushed output is lost, as usual


# ------------------------------------------------------------------------------------------------- reaching secrets
SCAN = r"""
import os, re
def scan(pattern):
    rx = re.compile(pattern.encode())
    def look(data):
        m = rx.search(data)
        return m.group(0).decode() if m else None
    found = os.environ.get('BOTS_TEST_SECRET')
    for pid in os.listdir('/proc'):
        for name in ('environ', 'cmdline'):
            try:
                with open(f'/proc/{pid}/{name}', 'rb') as f:
                    found = found or look(f.read())
            except OSError:
                pass
    for fd in range(64):
        try:
            found = found or look(os.pread(fd, 1 << 20, 0))
        except OSError:
            pass
    for path in PATHS:
        try:
            with open(path, 'rb') as f:
                found = found or look(f.read())
        except OSError:
            pass
    for root, dirs, files in os.walk('/'):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ('/usr', '/proc', '/sys', '/dev', PREFIX)]
        for name in files:
            try:
                with open(os.path.join(root, name), 'rb') as f:
                    found = found or look(f.read(1 << 20))
            except OSError:
                pass
    return found
"""


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A secret in the scorer's environment and in a world-readable file; the program may not reach either."""
    secret = "SECRET" + secrets.token_hex(16)
    monkeypatch.setenv("BOTS_TEST_SECRET", secret)
    (tmp_path / "secret.txt").write_text(secret)
    (tmp_path / "secret.txt").chmod(0o644)
    return secret


def _scan_source(tmp_path: Path) -> str:
    paths = [str(tmp_path / "secret.txt"), "/proc/1/environ", f"/proc/{os.getpid()}/environ", os.path.expanduser("~")]
    return f"PATHS = {paths!r}\nPREFIX = {sys.base_prefix!r}\n" + SCAN


def test_stdin_program_cannot_read_expected_output_or_secrets(planted: str, tmp_path: Path) -> None:
    # The expected output is the secret itself: printing it would score.
    tests = _stdin_tests([("", planted + "\n")])
    result = _score(tests, _scan_source(tmp_path) + "print(scan(r'SECRET[0-9a-f]{32}'))")
    assert result["score"] == 0.0 and result["status"] == "wrong_answer"


def test_call_program_cannot_read_expected_output(planted: str, tmp_path: Path) -> None:
    tests = json.dumps({"fn_name": "f", "inputs": [[]], "outputs": [planted]})
    result = _score(tests, _scan_source(tmp_path) + "def f():\n    return scan(r'SECRET[0-9a-f]{32}')")
    assert result["score"] == 0.0 and result["status"] == "wrong_answer"


@pytest.mark.parametrize("form", ["assert f() == {token!r}\n", "x = f()\nassert x == {token!r}\n"])
def test_functional_program_cannot_read_the_test_code(form: str, planted: str, tmp_path: Path) -> None:
    token = "TOKEN" + secrets.token_hex(16)
    tests = json.dumps({"functional": form.format(token=token)})
    body = _scan_source(tmp_path) + "def f():\n    return scan(r'TOKEN[0-9a-f]{32}')"
    result = _score(tests, body)
    assert result["score"] == 0.0 and result["status"] == "wrong_answer"
    assert _score(tests, f"def f():\n    return {token!r}")["score"] == 1.0  # the same test passes a right answer


# ------------------------------------------------------------------------------------------------- processes
def test_fork_bomb_is_limited_and_dies(mark: str, survivors) -> None:
    body = mark + (
        "import os\nmark()\nwhile True:\n    try:\n        if os.fork() == 0:\n            mark()\n"
        "    except OSError:\n        pass\n"
    )
    start = time.monotonic()
    result = _score(STDIN, body, timeout_s=2)
    assert result["score"] == 0.0 and result["status"] == "timeout"
    assert time.monotonic() - start < 30  # hang guard: the answer's limit is 2 s
    assert survivors() == []


def test_process_count_is_limited(mark: str, survivors) -> None:
    body = mark + (
        "import os, time\nn = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        mark()\n        time.sleep(30)\n        os._exit(0)\n    n += 1\n"
        "print('limited' if n < 300 else 'unlimited')\n"
    )
    assert _score(_stdin_tests([("", "limited\n")]), body)["score"] == 1.0
    assert survivors() == []


DAEMONS = {
    "setsid double-fork daemon": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
    "        mark()\n        time.sleep(60)\n    os._exit(0)\n",
    "background child": "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', "
    "'import time; time.sleep(60)', TAG])\n",
    "daemon thread and child ignoring SIGTERM": "import os, signal, threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "if os.fork() == 0:\n    mark()\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    time.sleep(60)\n",
}


@pytest.mark.parametrize("daemon", DAEMONS.values(), ids=DAEMONS.keys())
def test_nothing_outlives_the_answer(daemon: str, mark: str, tag: str, survivors) -> None:
    # A correct answer that leaves something behind still scores; what it left is gone when scoring returns.
    body = mark + f"TAG = {tag!r}\n" + daemon + ADD
    assert _score(STDIN, body)["score"] == 1.0
    assert survivors() == []
    indented = "".join(f"    {line}\n" for line in daemon.splitlines())
    call_body = mark + f"TAG = {tag!r}\n" + "def add(a, b):\n" + indented
    assert _score(CALLS, call_body + "    return a + b")["score"] == 1.0
    assert survivors() == []


def test_hanging_after_the_answer_times_out(mark: str, survivors) -> None:
    result = _score(STDIN, mark + ADD + "\nimport sys, time\nsys.stdout.flush()\nmark()\ntime.sleep(60)", timeout_s=2)
    assert result["score"] == 0.0 and result["status"] == "timeout"
    assert survivors() == []


# ------------------------------------------------------------------------------------------------- time and resources
def test_one_time_limit_per_answer_not_per_test() -> None:
    slow = _stdin_tests([(f"{i} 1\n", f"{i + 1}\n") for i in range(10)])
    start = time.monotonic()
    result = _score(slow, "import time\ntime.sleep(0.6)\n" + ADD, timeout_s=2)
    elapsed = time.monotonic() - start
    assert result["status"] == "timeout" and result["passed"] < 10
    assert elapsed < 5.5  # 10 tests x 0.6 s need 6 s: the answer's 2 s limit ends it (generous hang guard)
    calls = json.dumps({"fn_name": "f", "inputs": [[i] for i in range(6)], "outputs": [[i] for i in range(6)]})
    start = time.monotonic()
    assert _score(calls, "def f(x):\n    while True:\n        pass", timeout_s=1)["status"] == "timeout"
    assert time.monotonic() - start < 6  # was 6 x 1 s


RESOURCE_ATTACKS = {
    "memory": ("x = bytearray(8 * 1024**3)\n" + ADD, "error"),
    "output flood": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", "output_limit"),
    # Python frames live on the heap: the address-space limit or the clock ends it, whichever comes first.
    "deep recursion": (
        "import sys\nsys.setrecursionlimit(10**9)\ndef f(n):\n    return f(n + 1)\nf(0)",
        ("error", "timeout"),
    ),
    "busy loop": ("while True:\n    pass", "timeout"),
    "fd exhaustion": ("import os\nfds = [os.open('/dev/null', os.O_RDONLY) for _ in range(10**6)]", "error"),
    "memfd hoarding": (
        "import os\nfds = []\nwhile True:\n    fd = os.memfd_create('x')\n    os.write(fd, b'x' * (64 << 20))\n"
        "    fds.append(fd)",
        "error",
    ),
    "sleeping": ("import time\ntime.sleep(60)", "timeout"),
}


def test_kernel_memory_and_namespace_calls_are_denied() -> None:
    """Memory the address-space limit does not see (SysV shm, memfd) and nested namespaces are refused."""
    body = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "results = [libc.shmget(0, 1 << 30, 0o1600), libc.msgget(0, 0o1600), libc.unshare(0x10000000 | 0x20000)]\n"
        "try:\n    os.memfd_create('x')\n    results.append(0)\nexcept OSError:\n    results.append(-1)\n"
        "print(' '.join('denied' if r == -1 else 'allowed' for r in results))\n"
    )
    assert _score(_stdin_tests([("", "denied denied denied denied\n")]), body)["score"] == 1.0


def test_threads_still_work() -> None:
    """The competitive-programming idiom of a big-stack thread must keep working under the filter."""
    body = (
        "import sys, threading\nsys.setrecursionlimit(10**6)\nthreading.stack_size(1 << 26)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "def main():\n    print(depth(int(input())))\nt = threading.Thread(target=main)\nt.start()\nt.join()\n"
    )
    assert _score(_stdin_tests([("50000\n", "50000\n")]), body)["score"] == 1.0


@pytest.mark.parametrize(("body", "status"), RESOURCE_ATTACKS.values(), ids=RESOURCE_ATTACKS.keys())
def test_resource_attacks_fail_cleanly(body: str, status: str | tuple[str, ...]) -> None:
    start = time.monotonic()
    result = _score(STDIN, body, timeout_s=3)
    assert result["score"] == 0.0 and result["status"] in ((status,) if isinstance(status, str) else status)
    assert time.monotonic() - start < 30  # hang guard


def test_temp_dir_games_between_tests_change_nothing() -> None:
    """Booby-trapping /tmp (FIFOs, no permissions, a full tmpfs, deleted files) neither raises nor breaks later
    tests of the same answer; the scorer keeps no files there."""
    body = (
        "import os\ndata = input()\n"
        "for trap in (lambda: os.mkfifo('/tmp/stdout.txt'), lambda: open('/tmp/big', 'wb').write(b'x' * (200 << 20)),"
        " lambda: os.remove('/tmp/big'), lambda: os.chmod('/tmp', 0), lambda: os.rmdir('/tmp'),"
        " lambda: os.unlink('/proc/self/fd/1')):\n"
        "    try:\n        trap()\n    except (OSError, MemoryError):\n        pass\n"
        "print(sum(map(int, data.split())))\n"
    )
    tests = _stdin_tests([(f"{i} {i}\n", f"{2 * i}\n") for i in range(4)])
    assert _score(tests, body)["score"] == 1.0


def test_no_writes_outside_the_sandbox(tmp_path: Path, tag: str) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("keep me")
    targets = [
        tmp_path / "pwned",
        REPO / f"PWNED_{tag}",
        Path(sys.base_prefix) / f"pwned_{tag}",
        Path("/usr") / f"pwned_{tag}",
        Path(os.path.expanduser("~")) / f"pwned_{tag}",
        Path(f"/pwned_{tag}"),
        Path(f"/dev/pwned_{tag}"),
    ]
    body = (
        f"import os, shutil\ntargets = {[str(t) for t in targets]!r}\nn = 0\nfor t in targets:\n    try:\n"
        "        with open(t, 'w') as f:\n            f.write('x')\n        n += 1\n    except OSError:\n        pass\n"
        f"shutil.rmtree({str(tmp_path)!r}, ignore_errors=True)\nprint(n)\n"
    )
    try:
        assert _score(_stdin_tests([("", "0\n")]), body)["score"] == 1.0  # no target writable inside
        assert not [t for t in targets if t.exists()]
        assert canary.read_text() == "keep me"
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------- network, signals
def test_no_network_to_the_host() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    abstract_name = "\0bots_test_" + secrets.token_hex(8)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    port = listener.getsockname()[1]
    body = (
        "import socket\nhits = 0\n"
        f"for family, addr in [(socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {abstract_name!r}),"
        " (socket.AF_INET, ('1.1.1.1', 53))]:\n"
        "    try:\n        s = socket.socket(family, socket.SOCK_STREAM)\n        s.settimeout(1)\n"
        "        s.connect(addr)\n        s.sendall(b'pwned')\n        hits += 1\n    except OSError:\n        pass\n"
        "print(hits)\n"
    )
    try:
        assert _score(_stdin_tests([("", "0\n")]), body)["score"] == 1.0
        for server in (listener, abstract):
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        listener.close()
        abstract.close()


SIGNAL_ATTACKS = {
    "kill the harness": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + ADD,
    "kill everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n" + ADD,
    "stop the harness": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n" + ADD,
    "kill the host pid": "import os, signal\nfor pid in (PID, 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
    "    except OSError:\n        pass\n" + ADD,
}


@pytest.mark.parametrize("body", SIGNAL_ATTACKS.values(), ids=SIGNAL_ATTACKS.keys())
def test_signals_reach_nothing_outside(body: str) -> None:
    canary = subprocess.Popen(["sleep", "60"])
    try:
        start = time.monotonic()
        result = _score(STDIN, f"PID = {canary.pid}\n" + body, timeout_s=2)
        assert time.monotonic() - start < 30  # hang guard
        assert canary.poll() is None  # the host process is untouched
        assert result["status"] in ("ok", "error", "timeout")
    finally:
        canary.kill()
        canary.wait()


# ------------------------------------------------------------------------------------------------- what the judge gets
JUDGE_ATTACKS = {
    "deeply nested list": "class Solution:\n    def twoSum(self, nums, target):\n        x = []\n"
    "        for _ in range(300000):\n            x = [x]\n        return x",
    "cyclic list": "class Solution:\n    def twoSum(self, nums, target):\n        x = [0]\n        x.append(x)\n"
    "        return x",
    "huge int": "class Solution:\n    def twoSum(self, nums, target):\n        return 10 ** 200000",
    "unsendable object": "class Solution:\n    def twoSum(self, nums, target):\n        return (x for x in [0, 1])",
}


@pytest.mark.parametrize("tests", [LEETCODE, JUDGED], ids=["read as calls", "judge sandbox"])
@pytest.mark.parametrize("body", JUDGE_ATTACKS.values(), ids=JUDGE_ATTACKS.keys())
def test_answers_that_attack_the_judge_score_zero(body: str, tests: str) -> None:
    start = time.monotonic()
    result = _score(tests, body, timeout_s=3)
    assert result["score"] == 0.0 and result["status"] != "ok"
    assert time.monotonic() - start < 30  # hang guard
