"""The code reward's tests run on a SandboxFusion server (``sandbox_fusion_url``), for clusters without bubblewrap."""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import time
from typing import Any

from bots_verl.rewards.code_compare import outputs_match
from bots_verl.rewards.code_plan import ProgramResult, TestPlan, as_text, call_matches

__all__ = ["run_remote", "score_remote"]

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))


# ------------------------------------------------------------------------------------------------- SandboxFusion
def run_remote(source: str, stdin: str, timeout_s: float, memory_mb: int, url: str) -> ProgramResult:
    """Run ``source`` with ``stdin`` once on the SandboxFusion server at ``url``."""
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


def score_remote(code: str, plan: TestPlan, prefix: str, timeout_s: float, memory_mb: int, url: str) -> tuple:
    """Judge on a SandboxFusion server: one run per stdin test, one run for all calls, one for judge-only tests."""
    deadline = time.monotonic() + timeout_s

    def remaining() -> float:
        return deadline - time.monotonic()

    if plan.kind == "judge":
        # One process runs program and test together, so success is the test reaching its end: a random line printed
        # after it. sys.exit(0), os._exit and atexit no longer pass; a program that reads its own source still could.
        marker = secrets.token_hex(16)
        source = f"{prefix}\n{code}\n\n{plan.test}\nprint({marker!r})\n"
        result = run_remote(source, "", remaining(), memory_mb, url)
        ok = result.status == "ok" and result.stdout.rstrip().endswith(marker)
        return int(ok), "ok" if ok else (result.status if result.status != "ok" else "wrong_answer")
    if plan.kind == "calls":
        # The program prints its results (marked lines); the expected values stay here.
        marker = f"__bots_{secrets.token_hex(8)}__"
        spec = {"calls": [[c.entry, c.via, c.args, c.kwargs] for c in plan.calls], "marker": marker}
        program = _remote_calls_program(code, prefix, spec)
        result = run_remote(program, "", remaining(), memory_mb, url)
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
            if not call_matches(reply[1], call, plan.unwrap):
                return (passed if plan.total > 1 else 0), "wrong_answer"
            passed += 1
        return plan.total, "ok"
    passed = 0
    for stdin, expected in zip(plan.inputs, plan.outputs, strict=True):
        if remaining() <= 0:
            return passed, "timeout"
        result = run_remote(code, as_text(stdin), remaining(), memory_mb, url)
        if result.status != "ok":
            return passed, result.status
        if not outputs_match(result.stdout, as_text(expected)):
            return passed, "wrong_answer"
        passed += 1
    return passed, "ok"
