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

The tests' plan is :mod:`bots_verl.rewards.code_plan`; they run in :mod:`bots_verl.rewards.code_local` or
:mod:`bots_verl.rewards.code_remote`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from typing import Any

from bots_verl.rewards._extract import after_think, last_code_block
from bots_verl.rewards.code_local import load_program, recv_run, run_status, score_local
from bots_verl.rewards.code_plan import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, ProgramResult, parse_tests, plan_tests
from bots_verl.rewards.code_remote import run_remote, score_remote
from bots_verl.rewards.sandbox import Limits, SandboxUnavailableError, launch, resolve_isolation
from bots_verl.rewards.sandbox_channel import ChannelClosed, DeadlineExceeded
from bots_verl.rewards.sandbox_checks import check_isolation
from bots_verl.rewards.sandbox_slots import concurrency_slot, concurrency_slot_check

__all__ = ["compute_score", "run_program"]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

# A program's verdict on a task's tests is a property of the program and the tests: identical programs for one task
# (a group's rollouts repeat them often, a small model's most of all) run once per process, since each run starts a
# sandbox. Only verdicts the program decides are kept; a timeout or an error may come from the machine (load, a
# sandbox that failed to start) and is run again.
_KEPT_STATUSES = frozenset({"ok", "wrong_answer", "compile_error"})
_VERDICTS_MAX = 4096
_verdicts: OrderedDict[tuple[Any, ...], tuple[int, str]] = OrderedDict()
_verdicts_lock = threading.Lock()


def _verdict_key(code: str, ground_truth: Any, prefix: str, settings: tuple[Any, ...]) -> tuple[Any, ...]:
    tests = ground_truth if isinstance(ground_truth, str) else repr(ground_truth)
    digest = hashlib.sha256(json.dumps([tests, prefix, code]).encode()).hexdigest()  # unambiguous: a JSON list
    return (digest, *settings)


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
        return run_remote(source, stdin, timeout_s, memory_mb, sandbox_fusion_url)
    isolation = resolve_isolation(isolation)
    check_isolation(isolation)
    limits = Limits(memory_mb=memory_mb, cpu_s=max(1, math.ceil(timeout_s)) + 1)
    with concurrency_slot():
        deadline = time.monotonic() + timeout_s
        box = launch("worker", {"kind": "stdin"}, isolation, limits)
        try:
            failure = load_program(box, source, "", deadline)
            if failure:
                return ProgramResult("error")
            box.channel.send({"stdin": stdin}, deadline)
            reply = recv_run(box, deadline, limits)
        except DeadlineExceeded:
            return ProgramResult("timeout")
        except ChannelClosed:
            return ProgramResult("error")
        finally:
            box.close()
    status = run_status(reply, "")
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
    plan = plan_tests(parse_tests(ground_truth))  # data errors raise here, before the model output is looked at
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
    if isolation is not None:
        check_isolation(isolation)  # a kept verdict never hides a sandbox that stopped working here (cached check)
    key = _verdict_key(code, ground_truth, prefix, (timeout_s, memory_limit_mb, sandbox_fusion_url, isolation))
    with _verdicts_lock:
        kept = _verdicts.get(key)
        if kept is not None:
            _verdicts.move_to_end(key)
            return result(*kept)
    try:
        if sandbox_fusion_url:
            passed, status = score_remote(code, plan, prefix, timeout_s, memory_limit_mb, sandbox_fusion_url)
        else:
            passed, status = score_local(code, plan, prefix, timeout_s, memory_limit_mb, isolation)
    except SandboxUnavailableError:
        raise
    except Exception:  # a bug of ours must not crash training on one response: log it loudly, score 0
        logger.exception("code scoring failed")
        return result(0, "internal_error")
    if status in _KEPT_STATUSES:
        with _verdicts_lock:
            _verdicts[key] = (passed, status)
            if len(_verdicts) > _VERDICTS_MAX:
                _verdicts.popitem(last=False)
    return result(passed, status)
