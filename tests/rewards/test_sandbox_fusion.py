"""Code scoring on a SandboxFusion server: every kind of code test, right and wrong programs, through the dispatcher.

The server is a stand-in on 127.0.0.1 (:mod:`sandbox_fusion_server`) that runs each posted program in a subprocess,
so these tests need no bubblewrap and reach no other host.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sandbox_fusion_server import FakeSandboxFusion, fake_sandbox_fusion

from bots_verl.rewards import compute_score


@pytest.fixture(scope="module")
def server() -> Iterator[FakeSandboxFusion]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NO_PROXY", "127.0.0.1")  # a proxy set in the environment must not see loopback requests
        patch.setenv("no_proxy", "127.0.0.1")
        with fake_sandbox_fusion() as running:
            yield running


# The time limit of one answer here: generous, so that a loaded test machine does not turn a right program's slow
# interpreter start-ups into a timeout.
_SLOW_MACHINE_S = 60.0


def _code(body: str) -> str:
    return f"My solution:\n```python\n{body}\n```\n"


STDIN = {"inputs": ["2 3\n", "10 -4\n"], "outputs": ["5\n", "6\n"]}
FN_NAME = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]}
# Arguments with braces, quotes and a tuple result: the program carrying them must stay intact.
FN_NAME_TEXT = {"fn_name": "wrap", "inputs": [["{}"], ["{x}'\""]], "outputs": [[["{}", 2]], [["{x}'\"", 5]]]}
LEETCODE = {"functional": "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n\ncheck(Solution().total)\n"}
HUMANEVAL = {"functional": "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n\ncheck(total)\n"}
LIVECODEBENCH = {
    "functional": "def check_total():\n    assert Solution().total([1, 2]) == 3\n"
    "    assert Solution().total([]) == 0\n\ncheck_total()\n"
}
TACO = {
    "functional": "_inputs = [[1, 2], [5, 5]]\n_outputs = [[3], [10]]\nimport math\n"
    "def _deep_eq(a, b, tol=1e-5):\n"
    "    if isinstance(a, float) or isinstance(b, float):\n"
    "        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)\n"
    "    if isinstance(a, (list, tuple)):\n"
    "        if len(a) != len(b): return False\n"
    "        return all(_deep_eq(x, y, tol) for x, y in zip(a, b))\n"
    "    return a == b\n\n"
    "for i, o in zip(_inputs, _outputs):\n"
    "    assert _deep_eq(add(*i), o[0] if len(o) == 1 else tuple(o))\n"
}
# Not one of GURU's literal forms: runs in one process with the program.
JUDGED = {"functional": "for n in range(6):\n    assert square(n) == n * n\n"}

SOLUTION_TOTAL = "class Solution:\n    def total(self, xs: List[int]) -> int:\n        return sum(xs)"
SOLUTION_TOTAL_WRONG = "class Solution:\n    def total(self, xs):\n        return len(xs)"

# (test name, ground truth, right program, wrong program, requests a right program makes); a wrong program's status
# is wrong_answer, except under judged test code, where a failed assert is a non-zero exit: error.
CASES = [
    ("stdin", STDIN, "a, b = map(int, input().split())\nprint(a + b)", "print(5)", 2),
    ("fn_name function", FN_NAME, "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b", 1),
    (
        "fn_name Solution method",
        FN_NAME,
        "class Solution:\n    def add(self, a, b):\n        return a + b",
        "class Solution:\n    def add(self, a, b):\n        return a * b",
        1,
    ),
    (
        "fn_name text and tuple",
        FN_NAME_TEXT,
        "def wrap(s):\n    print('debug', end='')\n    return (s, len(s))",
        "def wrap(s):\n    return (s, 0)",
        1,
    ),
    ("leetcode check(Solution().f)", LEETCODE, SOLUTION_TOTAL, SOLUTION_TOTAL_WRONG, 1),
    ("humaneval check(f)", HUMANEVAL, "def total(xs):\n    return sum(xs)", "def total(xs):\n    return 6 * 0", 1),
    ("livecodebench Solution().f(...)", LIVECODEBENCH, SOLUTION_TOTAL, SOLUTION_TOTAL_WRONG, 1),
    ("taco _deep_eq loop", TACO, "def add(a, b):\n    return a + b", "def add(a, b):\n    return 3", 1),
    ("judged test code", JUDGED, "def square(n):\n    return n * n", "def square(n):\n    return n + n", 1),
]


@pytest.mark.parametrize(("name", "tests", "right", "wrong", "runs"), CASES, ids=[c[0] for c in CASES])
def test_every_test_kind_on_sandbox_fusion(
    server: FakeSandboxFusion, name: str, tests: dict, right: str, wrong: str, runs: int
) -> None:
    extra = {"prefix": "from typing import *"}
    options = {"sandbox_fusion_url": server.url, "timeout_s": _SLOW_MACHINE_S}
    before = len(server.requests)
    good = compute_score("codegen__leetcode2k", _code(right), json.dumps(tests), extra, **options)
    assert (good["score"], good["acc"], good["status"]) == (1.0, True, "ok"), good
    assert len(server.requests) - before == runs  # it really ran there, as many times as this kind needs
    bad = compute_score("codegen__leetcode2k", _code(wrong), json.dumps(tests), extra, **options)
    wrong_status = "error" if tests is JUDGED else "wrong_answer"
    assert (bad["score"], bad["acc"], bad["status"]) == (0.0, False, wrong_status), bad


def test_crash_and_timeout_on_sandbox_fusion(server: FakeSandboxFusion) -> None:
    crash = compute_score(
        "codegen__taco",
        _code("raise SystemExit(3)"),
        json.dumps(STDIN),
        sandbox_fusion_url=server.url,
        timeout_s=_SLOW_MACHINE_S,
    )
    assert (crash["score"], crash["status"]) == (0.0, "error")
    spin = compute_score(
        "codegen__primeintellect",
        _code("def add(a, b):\n    while True:\n        pass"),
        json.dumps(FN_NAME),
        sandbox_fusion_url=server.url,
        timeout_s=1,
    )
    assert (spin["score"], spin["status"]) == (0.0, "timeout")


def test_server_shuts_down() -> None:
    """The helper frees its port at the end of the ``with`` block: no test leaves a server behind."""
    import requests

    with fake_sandbox_fusion() as running:
        url = running.url
        assert requests.post(url, json={"code": "print(1)", "language": "python"}, timeout=10).json()["status"] == (
            "Success"
        )
    with pytest.raises(requests.ConnectionError):
        requests.post(url, json={"code": "print(1)", "language": "python"}, timeout=5)
