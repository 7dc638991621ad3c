"""Code reward: run the extracted program against GURU's tests; success only when every test passes.

GURU's code ground truth is a JSON string of one of three forms (guru.md §2.3):

- ``{"functional": "<test code ending in check(entry_point)>"}``: run ``prefix + code + test`` as one program; it
  passes when it exits with status 0 (the asserts raise otherwise). ``prefix`` (LeetCode imports / starter) comes
  from ``extra_info["prefix"]``.
- ``{"inputs": [stdin, ...], "outputs": [stdout, ...]}``: run the program once per test with that stdin and compare
  stdout token by token (floats within 1e-6, "yes"/"no" case-insensitive, as GURU's ``fuzzy_equal``).
- the same with ``"fn_name"``: call-based tests; each input is the argument list of ``fn_name`` (a top-level
  function or a method of ``Solution``) and the output is the return value.

Programs run either locally, in a fresh ``python -I`` subprocess in a temporary directory under ``RLIMIT_AS`` (memory),
``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (output size) and a wall-clock timeout that kills the whole process group, or on a
SandboxFusion server through verl's client (``sandbox_fusion_url``; pass it with
``reward.custom_reward_function.reward_kwargs.sandbox_fusion_url``). The local runner isolates resources, not
privileges: on a shared cluster use the sandbox.

The score is binary (1.0 when all tests pass) and equals ``acc``; tests stop at the first failure.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from bots_verl.rewards._extract import after_think, last_code_block

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

__all__ = ["RunResult", "compute_score", "outputs_match", "parse_tests", "run_program"]

# Defaults follow verl's sandbox settings (reward.sandbox_fusion.memory_limit_mb = 1024) and its prime_code runner's
# per-test timeout (5-10 s).
DEFAULT_TIMEOUT_S = 6.0
DEFAULT_MEMORY_MB = 1024
# stdout larger than this is a runaway print loop, not an answer.
_MAX_OUTPUT_BYTES = 16 * 1024 * 1024
_FLOAT_TOL = 1e-6

# Runs call-based tests inside the child process: exec the solution, call fn_name per test, exit 0 iff all match.
_CALL_HARNESS = r"""
import json, sys
with open(sys.argv[1]) as f:
    spec = json.load(f)
namespace = {"__name__": "solution"}
exec(compile(spec["code"], "solution.py", "exec"), namespace)
fn = namespace.get(spec["fn_name"])
if fn is None and "Solution" in namespace:
    fn = getattr(namespace["Solution"](), spec["fn_name"], None)
if fn is None:
    sys.exit(3)
def plain(value):
    return json.loads(json.dumps(value))
for args, expected in zip(spec["inputs"], spec["outputs"]):
    if isinstance(args, str):
        args = json.loads(args)
    if not isinstance(args, list):
        args = [args]
    got = plain(fn(*args))
    if got != expected and [got] != expected:
        sys.exit(1)
sys.exit(0)
"""


@dataclass(frozen=True)
class RunResult:
    """Outcome of one program run.

    Attributes:
        status: ``"ok"`` (exit 0), ``"error"`` (non-zero exit or killed by a limit), ``"timeout"`` or ``"sandbox"``
            (the sandbox service failed; counted as a failure, logged).
        stdout: captured standard output (may be truncated by the output limit).
    """

    status: str
    stdout: str = ""


def _set_limits(memory_mb: int, cpu_s: int) -> None:
    """Child-side resource limits (runs between fork and exec)."""
    import resource

    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (_MAX_OUTPUT_BYTES, _MAX_OUTPUT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _status(returncode: int) -> str:
    # RLIMIT_CPU ends a busy loop with SIGXCPU before the wall clock runs out: that is a timeout, too.
    if returncode == 0:
        return "ok"
    return "timeout" if returncode == -signal.SIGXCPU else "error"


def _run_local(source: str, stdin: str, timeout_s: float, memory_mb: int, argv: tuple[str, ...] = ()) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="bots_code_") as workdir:
        program = os.path.join(workdir, "main.py")
        with open(program, "w", encoding="utf-8") as f:
            f.write(source)
        out_path = os.path.join(workdir, "stdout.txt")
        with open(out_path, "wb") as out, open(os.devnull, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", program, *argv],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                cwd=workdir,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"},
                preexec_fn=lambda: _set_limits(memory_mb, max(1, math.ceil(timeout_s))),
                start_new_session=True,  # own process group, so a timeout kills children too
            )
            try:
                proc.communicate(input=stdin.encode("utf-8", errors="replace"), timeout=timeout_s)
                status = _status(proc.returncode)
            except subprocess.TimeoutExpired:
                status = "timeout"
            except OSError:  # e.g. BrokenPipe when the program exits without reading a large stdin
                try:
                    status = _status(proc.wait(timeout=timeout_s))
                except subprocess.TimeoutExpired:
                    status = "timeout"
            finally:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
        with open(out_path, "rb") as f:
            stdout = f.read(_MAX_OUTPUT_BYTES).decode("utf-8", errors="replace")
    return RunResult(status, stdout)


def _run_sandbox(source: str, stdin: str, timeout_s: float, memory_mb: int, url: str) -> RunResult:
    from verl.utils.reward_score.sandbox_fusion.utils import call_sandbox_api

    timeout = max(1, math.ceil(timeout_s))
    response, error = call_sandbox_api(url, source, stdin, timeout, timeout, memory_mb, "python")
    if response is None:
        logger.warning("sandbox call failed: %s", error)
        return RunResult("sandbox")
    run = response.get("run_result") or {}
    if run.get("status") == "TimeLimitExceeded":
        return RunResult("timeout")
    ok = response.get("status") == "Success" and run.get("status") == "Finished" and run.get("return_code") == 0
    return RunResult("ok" if ok else "error", run.get("stdout") or "")


def run_program(
    source: str,
    stdin: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    sandbox_fusion_url: str | None = None,
) -> RunResult:
    """Run a Python program once under time and memory limits.

    Args:
        source: the program text.
        stdin: its standard input.
        timeout_s: wall-clock limit (also the CPU-time limit, rounded up, locally).
        memory_mb: address-space limit in MiB.
        sandbox_fusion_url: run on this SandboxFusion ``/run_code`` endpoint instead of locally.

    Returns:
        A :class:`RunResult`.
    """
    if sandbox_fusion_url:
        return _run_sandbox(source, stdin, timeout_s, memory_mb, sandbox_fusion_url)
    return _run_local(source, stdin, timeout_s, memory_mb)


def _token_equal(got: str, expected: str) -> bool:
    if got == expected:
        return True
    if got.lower() in ("yes", "no") and got.lower() == expected.lower():
        return True
    try:
        a, b = float(got), float(expected)
    except ValueError:
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    return math.isclose(a, b, rel_tol=_FLOAT_TOL, abs_tol=_FLOAT_TOL)


def outputs_match(got: str, expected: str) -> bool:
    """Compare program output with the expected output line by line and token by token (trailing blanks ignored).

    Args:
        got: the program's stdout.
        expected: the reference stdout.

    Returns:
        Whether every line has the same tokens (floats within 1e-6, yes/no case-insensitive).
    """
    got_lines = got.rstrip().splitlines()
    expected_lines = expected.rstrip().splitlines()
    if len(got_lines) != len(expected_lines):
        return False
    for got_line, expected_line in zip(got_lines, expected_lines, strict=True):
        got_tokens, expected_tokens = got_line.split(), expected_line.split()
        if len(got_tokens) != len(expected_tokens):
            return False
        if not all(_token_equal(g, e) for g, e in zip(got_tokens, expected_tokens, strict=True)):
            return False
    return True


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


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_mb: int = DEFAULT_MEMORY_MB,
    sandbox_fusion_url: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """Score one code response: 1.0 and ``acc=True`` only when every test passes.

    Args:
        solution_str: the decoded model response (the last fenced Python block is the program).
        ground_truth: GURU's test JSON (see the module docstring).
        extra_info: the row's ``extra_info``; ``prefix`` is prepended for functional tests.
        timeout_s: per-run wall-clock limit in seconds.
        memory_limit_mb: per-run memory limit in MiB.
        sandbox_fusion_url: run on SandboxFusion instead of locally.

    Returns:
        ``{"score", "acc", "passed", "total", "status"}``; no code block or a crash is a failure, never an exception.
    """
    tests = parse_tests(ground_truth)
    fail = {"score": 0.0, "acc": False, "passed": 0, "total": 0, "status": "no_code"}
    if not isinstance(solution_str, str):
        return fail
    code = last_code_block(after_think(solution_str))
    if code is None:
        return fail
    run = {"timeout_s": timeout_s, "memory_mb": memory_limit_mb, "sandbox_fusion_url": sandbox_fusion_url}

    if "functional" in tests and isinstance(tests["functional"], str):
        prefix = (extra_info or {}).get("prefix") or ""
        result = run_program(f"{prefix}\n{code}\n\n{tests['functional']}\n", **run)
        ok = result.status == "ok"
        return {"score": float(ok), "acc": ok, "passed": int(ok), "total": 1, "status": result.status}

    inputs, outputs = tests["inputs"], tests["outputs"]
    if tests.get("fn_name"):
        spec = {"code": code, "fn_name": tests["fn_name"], "inputs": inputs, "outputs": outputs}
        # The spec rides in the program text so that the same source also works on the sandbox (no side files).
        harness = f"import sys\nsys.argv[1:] = ['spec.json']\nopen('spec.json', 'w').write({json.dumps(spec)!r})\n"
        result = run_program(
            harness + _CALL_HARNESS,
            timeout_s=timeout_s * len(inputs),
            memory_mb=memory_limit_mb,
            sandbox_fusion_url=sandbox_fusion_url,
        )
        ok = result.status == "ok"
        return {
            "score": float(ok),
            "acc": ok,
            "passed": len(inputs) if ok else 0,
            "total": len(inputs),
            "status": result.status,
        }

    passed = 0
    status = "ok"
    for stdin, expected in zip(inputs, outputs, strict=True):
        result = run_program(code, _as_text(stdin), **run)
        if result.status != "ok" or not outputs_match(result.stdout, _as_text(expected)):
            status = result.status if result.status != "ok" else "wrong_answer"
            break
        passed += 1
    ok = passed == len(inputs)
    return {"score": float(ok), "acc": ok, "passed": passed, "total": len(inputs), "status": status}
