"""Reward functions: correct, wrong and malformed answers for every domain, through the public dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bots_verl.rewards import compute_score, domain_of, supports

MALFORMED = [
    "",
    "no answer at all",
    "<answer>",
    "\\boxed{",
    "```python\n",
    None,
    "<answer>[[1, 2]</answer>",
    "x" * 50_000,
]


def _check(result: dict, acc: bool) -> None:
    assert isinstance(result["score"], float)
    assert result["acc"] is acc


# ---------------------------------------------------------------- math
@pytest.mark.parametrize(
    ("response", "truth", "acc"),
    [
        ("reasoning... so the answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", True),
        ("\\boxed{0.5}", "\\frac12", True),
        ("<think>maybe \\boxed{7}</think> final: \\boxed{x^2+1}", "1+x^2", True),
        ("\\boxed{\\text{(B)}}", "(B)", True),
        ("first \\boxed{2} then \\boxed{3}", "2", False),  # the last box is the answer
        ("\\boxed{3}", "4", False),
        ("<think>\\boxed{4}</think> I give up", "4", False),  # a box inside the thinking does not count
    ],
)
def test_math(response: str, truth: str, acc: bool) -> None:
    result = compute_score("math__merged_deduped_dapo_or1_dataset", response, truth)
    _check(result, acc)
    assert result["score"] == float(acc)


@pytest.mark.parametrize("response", MALFORMED)
def test_math_malformed_is_a_failure(response) -> None:
    _check(compute_score("math__deepscaler_preview", response, "4"), False)


# ---------------------------------------------------------------- code
STDIN_TESTS = json.dumps({"inputs": ["2 3\n", "10 -4\n"], "outputs": ["5\n", "6\n"]})
FUNCTIONAL = json.dumps(
    {"functional": "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n\ncheck(Solution().total)\n"}
)
CALL_TESTS = json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]})


def _code(body: str) -> str:
    return f"Here is my solution:\n```python\n{body}\n```\n"


@pytest.mark.parametrize(
    ("source", "tests", "body", "acc"),
    [
        ("codegen__taco", STDIN_TESTS, "a, b = map(int, input().split())\nprint(a + b)", True),
        ("codegen__taco", STDIN_TESTS, "a, b = map(int, input().split())\nprint(a * b)", False),
        ("codegen__livecodebench", STDIN_TESTS, "a, b = map(int, input().split())\nprint(float(a + b))", True),
        (
            "codegen__leetcode2k",
            FUNCTIONAL,
            "class Solution:\n    def total(self, xs: List[int]) -> int:\n        return sum(xs)",
            True,
        ),
        ("codegen__leetcode2k", FUNCTIONAL, "class Solution:\n    def total(self, xs):\n        return 0", False),
        ("codegen__primeintellect", CALL_TESTS, "def add(a, b):\n    return a + b", True),
        ("codegen__primeintellect", CALL_TESTS, "def add(a, b):\n    return a - b", False),
        ("codegen__taco", STDIN_TESTS, "raise SystemExit(3)", False),
    ],
)
def test_code(source: str, tests: str, body: str, acc: bool, sandbox: str) -> None:
    extra = {"prefix": "from typing import *"}
    _check(compute_score(source, _code(body), tests, extra_info=extra), acc)


def test_code_limits(sandbox: str) -> None:
    """A busy loop hits the time limit, a huge allocation the memory limit: both are failures, quickly."""
    spin = compute_score("codegen__taco", _code("while True:\n    pass"), STDIN_TESTS, timeout_s=1)
    assert spin["acc"] is False and spin["status"] == "timeout"
    hog = compute_score(
        "codegen__taco", _code("x = bytearray(4 * 1024**3)\nprint(5)"), STDIN_TESTS, memory_limit_mb=256
    )
    assert hog["acc"] is False and hog["status"] == "error"


@pytest.mark.parametrize("response", MALFORMED)
def test_code_malformed_is_a_failure(response) -> None:
    _check(compute_score("codegen__taco", response, STDIN_TESTS), False)


def test_code_bad_ground_truth_raises() -> None:
    with pytest.raises(ValueError, match="ground truth"):
        compute_score("codegen__taco", _code("print(1)"), json.dumps({"inputs": ["1"], "outputs": []}))


# ---------------------------------------------------------------- logic
ZEBRA = {"header": ["House", "Name", "Pet"], "rows": [["1", "Alice", "cat"], ["2", "Bob", "dog"]]}


@pytest.mark.parametrize(
    ("source", "response", "truth", "acc"),
    [
        (
            "logic__ordering_puzzle_dataset",
            "<answer> ['pigeon', 'sparrow', 'quail'] </answer>",
            ["pigeon", "sparrow", "quail"],
            True,
        ),
        (
            "logic__ordering_puzzle_dataset",
            '<answer>["Pigeon","sparrow","quail"]</answer>',
            json.dumps(["pigeon", "sparrow", "quail"]),
            True,
        ),
        (
            "logic__ordering_puzzle_dataset",
            "<answer> ['sparrow', 'pigeon', 'quail'] </answer>",
            ["pigeon", "sparrow", "quail"],
            False,
        ),
        ("logic__graph_logical_dataset", "path found. <answer> FDEBME </answer>", "fdebme", True),
        ("logic__graph_logical_dataset", "<answer>f -> d -> e</answer>", "fde", True),
        ("logic__graph_logical_dataset", "<answer>fdeb</answer>", "fdebme", False),
        ("simulation__arcagi1", "<answer>[[1, 2], [3, 4]]</answer>", [[1, 2], [3, 4]], True),
        ("simulation__barc", "<answer>[[1, 2], [3, 4]]</answer>", json.dumps([[1, 2], [3, 4]]), True),
        ("simulation__arcagi2", "<answer>[[1, 2], [3, 5]]</answer>", [[1, 2], [3, 4]], False),
        ("simulation__arcagi2", "<answer>[[1, 2, 0], [3, 4, 0]]</answer>", [[1, 2], [3, 4]], False),
        ("logic__zebra_puzzle_dataset", f"<answer>{json.dumps(ZEBRA)}</answer>", ZEBRA, True),
        ("logic__zebra_puzzle_dataset", f"<answer>{json.dumps(ZEBRA)}</answer>", json.dumps(ZEBRA), True),
    ],
)
def test_logic(source: str, response: str, truth, acc: bool) -> None:
    _check(compute_score(source, response, truth), acc)


def test_zebra_partial_credit_never_in_acc() -> None:
    wrong = {"header": ZEBRA["header"], "rows": [["1", "Alice", "dog"], ["2", "Bob", "cat"]]}
    response = f"<answer>{json.dumps(wrong)}</answer>"
    binary = compute_score("logic__zebra_puzzle_dataset", response, ZEBRA)
    assert binary == {"score": 0.0, "acc": False, "pred": json.dumps(wrong)}
    partial = compute_score("logic__zebra_puzzle_dataset", response, ZEBRA, partial_credit=True)
    assert partial["score"] == pytest.approx(4 / 6) and partial["acc"] is False


@pytest.mark.parametrize(
    ("source", "truth"),
    [
        ("logic__ordering_puzzle_dataset", ["a", "b"]),
        ("logic__graph_logical_dataset", "ab"),
        ("simulation__arcagi1", [[1]]),
        ("logic__zebra_puzzle_dataset", ZEBRA),
    ],
)
@pytest.mark.parametrize("response", MALFORMED)
def test_logic_malformed_is_a_failure(source: str, truth, response) -> None:
    _check(compute_score(source, response, truth), False)


# ---------------------------------------------------------------- dispatcher
def test_routing_and_unknown_source() -> None:
    assert domain_of("simulation__arcagi1") == "logic" and domain_of("codegen__taco") == "code"
    assert domain_of("math__math_500") == "math" and supports("logic__zebra_puzzle_dataset")
    assert not supports("table__hitab")
    with pytest.raises(ValueError, match="no BOTS reward"):
        compute_score("table__hitab", "\\boxed{1}", "1")


def test_import_is_light() -> None:
    """reference_eval imports the dispatcher in plain processes: no torch, verl or sympy at import time."""
    code = "import sys, bots_verl.rewards; print(sorted(m for m in ('torch', 'verl', 'sympy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
