"""Output floods: a run that writes more than the output cap fails, and its output never reaches the scorer.

The harness drops a flooded run's output inside the sandbox; a run within the cap sends its output raw (not as
JSON, which would escape a control byte as six), so one answer costs the scorer at most the cap, whatever it prints.
"""

from __future__ import annotations

import json
import select
import time
import tracemalloc

import pytest

from bots_verl.rewards import code_local, compute_score
from bots_verl.rewards.code_reward import run_program
from bots_verl.rewards.sandbox import Limits, launch
from bots_verl.rewards.sandbox_channel import ChannelClosed

STDIN = json.dumps({"inputs": ["2 3\n"], "outputs": ["5\n"]})
CAP = 4096

FLOODS = {
    "control bytes": "import sys\nwhile True:\n    sys.stdout.write('\\x01' * 65536)",
    "multibyte characters": "import sys\nwhile True:\n    sys.stdout.write('\\u00e9\\U0001f600' * 16384)",
    "invalid utf-8": "import sys\nwhile True:\n    sys.stdout.buffer.write(b'\\xff\\x00' * 32768)",
    "flushed lines": "while True:\n    print('5', flush=True)",
    "right answer, then a flood": "print(5)\nimport sys\nwhile True:\n    sys.stdout.write('\\n' * 65536)",
    "a thread floods, main sleeps": "import sys, threading, time\n"
    "threading.Thread(target=lambda: [sys.stdout.write('x' * 65536) for _ in iter(int, 1)], daemon=True).start()\n"
    "time.sleep(60)",
    # Whatever the child has written when main exits is read (up to the cap), then the child is killed. Main prints
    # only after the child's first 64 KiB are out (a pipe orders them): without that, a loaded machine may run main to
    # its exit before the child writes anything, and the program's output is then just the right answer.
    "a child floods, main exits 0": "import os, sys\nr, w = os.pipe()\nif os.fork() == 0:\n"
    "    os.write(1, b'x' * 65536)\n    os.write(w, b'1')\n    while True:\n        os.write(1, b'x' * 65536)\n"
    "os.read(r, 1)\nprint(5)",
    "just over the cap, exit 0": "import sys\nsys.stdout.write('\\x01' * ((16 << 20) + 1))",
}


def _score(body: str, **kwargs) -> dict:
    return compute_score("codegen__taco", f"```python\n{body}\n```", STDIN, **kwargs)


def _worker(body: str, limits: Limits, isolation: str):
    """A stdin worker with ``body`` loaded."""
    box = launch("worker", {"kind": "stdin"}, isolation, limits)
    deadline = time.monotonic() + 30
    assert code_local.load_program(box, body, "", deadline) is None
    return box, deadline


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize("name", FLOODS)
def test_floods_score_zero_without_hanging(name: str) -> None:
    start = time.monotonic()
    result = _score(FLOODS[name], timeout_s=5)
    # The child's output read before it was killed is compared, unless it already exceeded the cap.
    allowed = ("output_limit", "timeout", "wrong_answer") if "child" in name else ("output_limit", "timeout")
    assert result["score"] == 0.0 and result["status"] in allowed
    assert time.monotonic() - start < 60  # hang guard only


@pytest.mark.usefixtures("sandbox")
def test_just_over_the_cap_is_the_output_limit() -> None:
    assert _score(FLOODS["just over the cap, exit 0"])["status"] == "output_limit"


def test_flood_unconfined_mode_is_also_cut_off() -> None:
    assert _score(FLOODS["control bytes"], timeout_s=5, isolation="none")["status"] in ("output_limit", "timeout")


@pytest.mark.usefixtures("sandbox")
def test_a_flooded_run_sends_nothing_but_its_report(sandbox: str) -> None:
    """Structural: after a flooded run, the report is all that came out of the sandbox."""
    box, deadline = _worker("import sys\nwhile True:\n    sys.stdout.write('\\x01' * 1000)", Limits(), sandbox)
    try:
        box.channel.send({"stdin": ""}, deadline)
        report = box.channel.recv(deadline, 1 << 16)
        assert report == {"stdout_bytes": 0, "truncated": True, "exit": None}
        # The harness is idle now: not one byte of output follows the report (none read ahead, none in the pipe).
        assert not box.channel._buffer
        assert select.select([box.channel.read_fd], [], [], 0.5)[0] == []
    finally:
        box.close()


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize("size", [CAP - 1, CAP, CAP + 1])
def test_output_up_to_the_cap_arrives_whole(sandbox: str, size: int) -> None:
    # Control bytes, multibyte characters and a byte that is not UTF-8: what JSON would have escaped.
    payload = (b"\x01\xc3\xa9\xff\n" * size)[:size]
    body = f"import sys\nsys.stdout.buffer.write({payload!r})"
    limits = Limits(max_output_bytes=CAP)
    box, deadline = _worker(body, limits, sandbox)
    try:
        for _ in range(2):  # the stream stays in step from one run to the next
            box.channel.send({"stdin": ""}, deadline)
            report = code_local.recv_run(box, deadline, limits)
            if size > CAP:
                assert report == {"stdout_bytes": 0, "truncated": True, "exit": None, "stdout": ""}
            else:
                assert report["stdout_bytes"] == size and report["truncated"] is False and report["exit"] == 0
                assert report["stdout"] == payload.decode("utf-8", errors="replace")
    finally:
        box.close()


class _LyingChannel:
    """Stands in for a worker that announces output it has no business sending."""

    def __init__(self, report: object) -> None:
        self.report = report
        self.raw_reads: list[int] = []

    def recv(self, deadline: float, max_bytes: int) -> object:
        return self.report

    def recv_raw(self, size: int, deadline: float) -> bytearray:
        self.raw_reads.append(size)
        return bytearray(size)


class _Box:
    def __init__(self, channel: _LyingChannel) -> None:
        self.channel = channel


@pytest.mark.parametrize("size", [CAP + 1, 1 << 40, -1, True, 1.0, "10", None])
def test_a_report_announcing_too_much_output_is_refused_unread(size: object) -> None:
    channel = _LyingChannel({"stdout_bytes": size, "truncated": False, "exit": 0})
    with pytest.raises(ChannelClosed):
        code_local.recv_run(_Box(channel), time.monotonic() + 5, Limits(max_output_bytes=CAP))
    assert channel.raw_reads == []


@pytest.mark.usefixtures("sandbox")
def test_one_flood_costs_the_scorer_far_less_than_the_cap() -> None:
    """Before the output was dropped inside, a 16 MiB flood of control bytes cost the scorer ~290 MiB (a 96 MiB
    JSON frame, its copy and the decoded string); now the output never arrives. A structural bound, not a tight one:
    a quarter of the cap, which any received output would exceed."""
    _score("print(5)")  # warm: the sandbox probe and first-call allocations are not the flood's
    tracemalloc.start()
    try:
        result = _score(FLOODS["control bytes"], timeout_s=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result["status"] in ("output_limit", "timeout")
    assert peak < Limits().max_output_bytes // 4, f"peak {peak / 2**20:.1f} MiB"


@pytest.mark.usefixtures("sandbox")
def test_run_program_reports_the_limit_without_the_output() -> None:
    result = run_program(FLOODS["control bytes"], timeout_s=10)
    assert result.status in ("output_limit", "timeout") and result.stdout == ""
    assert run_program("print('\\x01é')").stdout == "\x01é\n"
