"""The symbolic check's time limit is the worker's CPU time: a starved worker still scores a correct answer 1."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time

from bots_verl.rewards import math_verifier
from bots_verl.rewards.math_verifier import symbolic_equal, wall_deadline_s

TOWER = "9^{9^{9^{9}}}"


def _idle_worker_pids() -> list[int]:
    pool = math_verifier._pool()
    with pool._cond:
        return [worker.proc.pid for worker in pool._idle]


def test_a_correct_answer_scores_1_when_its_worker_gets_no_cpu_for_longer_than_the_limit() -> None:
    # Start the workers (each warms sympy up before it takes requests), then stop every idle one: the next check
    # waits 3 s of wall-clock time without a CPU, as on a reward node with many more busy processes than cores.
    assert symbolic_equal("\\frac{1}{2}", "0.5", timeout_s=1.0)
    pids = _idle_worker_pids()
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(symbolic_equal, "\\frac{1}{2}", "0.5", 1.0)
            time.sleep(3.0)  # three times the answer's limit, all of it without a CPU
            assert not future.done()
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            # a wall-clock limit of 1 s scored this 0 (the caller's deadline, or math-verify's alarm, ran out)
            assert future.result(timeout=wall_deadline_s(1.0)) is True
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def test_a_hostile_answer_still_stops_after_its_cpu_time() -> None:
    start = time.monotonic()
    assert symbolic_equal("4", TOWER, timeout_s=1.0) is False
    # one CPU second, then the timer (or the kernel's limit a second later); generous for a busy test machine
    assert time.monotonic() - start < wall_deadline_s(1.0)
    # the worker survived or was replaced: the next check works
    assert symbolic_equal("1+x^2", "x^2+1", timeout_s=2.0) is True


def test_the_wall_clock_backstop_is_well_above_the_cpu_limit() -> None:
    for limit in (0.5, 2.0, 5.0):
        assert wall_deadline_s(limit) >= 10 * limit
