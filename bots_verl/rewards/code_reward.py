"""Code reward: run the extracted program against GURU's tests; success only when every test passes.

GURU's code ground truth is a JSON string of one of three forms (guru.md §2.3):

- ``{"inputs": [stdin, ...], "outputs": [stdout, ...]}``: the program runs once per test with that stdin; its stdout
  is compared token by token (:func:`~bots_verl.rewards.code_compare.outputs_match`) and it must exit with status 0.
- the same with ``"fn_name"``: call-based tests; each input is the argument list of ``fn_name`` (a top-level function
  or a method of ``Solution``) and the output is the return value
  (:func:`~bots_verl.rewards.code_compare.values_match`).
- ``{"functional": "<test code>"}``: the dataset's own test code (LeetCode's ``check(candidate)``, TACO/PrimeIntellect's
  ``_deep_eq`` loops, LiveCodeBench's ``check_*``), with LeetCode's imports and helpers from ``extra_info["prefix"]``.

Only a program that produces the right outputs can score. The expected outputs never enter the program's sandbox:
for stdin and call-based tests the scorer sends the inputs one at a time and compares in its own process. Functional
test code in one of GURU's literal forms is read as call-based tests (:mod:`bots_verl.rewards.code_tests`); any other
test code runs in a second sandbox (the *judge*) that calls the program over a pipe, passing arguments and return
values as plain data (:mod:`bots_verl.rewards._harness`). So ``sys.exit(0)``, ``os._exit``, ``atexit`` hooks, patched
builtins, objects whose ``__eq__`` is always true and reading files all score 0.

Each answer gets one wall-clock limit (``timeout_s``) for all of its tests together; tests stop at the first failure.
Programs run in bubblewrap sandboxes (:mod:`bots_verl.rewards.sandbox`: own PID namespace, no network, read-only
system view, private ``/tmp``, non-root, process/memory/CPU/file limits), or on a SandboxFusion server
(``sandbox_fusion_url``, for clusters without bubblewrap; functional tests there run in one process with the program,
see the README for what that allows). The score is binary (1.0 when all tests pass) and equals ``acc``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from bots_verl.rewards._extract import after_think, last_code_block
from bots_verl.rewards._harness import CodecError, decode_value, encode_value
from bots_verl.rewards.code_compare import outputs_match, values_match
from bots_verl.rewards.code_tests import Call, functional_calls
from bots_verl.rewards.sandbox import Limits, SandboxUnavailableError, launch, resolve_isolation
from bots_verl.rewards.sandbox_channel import ChannelClosed, DeadlineExceeded
from bots_verl.rewards.sandbox_checks import check_isolation
from bots_verl.rewards.sandbox_slots import concurrency_slot, concurrency_slot_check

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

__all__ = ["ProgramResult", "compute_score", "outputs_match", "parse_tests", "run_program"]

# One limit per answer, for all of its tests together (verl's prime_code runner allows 5-10 s per test; GURU keeps at
# most 8 tests per problem).
DEFAULT_TIMEOUT_S = 10.0
# reward.sandbox_fusion.memory_limit_mb in verl's config.
DEFAULT_MEMORY_MB = 1024
# The judge runs trusted test code only; it needs no more processes than this.
_JUDGE_NPROC = 8
# A return value with more containers than this is not judged (wrong answer): decoding it here would take long.
# Test results in GURU are far smaller (a 10^5-node linked list is 10^5 containers).
_MAX_RESULT_NODES = 200_000


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


def _as_text(value: Any) -> str:
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
class _Plan:
    """How one ground truth is judged: ``stdin`` runs, ``calls`` compared here, or the ``judge`` sandbox."""

    kind: str
    total: int
    inputs: tuple = ()
    outputs: tuple = ()
    calls: tuple[Call, ...] = ()
    # GURU/APPS store a single return value either bare or wrapped in a one-element list (JSON fn_name tests only).
    unwrap: bool = False
    test: str = ""


def _plan(tests: dict[str, Any]) -> _Plan:
    """Decide how to judge ``tests`` (from :func:`parse_tests`); malformed test inputs raise ``ValueError``."""
    if "functional" in tests:
        calls = functional_calls(tests["functional"])
        if calls is not None:
            return _Plan("calls", 1, calls=tuple(calls))
        return _Plan("judge", 1, test=tests["functional"])
    if tests.get("fn_name"):
        calls = tuple(
            Call(str(tests["fn_name"]), _call_args(args), {}, expected)
            for args, expected in zip(tests["inputs"], tests["outputs"], strict=True)
        )
        return _Plan("calls", len(calls), calls=calls, unwrap=True)
    return _Plan("stdin", len(tests["inputs"]), inputs=tuple(tests["inputs"]), outputs=tuple(tests["outputs"]))


def _call_matches(got: Any, call: Call, unwrap: bool) -> bool:
    return values_match(got, call.expected, call.tol) or (unwrap and values_match([got], call.expected, call.tol))


_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _warn_once(message: str) -> None:
    with _WARNED_LOCK:
        if message in _WARNED:
            return
        _WARNED.add(message)
    logger.warning("%s", message)


# ------------------------------------------------------------------------------------------------- local runs
def _recv_run(box: Any, deadline: float, limits: Limits) -> Any:
    """The worker's (untrusted) report of one stdin run, its output decoded into ``stdout``.

    The output follows the report as raw bytes, at most ``limits.max_output_bytes`` of them: a run that wrote more
    was cut off and its output dropped inside the sandbox, so flooding costs this process nothing.

    Raises:
        DeadlineExceeded, ChannelClosed (also for a report that announces more output than the cap).
    """
    report = box.channel.recv(deadline, 1 << 16)
    if not isinstance(report, dict):
        return report
    size = report.get("stdout_bytes")
    if type(size) is not int or not 0 <= size <= limits.max_output_bytes:
        raise ChannelClosed(f"a run report announces {size!r} bytes of output")
    # What a program prints need not be UTF-8; undecodable bytes become U+FFFD and fail the comparison.
    report["stdout"] = box.channel.recv_raw(size, deadline).decode("utf-8", errors="replace")
    return report


def _load(box: Any, code: str, prefix: str, deadline: float) -> str | None:
    """Send the program; ``None`` when it loaded, else the failure status."""
    box.channel.send({"code": code, "prefix": prefix}, deadline)
    ack = box.channel.recv(deadline, 1 << 16)
    if isinstance(ack, dict) and ack.get("ok") is True:
        return None
    error = ack.get("error", "") if isinstance(ack, dict) else ""
    return "compile_error" if isinstance(error, str) and error.startswith("compile") else "error"


def _run_status(reply: Any, expected: str) -> str:
    """The status of one stdin test from the worker's (untrusted) report."""
    if not isinstance(reply, dict) or not isinstance(reply.get("stdout"), str):
        return "error"
    if reply.get("truncated") is True:
        return "output_limit"
    exit_code = reply.get("exit")
    if type(exit_code) is not int or exit_code != 0:
        return "timeout" if exit_code == -signal.SIGXCPU else "error"
    return "ok" if outputs_match(reply["stdout"], expected) else "wrong_answer"


def _stdin_tests(code: str, inputs: list, outputs: list, limits: Limits, isolation: str, deadline: float) -> tuple:
    box = launch("worker", {"kind": "stdin"}, isolation, limits)
    passed, idle = 0, False  # idle: the harness answered everything asked and waits for more
    try:
        failure = _load(box, code, "", deadline)
        idle = True
        if failure:
            return passed, failure
        for stdin, expected in zip(inputs, outputs, strict=True):
            idle = False
            box.channel.send({"stdin": _as_text(stdin)}, deadline)
            status = _run_status(_recv_run(box, deadline, limits), _as_text(expected))
            idle = True
            if status != "ok":
                return passed, status
            passed += 1
        return passed, "ok"
    except DeadlineExceeded:
        return passed, "timeout"
    except ChannelClosed:
        return passed, "error"
    finally:
        box.close(graceful=idle)


def _call_tests(code: str, prefix: str, plan: _Plan, limits: Limits, isolation: str, deadline: float) -> tuple:
    """Run the calls one by one and compare each result here; (tests passed, status)."""
    box = launch("worker", {"kind": "call"}, isolation, limits)
    passed, idle = 0, False  # idle: the harness answered everything asked and waits for more

    def failed(status: str) -> tuple[int, str]:
        # A functional test converted to calls is one test: it passes only as a whole.
        return (passed if plan.total > 1 else 0), status

    try:
        failure = _load(box, code, prefix, deadline)
        idle = True
        if failure:
            return failed(failure)
        for call in plan.calls:
            request = {"target": {"entry": call.entry, "via": call.via}, "args": encode_value(call.args)}
            if call.kwargs:
                request["kwargs"] = encode_value(call.kwargs)
            idle = False
            box.channel.send(request, deadline)
            # Return values are decoded in this (the caller's) thread: their size bounds the time that takes.
            reply = box.channel.recv(deadline, limits.max_output_bytes)
            idle = True
            if not isinstance(reply, dict) or reply.get("ok") is not True:
                return failed("error")
            try:
                got = decode_value(reply.get("value"), max_nodes=_MAX_RESULT_NODES)
            except CodecError:
                return failed("wrong_answer")
            if not _call_matches(got, call, plan.unwrap):
                return failed("wrong_answer")
            passed += 1
        return plan.total, "ok"
    except DeadlineExceeded:
        return failed("timeout")
    except ChannelClosed:
        return failed("error")
    finally:
        box.close(graceful=idle)


def _functional_test(code: str, test: str, prefix: str, limits: Limits, isolation: str, deadline: float) -> tuple:
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    worker = judge = None
    try:
        worker = launch("worker", {"kind": "functional"}, isolation, limits, stdin=to_worker_r, stdout=from_worker_w)
        judge_limits = Limits(memory_mb=limits.memory_mb, cpu_s=limits.cpu_s, nproc=_JUDGE_NPROC)
        judge = launch(
            "judge",
            {"to_worker": to_worker_w, "from_worker": from_worker_r},
            isolation,
            judge_limits,
            pass_fds=(to_worker_w, from_worker_r),
        )
    except BaseException:
        if worker is not None:
            worker.close()
        raise
    finally:
        for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
            os.close(fd)
    done = False
    try:
        judge.channel.send({"prefix": prefix, "test": test, "worker": {"code": code, "prefix": prefix}}, deadline)
        verdict = judge.channel.recv(deadline, 1 << 20)
        done = True
    except DeadlineExceeded:
        return 0, "timeout"
    except ChannelClosed:
        return 0, "error"
    finally:
        # After a verdict the judge is idle; once it exits, the worker reads end of file from it and exits too.
        judge.close(graceful=done)
        worker.close(graceful=done)
    if not isinstance(verdict, dict):
        return 0, "error"
    if verdict.get("passed") is True:
        return 1, "ok"
    error = verdict.get("error") if isinstance(verdict.get("error"), str) else ""
    if error.startswith("test setup"):
        # The dataset's test code itself does not run here: a data/environment problem, not the model's.
        _warn_once(f"functional test code fails before calling the program ({error[:300]})")
    if error.startswith("compile"):
        return 0, "compile_error"
    return 0, "wrong_answer" if error.startswith("AssertionError") else "error"


def _score_local(code: str, plan: _Plan, prefix: str, timeout_s: float, memory_mb: int, isolation: str) -> tuple:
    check_isolation(isolation)
    limits = Limits(memory_mb=memory_mb, cpu_s=max(1, math.ceil(timeout_s)) + 1)
    with concurrency_slot():
        deadline = time.monotonic() + timeout_s
        if plan.kind == "judge":
            return _functional_test(code, plan.test, prefix, limits, isolation, deadline)
        if plan.kind == "calls":
            return _call_tests(code, prefix, plan, limits, isolation, deadline)
        return _stdin_tests(code, list(plan.inputs), list(plan.outputs), limits, isolation, deadline)


# ------------------------------------------------------------------------------------------------- SandboxFusion
def _run_sandbox(source: str, stdin: str, timeout_s: float, memory_mb: int, url: str) -> ProgramResult:
    from verl.utils.reward_score.sandbox_fusion.utils import call_sandbox_api

    timeout = max(1, math.ceil(timeout_s))
    response, error = call_sandbox_api(url, source, stdin, timeout, timeout, memory_mb, "python")
    if response is None:
        logger.warning("sandbox call failed: %s", error)
        return ProgramResult("sandbox")
    run = response.get("run_result") or {}
    if run.get("status") == "TimeLimitExceeded":
        return ProgramResult("timeout")
    ok = response.get("status") == "Success" and run.get("status") == "Finished" and run.get("return_code") == 0
    return ProgramResult("ok" if ok else "error", run.get("stdout") or "")


_REMOTE_CALLS = """
import ast as __bots_ast, json as __bots_json
def __bots_run(__bots_spec):
    __bots_shared = {}
    for __bots_entry, __bots_via, __bots_args, __bots_kwargs in __bots_spec["calls"]:
        try:
            __bots_fn = globals().get(__bots_entry) if __bots_via in ("function", "either") else None
            if __bots_via != "function" and not callable(__bots_fn):
                if __bots_via == "fresh":
                    __bots_fn = getattr(globals()["Solution"](), __bots_entry)
                else:
                    if "fn" not in __bots_shared:
                        __bots_shared["fn"] = getattr(globals()["Solution"](), __bots_entry)
                    __bots_fn = __bots_shared["fn"]
            __bots_line = __bots_json.dumps(["ok", __bots_fn(*__bots_args, **__bots_kwargs)])
        except BaseException:
            __bots_line = __bots_json.dumps(["error"])
        # On a line of its own even when the program's last print did not end one.
        print("\\n" + __bots_spec["marker"] + __bots_line, flush=True)
"""


def _remote_calls_program(code: str, prefix: str, spec: dict[str, Any]) -> str:
    """The program that runs ``spec``'s calls on SandboxFusion and prints one marked result line per call.

    The spec goes in as a string literal (the repr of its repr) appended after the template, never through
    ``str.format``: the template's own braces (``{}``) would make ``format`` raise, and so could the test data.
    """
    return f"{prefix}\n{code}\n{_REMOTE_CALLS}__bots_run(__bots_ast.literal_eval({repr(spec)!r}))\n"


def _score_remote(code: str, plan: _Plan, prefix: str, timeout_s: float, memory_mb: int, url: str) -> tuple:
    """Judge on a SandboxFusion server: one run per stdin test, one run for all calls, one for judge-only tests."""
    deadline = time.monotonic() + timeout_s

    def remaining() -> float:
        return deadline - time.monotonic()

    if plan.kind == "judge":
        # One process runs program and test together, so success is the test reaching its end: a random line printed
        # after it. sys.exit(0), os._exit and atexit no longer pass; a program that reads its own source still could.
        marker = secrets.token_hex(16)
        source = f"{prefix}\n{code}\n\n{plan.test}\nprint({marker!r})\n"
        result = _run_sandbox(source, "", remaining(), memory_mb, url)
        ok = result.status == "ok" and result.stdout.rstrip().endswith(marker)
        return int(ok), "ok" if ok else (result.status if result.status != "ok" else "wrong_answer")
    if plan.kind == "calls":
        # The program prints its results (marked lines); the expected values stay here.
        marker = f"__bots_{secrets.token_hex(8)}__"
        spec = {"calls": [[c.entry, c.via, c.args, c.kwargs] for c in plan.calls], "marker": marker}
        program = _remote_calls_program(code, prefix, spec)
        result = _run_sandbox(program, "", remaining(), memory_mb, url)
        if result.status != "ok":
            return 0, result.status
        lines = [line[len(marker) :] for line in result.stdout.splitlines() if line.startswith(marker)]
        if len(lines) != len(plan.calls):
            return 0, "error"
        passed = 0
        for line, call in zip(lines, plan.calls, strict=True):
            try:
                reply = json.loads(line)
            except (ValueError, RecursionError):
                return 0, "error"
            if not isinstance(reply, list) or reply[:1] != ["ok"] or len(reply) != 2:
                return 0, "error"
            if not _call_matches(reply[1], call, plan.unwrap):
                return (passed if plan.total > 1 else 0), "wrong_answer"
            passed += 1
        return plan.total, "ok"
    passed = 0
    for stdin, expected in zip(plan.inputs, plan.outputs, strict=True):
        if remaining() <= 0:
            return passed, "timeout"
        result = _run_sandbox(code, _as_text(stdin), remaining(), memory_mb, url)
        if result.status != "ok":
            return passed, result.status
        if not outputs_match(result.stdout, _as_text(expected)):
            return passed, "wrong_answer"
        passed += 1
    return passed, "ok"


# ------------------------------------------------------------------------------------------------- public API
def run_program(
    source: str,
    stdin: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    sandbox_fusion_url: str | None = None,
    isolation: str | None = None,
) -> ProgramResult:
    """Run a Python program once, isolated, under time and memory limits.

    Args:
        source: the program text.
        stdin: its standard input.
        timeout_s: wall-clock limit.
        memory_mb: address-space limit in MiB.
        sandbox_fusion_url: run on this SandboxFusion ``/run_code`` endpoint instead of locally.
        isolation: ``bwrap`` (default) or ``none`` (see :mod:`bots_verl.rewards.sandbox`).

    Returns:
        A :class:`ProgramResult`.

    Raises:
        SandboxUnavailableError: local isolation was asked for but does not work here.
    """
    if sandbox_fusion_url:
        return _run_sandbox(source, stdin, timeout_s, memory_mb, sandbox_fusion_url)
    isolation = resolve_isolation(isolation)
    check_isolation(isolation)
    limits = Limits(memory_mb=memory_mb, cpu_s=max(1, math.ceil(timeout_s)) + 1)
    with concurrency_slot():
        deadline = time.monotonic() + timeout_s
        box = launch("worker", {"kind": "stdin"}, isolation, limits)
        try:
            failure = _load(box, source, "", deadline)
            if failure:
                return ProgramResult("error")
            box.channel.send({"stdin": stdin}, deadline)
            reply = _recv_run(box, deadline, limits)
        except DeadlineExceeded:
            return ProgramResult("timeout")
        except ChannelClosed:
            return ProgramResult("error")
        finally:
            box.close()
    status = _run_status(reply, "")
    stdout = reply["stdout"] if isinstance(reply, dict) and isinstance(reply.get("stdout"), str) else ""
    return ProgramResult("ok" if status in ("ok", "wrong_answer") else status, stdout)


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_mb: int = DEFAULT_MEMORY_MB,
    sandbox_fusion_url: str | None = None,
    isolation: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """Score one code response: 1.0 and ``acc=True`` only when every test passes.

    Args:
        solution_str: the decoded model response (the last fenced Python block is the program).
        ground_truth: GURU's test JSON (see the module docstring).
        extra_info: the row's ``extra_info``; ``prefix`` is prepended for functional tests.
        timeout_s: wall-clock limit for the whole answer (all of its tests).
        memory_limit_mb: address-space limit per process in MiB.
        sandbox_fusion_url: run on SandboxFusion instead of locally.
        isolation: local isolation, ``bwrap`` (default, or ``$BOTS_CODE_ISOLATION``) or ``none`` (opt-in,
            unconfined, warned about once).

    Returns:
        ``{"score", "acc", "passed", "total", "status"}``; a missing code block, a crash, a timeout or anything
        else the program does is a failure, never an exception.

    Raises:
        ValueError: malformed ground truth, or an unknown ``isolation``.
        SandboxUnavailableError: local isolation does not work here (install bubblewrap, or see ``isolation``).
    """
    plan = _plan(parse_tests(ground_truth))  # data errors raise here, before the model output is looked at
    total = plan.total
    isolation = None if sandbox_fusion_url else resolve_isolation(isolation)
    if isolation is not None:
        concurrency_slot_check()

    def result(passed: int, status: str) -> dict[str, Any]:
        ok = status == "ok" and passed == total
        return {"score": float(ok), "acc": ok, "passed": passed, "total": total, "status": status}

    if not isinstance(solution_str, str):
        return result(0, "no_code")
    code = last_code_block(after_think(solution_str))
    if code is None:
        return result(0, "no_code")
    prefix = (extra_info or {}).get("prefix") if isinstance(extra_info, dict) else None
    prefix = prefix if isinstance(prefix, str) else ""
    try:
        if sandbox_fusion_url:
            passed, status = _score_remote(code, plan, prefix, timeout_s, memory_limit_mb, sandbox_fusion_url)
        else:
            passed, status = _score_local(code, plan, prefix, timeout_s, memory_limit_mb, isolation)
    except SandboxUnavailableError:
        raise
    except Exception:  # a bug of ours must not crash training on one response: log it loudly, score 0
        logger.exception("code scoring failed")
        return result(0, "internal_error")
    return result(passed, status)
