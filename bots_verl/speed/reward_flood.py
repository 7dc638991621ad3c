"""Peak memory of the reward process while many code answers flood their output at once.

Usage::

    python -m bots_verl.speed.reward_flood                            # 64 flooding answers, this tree
    python -m bots_verl.speed.reward_flood --baseline /work/main     # and another checkout
    python -m bots_verl.speed.reward_flood --workload at-cap         # answers that print just under the cap

Each tree runs in a fresh interpreter (``PYTHONPATH=<tree>``, so a baseline's own ``bots_verl.rewards`` is imported)
with ``BOTS_CODE_MAX_CONCURRENT=--answers``, and scores ``--answers`` answers from as many threads at once (as verl's
reward thread pool does), every one in its own bubblewrap sandbox, with ``--timeout-s`` (default 60 s, so that every
flood reaches the cap even on a loaded machine). The figure is the scorer process's peak resident
set (``ru_maxrss``), before the answers and at the end; the sandboxes' own memory (bounded by their limits) is
reported apart, as the peak of the sampled sum over the scorer's descendant processes.

Workloads (every answer scores 0): ``flood`` prints ``\\x01`` without end (the worst case for JSON, which escapes a
control byte as six); ``at-cap`` prints one byte less than the 16 MiB cap of ``\\x01`` and exits 0, so its output is
shipped and compared; ``lines`` does the same with lines of two digits (as lists of lines, the costliest output for
the comparison).

A watchdog stops a measurement (and its sandboxes) when the machine's available memory falls below
``--min-available-gib``: the pre-fix scorer needs ~290 MiB per flooding answer, more than a small machine has for 64.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["main"]

_CAP = 16 << 20
_WORKLOADS = {
    "flood": "import sys\nwhile True:\n    sys.stdout.write('\\x01' * 65536)\n",
    "at-cap": f"import sys\nsys.stdout.write('\\x01' * {_CAP - 1})\n",
    "lines": f"import sys\nsys.stdout.write('12\\n' * {(_CAP - 1) // 3})\n",
}
_TESTS = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})


def _mib(kib: float) -> float:
    return round(kib / 1024, 1)


def _available_kib() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def _tree_rss_kib(root: int) -> int:
    """Sum of the resident sets of ``root``'s descendants (not ``root``), from /proc (best effort)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page_kib = os.sysconf("SC_PAGE_SIZE") // 1024
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited while we looked
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * page_kib
    total, stack = 0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while stack:
        for child in children.get(stack.pop(), []):
            total += rss[child]
            stack.append(child)
    return total


def _measure(workload: str, answers: int, timeout_s: float, min_available_kib: int) -> dict:
    """Score ``answers`` answers of ``workload`` at once in this process; the memory figures."""
    from bots_verl.rewards import compute_score
    from bots_verl.rewards.sandbox_checks import check_isolation

    check_isolation("bwrap")
    answer = f"```python\n{_WORKLOADS[workload]}```"
    warm = compute_score("codegen__taco", "```python\nprint(1)\n```", _TESTS)
    if warm["score"] != 1.0:
        raise SystemExit(f"reward_flood: a correct answer scored {warm}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    done = threading.Event()
    sandboxes = [0]

    def watch() -> None:
        # Samples the sandboxes, and ends everything (the sandboxes die with us) before the machine runs out.
        while not done.wait(0.2):
            sandboxes[0] = max(sandboxes[0], _tree_rss_kib(os.getpid()))
            if _available_kib() < min_available_kib:
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                print(json.dumps({"aborted": True, "peak_rss_mib": _mib(peak), "sandboxes_mib": _mib(sandboxes[0])}))
                sys.stdout.flush()
                os._exit(3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    barrier = threading.Barrier(answers)

    def score(_: int) -> str:
        barrier.wait()
        result = compute_score("codegen__taco", answer, _TESTS, timeout_s=timeout_s)
        if result["score"] != 0.0:
            raise RuntimeError(f"a {workload} answer scored {result}")
        return str(result["status"])

    start = time.monotonic()
    with ThreadPoolExecutor(answers) as pool:
        statuses = Counter(pool.map(score, range(answers)))
    seconds = time.monotonic() - start
    done.set()
    watcher.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "rss_before_mib": _mib(before),
        "peak_rss_mib": _mib(peak),
        "sandboxes_mib": _mib(sandboxes[0]),
        "seconds": round(seconds, 1),
        "statuses": dict(statuses),
    }


def _run_tree(root: str, workload: str, answers: int, timeout_s: float, min_available_gib: float) -> dict:
    """Measure ``root``'s bots_verl.rewards in a fresh interpreter."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "BOTS_CODE_MAX_CONCURRENT": str(answers),
    }
    command = [sys.executable, "-c", Path(__file__).read_text(), "--worker", "--workload", workload]
    command += ["--answers", str(answers), "--timeout-s", str(timeout_s), "--min-available-gib", str(min_available_gib)]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode not in (0, 3) or not lines:
        raise SystemExit(f"reward_flood: measuring {root} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> None:
    """Print the scorer's peak memory for this tree (and ``--baseline``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="root of another checkout to compare with (e.g. /work/main)")
    parser.add_argument("--workload", choices=sorted(_WORKLOADS), default="flood")
    parser.add_argument("--answers", type=int, default=64, help="answers scored at once (sandboxes in flight)")
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=60.0,
        help="each answer's time limit: long enough that every flood reaches the cap on a loaded machine",
    )
    parser.add_argument(
        "--min-available-gib", type=float, default=3.0, help="stop a measurement when less memory is left"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.answers <= 128:
        parser.error("--answers must be between 1 and 128 (BOTS_CODE_MAX_CONCURRENT's range)")
    if args.worker:
        print(
            json.dumps(_measure(args.workload, args.answers, args.timeout_s, int(args.min_available_gib * (1 << 20))))
        )
        return
    here = str(Path(__file__).resolve().parents[2])
    print(f"# {args.answers} {args.workload} answers at once; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for name, root in (("this tree", here), ("baseline", args.baseline)):
        if root:
            figures = _run_tree(root, args.workload, args.answers, args.timeout_s, args.min_available_gib)
            print(f"{name:10s} {root}: {json.dumps(figures)}")


if __name__ == "__main__":
    main(sys.argv[1:])
