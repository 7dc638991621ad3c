"""What the code reward runs: GURU's tests parsed into a plan (stdin, call-based or functional), limits, result."""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from bots_verl.rewards.code_compare import values_match
from bots_verl.rewards.code_tests import Call, functional_calls

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT_S", "ProgramResult", "TestPlan", "parse_tests", "plan_tests"]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

# One limit per answer, for all of its tests together (verl's prime_code runner allows 5-10 s per test; GURU keeps at
# most 8 tests per problem).
DEFAULT_TIMEOUT_S = 10.0
# reward.sandbox_fusion.memory_limit_mb in verl's config.
DEFAULT_MEMORY_MB = 1024
# The judge runs trusted test code only; it needs no more processes than this.
JUDGE_NPROC = 8
# A return value with more containers than this is not judged (wrong answer): decoding it here would take long.
# Test results in GURU are far smaller (a 10^5-node linked list is 10^5 containers).
MAX_RESULT_NODES = 200_000


@dataclass(frozen=True)
class ProgramResult:
    """Outcome of one program run (:func:`run_program`).

    Attributes:
        status: ``"ok"`` (exit 0), ``"error"`` (non-zero exit, crash, or a limit), ``"timeout"``, ``"output_limit"``
            or ``"sandbox"`` (the SandboxFusion service failed; logged).
        stdout: captured standard output.
    """

    status: str
    stdout: str = ""


def as_text(value: Any) -> str:
    """A test's expected output or input as text (GURU stores some as numbers or lists)."""
    # TACO/APPS sometimes store one test's stdin/stdout as a list of lines.
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def parse_tests(ground_truth: Any) -> dict[str, Any]:
    """Decode and check a code ground truth (a bad ground truth is a data error and raises ``ValueError``).

    Args:
        ground_truth: the JSON string (or already-decoded dict) from ``reward_model.ground_truth``.

    Returns:
        The dict, with either ``functional`` (str) or equal-length ``inputs``/``outputs`` lists (and maybe ``fn_name``).
    """
    tests = ground_truth
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as err:
            raise ValueError(f"code ground truth is not JSON: {ground_truth[:200]!r}") from err
    if not isinstance(tests, dict):
        raise ValueError(f"code ground truth must be a JSON object, got {type(tests).__name__}")
    if isinstance(tests.get("functional"), str) and tests["functional"].strip():
        return tests
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if isinstance(inputs, list) and isinstance(outputs, list) and inputs and len(inputs) == len(outputs):
        return tests
    raise ValueError(
        "code ground truth needs a non-empty 'functional' test or equal-length, non-empty 'inputs'/'outputs' lists; "
        f"got keys {sorted(tests)}"
    )


def _call_args(args: Any) -> list:
    """The argument list of one call-based test (stored as a list, a JSON string of one, or a single value)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as err:
            raise ValueError(f"call-based test input is not JSON: {args[:200]!r}") from err
    return args if isinstance(args, list) else [args]


@dataclass(frozen=True)
class TestPlan:
    """How one ground truth is judged: ``stdin`` runs, ``calls`` compared here, or the ``judge`` sandbox."""

    kind: str
    total: int
    inputs: tuple = ()
    outputs: tuple = ()
    calls: tuple[Call, ...] = ()
    # GURU/APPS store a single return value either bare or wrapped in a one-element list (JSON fn_name tests only).
    unwrap: bool = False
    test: str = ""


def plan_tests(tests: dict[str, Any]) -> TestPlan:
    """Decide how to judge ``tests`` (from :func:`parse_tests`); malformed test inputs raise ``ValueError``."""
    if "functional" in tests:
        calls = functional_calls(tests["functional"])
        if calls is not None:
            return TestPlan("calls", 1, calls=tuple(calls))
        return TestPlan("judge", 1, test=tests["functional"])
    if tests.get("fn_name"):
        calls = tuple(
            Call(str(tests["fn_name"]), _call_args(args), {}, expected)
            for args, expected in zip(tests["inputs"], tests["outputs"], strict=True)
        )
        return TestPlan("calls", len(calls), calls=calls, unwrap=True)
    return TestPlan("stdin", len(tests["inputs"]), inputs=tuple(tests["inputs"]), outputs=tuple(tests["outputs"]))


def call_matches(got: Any, call: Call, unwrap: bool) -> bool:
    """Whether a call-based test's returned value ``got`` matches the expected one."""
    return values_match(got, call.expected, call.tol) or (unwrap and values_match([got], call.expected, call.tol))


_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning the first time this process sees it."""
    with _WARNED_LOCK:
        if message in _WARNED:
            return
        _WARNED.add(message)
    logger.warning("%s", message)
