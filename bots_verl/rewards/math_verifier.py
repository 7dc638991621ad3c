"""Symbolic answer checking (math-verify) in worker processes, with a hard time limit whatever thread asks.

math-verify bounds its work with ``signal.alarm``, which works only in a process's main thread, and verl 0.9.1 calls
reward functions from a thread pool (``loop.run_in_executor`` in its reward-loop workers). There, an answer such as
``\\boxed{9^{9^{9^{9}}}}`` makes sympy compute for ever while holding the interpreter lock, which stalls even the
event loop. So every symbolic check runs in a small pool of worker processes (``python -m
bots_verl.rewards.math_verifier``): in the worker's main thread a signal can interrupt sympy, a kernel CPU-time
limit backs it up, and the caller waits with a deadline and kills a worker that stops answering (a fresh one starts
on the next request). Pool size: ``$BOTS_MATH_WORKERS`` (default ``min(4, CPUs)``) per process.

The answer's time limit is CPU time, not wall-clock time: a check ends when the worker has *computed* for
``timeout_s`` seconds (a CPU-time timer, ``ITIMER_PROF``, interrupts sympy; the kernel's ``RLIMIT_CPU`` ends the
worker one second later if it could not be interrupted). math-verify's own wall-clock alarms are off. So a correct
answer scores the same on a busy reward node as on an idle one (a wall-clock limit scored correct answers 0 when
the worker got a small share of a CPU), and a hostile answer still stops after ``timeout_s`` seconds of work. The
caller's wall-clock deadline (:func:`wall_deadline_s`) is only the backstop for a worker that stops answering.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time

from bots_verl.rewards._wire import read_frame, write_frame
from bots_verl.rewards.sandbox import kill_session
from bots_verl.rewards.sandbox_channel import Channel, ChannelClosed, DeadlineExceeded

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

__all__ = ["symbolic_equal"]

ENV_WORKERS = "BOTS_MATH_WORKERS"
# Seconds a new worker may take to import math-verify and sympy (about 1 s; much more on a loaded machine).
_STARTUP_S = 120.0
_FRAME_BYTES = 1 << 16
# Address space of a worker: sympy and math-verify use a few hundred MiB.
_MEMORY_MB = 4096
# The caller's wall-clock backstop: a worker starved of CPU needs many wall seconds per CPU second (a 2-core node with
# 20 busy processes gives it ~0.1 of a core); the answer's real limit is the worker's CPU time.
_WALL_FACTOR = 12.0
_WALL_GRACE_S = 10.0


class _Worker:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bots_verl.rewards.math_verifier"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        write_fd, read_fd = os.dup(self.proc.stdin.fileno()), os.dup(self.proc.stdout.fileno())
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.proc.stdin = self.proc.stdout = None
        self.channel = Channel(write_fd, read_fd)
        try:
            ready = self.channel.recv(time.monotonic() + _STARTUP_S, _FRAME_BYTES)
        except (ChannelClosed, DeadlineExceeded) as err:
            self.kill()
            raise RuntimeError(f"the math-verify worker did not start: {err}") from err
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            self.kill()
            error = ready.get("error") if isinstance(ready, dict) else ready
            raise ImportError(f"the math reward needs math-verify (pip install math-verify): {error}")

    def kill(self) -> None:
        kill_session(self.proc)
        self.proc.wait()
        self.channel.close()


class _Pool:
    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()

    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._count >= self.size:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return _Worker()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker, healthy: bool) -> None:
        if not healthy:
            worker.kill()
        with self._cond:
            if healthy:
                self._idle.append(worker)
            else:
                self._count -= 1
            self._cond.notify()

    def check(self, gold: str, pred: str, timeout_s: float) -> bool:
        worker = self._acquire()
        request = {"gold": gold, "pred": pred, "timeout_s": timeout_s}
        deadline = time.monotonic() + wall_deadline_s(timeout_s)
        try:
            worker.channel.send(request, deadline)
            reply = worker.channel.recv(deadline, _FRAME_BYTES)
        except (DeadlineExceeded, ChannelClosed) as err:
            logger.debug("math-verify worker killed (%s) on %r", type(err).__name__, pred[:100])
            self._release(worker, healthy=False)
            return False
        self._release(worker, healthy=True)
        return isinstance(reply, dict) and reply.get("equal") is True

    def shutdown(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for worker in idle:
            worker.kill()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            size = int(os.environ.get(ENV_WORKERS) or min(4, os.cpu_count() or 1))
            _POOL = _Pool(max(1, size))
        return _POOL


def _forget_pool_in_child() -> None:
    # A forked child must not share the parent's workers (their pipes belong to the parent's threads).
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


@atexit.register
def _shutdown() -> None:
    if _POOL is not None:
        _POOL.shutdown()


def symbolic_equal(ground_truth: str, predicted: str, timeout_s: float) -> bool:
    """Whether math-verify finds ``predicted`` equivalent to ``ground_truth``, within ``timeout_s`` seconds.

    Safe to call from any thread; errors, timeouts and crashes of the check count as "not equal".

    Raises:
        ImportError: math-verify is not installed (a setup problem).
    """
    return _pool().check(ground_truth, predicted, timeout_s)


def wall_deadline_s(timeout_s: float) -> float:
    """Wall-clock seconds the caller waits for a check whose CPU-time limit is ``timeout_s`` (the hang backstop)."""
    return _WALL_FACTOR * timeout_s + _WALL_GRACE_S


# ------------------------------------------------------------------------------------------------- worker side
class _CPUTimeUp(Exception):
    """The check used its CPU time."""


def _cpu_time_up(signum: int, frame: object) -> None:
    raise _CPUTimeUp


def _equal(parse, verify, gold: str, pred: str) -> bool:  # noqa: ANN001 - math-verify functions
    # None turns math-verify's wall-clock alarms off: the worker's CPU-time timer bounds the check instead.
    gold_parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=None)
    pred_parsed = parse(f"\\boxed{{{pred}}}", parsing_timeout=None)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))


def _equal_within(parse, verify, gold: str, pred: str, cpu_s: float) -> bool:  # noqa: ANN001 - math-verify functions
    """:func:`_equal`, stopped (not equal) after ``cpu_s`` seconds of this process's CPU time."""
    try:
        try:
            signal.setitimer(signal.ITIMER_PROF, cpu_s)
            return _equal(parse, verify, gold, pred)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except Exception:  # the timer, and the many types math-verify and sympy raise (SympifyError, RecursionError...)
        return False


def main() -> None:
    """Worker loop: one request at a time from stdin, one reply each to stdout, until stdin closes."""
    import resource

    memory = _MEMORY_MB << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))  # sympy on a huge power fails with MemoryError instead
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # anything printed by sympy or math-verify must not corrupt the protocol
    logging.disable(logging.CRITICAL)
    try:
        from math_verify import parse, verify
    except ImportError as err:
        write_frame(proto_out, {"ready": False, "error": str(err)})
        return
    # sympy imports and builds much on first use; a cold first check could overrun its answer's time limit (and score
    # a correct answer 0), so pay that here, before the worker takes requests.
    try:
        _equal(parse, verify, "\\frac{\\sqrt{8}}{2}+x^2", "x^2+\\sqrt{2}")
    except Exception:  # the warm-up is only an optimisation
        pass
    signal.signal(signal.SIGPROF, _cpu_time_up)
    write_frame(proto_out, {"ready": True})
    while True:
        request = read_frame(proto_in, _FRAME_BYTES)
        if not isinstance(request, dict):
            return
        timeout_s = float(request.get("timeout_s", 5.0))
        # The kernel ends this worker if a check runs past its budget, even if the scorer is gone.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        budget = math.ceil(usage.ru_utime + usage.ru_stime + timeout_s + 1)
        resource.setrlimit(resource.RLIMIT_CPU, (budget, resource.getrlimit(resource.RLIMIT_CPU)[1]))
        equal = _equal_within(parse, verify, str(request["gold"]), str(request["pred"]), timeout_s)
        write_frame(proto_out, {"equal": equal})


if __name__ == "__main__":
    main()
