"""The code reward's tests run here, in bubblewrap sandboxes (:mod:`bots_verl.rewards.sandbox`): stdin, call-based and
functional tests, one deadline for all of an answer's tests.
"""

from __future__ import annotations

import math
import os
import signal
import time
from typing import Any

from bots_verl.rewards._wire import CodecError, decode_value, encode_value
from bots_verl.rewards.code_compare import outputs_match
from bots_verl.rewards.code_plan import JUDGE_NPROC, MAX_RESULT_NODES, TestPlan, as_text, call_matches, warn_once
from bots_verl.rewards.sandbox import Limits, launch
from bots_verl.rewards.sandbox_channel import ChannelClosed, DeadlineExceeded
from bots_verl.rewards.sandbox_checks import check_isolation
from bots_verl.rewards.sandbox_slots import concurrency_slot

__all__ = ["score_local"]


# ------------------------------------------------------------------------------------------------- local runs
def recv_run(box: Any, deadline: float, limits: Limits) -> Any:
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


def load_program(box: Any, code: str, prefix: str, deadline: float) -> str | None:
    """Send the program; ``None`` when it loaded, else the failure status."""
    box.channel.send({"code": code, "prefix": prefix}, deadline)
    ack = box.channel.recv(deadline, 1 << 16)
    if isinstance(ack, dict) and ack.get("ok") is True:
        return None
    error = ack.get("error", "") if isinstance(ack, dict) else ""
    return "compile_error" if isinstance(error, str) and error.startswith("compile") else "error"


def run_status(reply: Any, expected: str) -> str:
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
        failure = load_program(box, code, "", deadline)
        idle = True
        if failure:
            return passed, failure
        for stdin, expected in zip(inputs, outputs, strict=True):
            idle = False
            box.channel.send({"stdin": as_text(stdin)}, deadline)
            status = run_status(recv_run(box, deadline, limits), as_text(expected))
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


def _call_tests(code: str, prefix: str, plan: TestPlan, limits: Limits, isolation: str, deadline: float) -> tuple:
    """Run the calls one by one and compare each result here; (tests passed, status)."""
    box = launch("worker", {"kind": "call"}, isolation, limits)
    passed, idle = 0, False  # idle: the harness answered everything asked and waits for more

    def failed(status: str) -> tuple[int, str]:
        # A functional test converted to calls is one test: it passes only as a whole.
        return (passed if plan.total > 1 else 0), status

    try:
        failure = load_program(box, code, prefix, deadline)
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
                got = decode_value(reply.get("value"), max_nodes=MAX_RESULT_NODES)
            except CodecError:
                return failed("wrong_answer")
            if not call_matches(got, call, plan.unwrap):
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
        judge_limits = Limits(memory_mb=limits.memory_mb, cpu_s=limits.cpu_s, nproc=JUDGE_NPROC)
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
        warn_once(f"functional test code fails before calling the program ({error[:300]})")
    if error.startswith("compile"):
        return 0, "compile_error"
    return 0, "wrong_answer" if error.startswith("AssertionError") else "error"


def score_local(code: str, plan: TestPlan, prefix: str, timeout_s: float, memory_mb: int, isolation: str) -> tuple:
    """Run the plan's tests on ``code`` in local sandboxes; returns (tests passed, status)."""
    check_isolation(isolation)
    limits = Limits(memory_mb=memory_mb, cpu_s=max(1, math.ceil(timeout_s)) + 1)
    with concurrency_slot():
        deadline = time.monotonic() + timeout_s
        if plan.kind == "judge":
            return _functional_test(code, plan.test, prefix, limits, isolation, deadline)
        if plan.kind == "calls":
            return _call_tests(code, prefix, plan, limits, isolation, deadline)
        return _stdin_tests(code, list(plan.inputs), list(plan.outputs), limits, isolation, deadline)
