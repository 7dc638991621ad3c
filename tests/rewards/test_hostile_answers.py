"""Hostile math and logic answers, and answer extraction: never raising, never hanging, from any thread."""

from __future__ import annotations

import concurrent.futures
import json
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_verl.rewards import compute_score
from bots_verl.rewards._extract import after_think, last_answer_tag, last_boxed, last_code_block

TOWER = "\\boxed{9^{9^{9^{9}}}}"


def _in_thread(fn, *args, **kwargs):
    """Run ``fn`` in a worker thread, as verl's reward loop does (run_in_executor)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=120)


# ------------------------------------------------------------------------------------------------- math
def test_power_tower_from_a_worker_thread_returns_zero() -> None:
    start = time.monotonic()
    result = _in_thread(compute_score, "math__dapo", TOWER, "4", timeout_s=2)
    assert result["score"] == 0.0 and result["acc"] is False
    assert time.monotonic() - start < 60  # hang guard (it ran for ever before); the limit is 2 s after startup
    # The pool recovers: the next symbolic check works.
    assert _in_thread(compute_score, "math__dapo", "\\boxed{0.5}", "\\frac{1}{2}")["score"] == 1.0


def test_many_threads_with_hostile_and_honest_answers() -> None:
    cases = [(TOWER, "4", 0.0), ("\\boxed{x^2+1}", "1+x^2", 1.0), ("\\boxed{(10^{10})!}", "3", 0.0)] * 2
    cases += [("\\boxed{\\frac{2}{4}}", "0.5", 1.0), ("\\boxed{3}", "4", 0.0)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(compute_score, "math__x", r, g, timeout_s=2) for r, g, _ in cases]
        scores = [f.result(timeout=300)["score"] for f in futures]
    assert scores == [want for _, _, want in cases]


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{" * 200_000,
        "\\boxed{" + "{" * 100_000 + "}" * 100_000 + "}",
        "\\boxed{" + "x" * 2000 + "}",  # longer than any final answer: not sent to sympy
        "\\boxed{\\frac{" + "1}{" * 300 + "2}}",
        "</think>" * 50_000 + "\\boxed{1}",
        "\\boxed{\x00\ud800}",
        "\\boxed 5",
    ],
    ids=["open boxes", "deep braces", "too long", "deep fractions", "think tags", "odd characters", "bare box"],
)
def test_math_pathological_answers(response: str) -> None:
    start = time.monotonic()
    result = _in_thread(compute_score, "math__x", response, "4", timeout_s=2)
    assert result["score"] == 0.0 and isinstance(result["acc"], bool)
    assert time.monotonic() - start < 60  # hang guard


# ------------------------------------------------------------------------------------------------- logic
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e308", "nan", "inf"]


@pytest.mark.parametrize("token", NON_FINITE)
def test_non_finite_numbers_in_logic_answers(token: str) -> None:
    assert compute_score("simulation__arcagi1", f"<answer>[[{token}, 1]]</answer>", [[1, 1]])["score"] == 0.0
    assert compute_score("simulation__barc", f"<answer>[[{token}]]</answer>", [[1]])["score"] == 0.0
    ordering = compute_score("logic__ordering_puzzle_dataset", f"<answer>[{token}]</answer>", ["a"])
    assert ordering["score"] == 0.0
    zebra = {"header": ["House"], "rows": [["1"]]}
    answer = f'<answer>{{"header": ["House"], "rows": [[{token}]]}}</answer>'
    assert compute_score("logic__zebra_puzzle_dataset", answer, zebra, partial_credit=True)["score"] == 0.0


@pytest.mark.parametrize(
    "answer",
    [
        "[" * 5000 + "]" * 5000,
        "[[" + "9" * 5000 + "]]",
        "[[" + ",".join(["1"] * 9000) + "]]",
        '{"rows": ' + "[" * 990 + "]" * 990 + "}",
        "[[True, False]]",
        "[[1, 2], 3]",
        "[[1, 2]] * 10**9",
        "__import__('os').system('true')",
    ],
)
def test_logic_pathological_answers(answer: str) -> None:
    for source, truth in [
        ("simulation__arcagi1", [[1, 2], [3, 4]]),
        ("logic__ordering_puzzle_dataset", ["a", "b"]),
        ("logic__graph_logical_dataset", "ab"),
        ("logic__zebra_puzzle_dataset", {"header": ["H"], "rows": [["1", "2"]]}),
    ]:
        result = compute_score(source, f"<answer>{answer}</answer>", truth)
        assert result["acc"] is False and math.isfinite(result["score"])


LOGIC_PIECES = [*"<>/answer[]{}(),.0123456789eE-+\"' \n", "<answer>", "</answer>", "NaN"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LOGIC_PIECES)).map("".join))
def test_logic_scorers_never_raise(text: str) -> None:
    for source, truth in [
        ("simulation__arcagi1", [[1]]),
        ("logic__ordering_puzzle_dataset", ["a"]),
        ("logic__graph_logical_dataset", "a"),
        ("logic__zebra_puzzle_dataset", {"header": ["H"], "rows": [["1"]]}),
    ]:
        result = compute_score(source, text, truth)
        assert isinstance(result["score"], float) and isinstance(result["acc"], bool)


# ------------------------------------------------------------------------------------------------- extraction
LONG_INPUTS = {
    "128 KB of <answer> tags": (last_answer_tag, "<answer>" * 16_384),
    "alternating open/close": (last_answer_tag, "<answer></answer" * 10_000),
    "code fence + 64k spaces": (last_code_block, "```" + " " * 65_536),
    "fence, spaces and tag, repeated": (last_code_block, ("``` " + " " * 1000 + "py") * 200),
    "100k fences": (last_code_block, "```" * 100_000),
    "open boxes": (last_boxed, "\\boxed{" * 100_000),
    "think tags": (after_think, "</think>" * 100_000),
}


@pytest.mark.parametrize(("fn", "text"), LONG_INPUTS.values(), ids=LONG_INPUTS.keys())
def test_extraction_is_linear(fn, text: str) -> None:
    start = time.monotonic()
    fn(text)
    # Hang guard: these took 21 s and 8.5 s with the quadratic patterns; linear scans take milliseconds.
    assert time.monotonic() - start < 2


def test_extraction_semantics() -> None:
    assert last_answer_tag("<ANSWER> a </Answer> <answer>b") == "a"  # an unclosed tag does not count
    assert last_answer_tag("<answer>x <answer> y </answer>") == "y"  # innermost of nested openings
    assert last_code_block("```python\nprint(1)\n``` then ```\nx\n```") == "print(1)"  # python-tagged wins
    assert last_code_block("```py  \nprint(2)\n```") == "print(2)"
    assert last_code_block("```json\n{}\n```") is None
    assert last_code_block("```\n\n```") is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["`", "```", "\n", " ", "\t", "py", "python", "x", "{", "}", "\\boxed"])).map("".join))
def test_extraction_never_raises(text: str) -> None:
    for fn in (last_code_block, last_answer_tag, last_boxed, after_think):
        result = fn(text)
        assert result is None or isinstance(result, str)


def test_code_scorer_without_code_needs_no_sandbox() -> None:
    tests = json.dumps({"inputs": ["1"], "outputs": ["1"]})
    for response in [None, 3, "", "```python\n", "``` " + " " * 65_536]:
        assert compute_score("codegen__taco", response, tests)["status"] == "no_code"
