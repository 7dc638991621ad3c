"""Scoring throughput of correct answers (answers per second), code and math, for this tree and a baseline tree.

Usage::

    python -m bots_verl.speed.reward_throughput                        # this tree only
    python -m bots_verl.speed.reward_throughput --baseline /work/main  # and another checkout, with the ratio

Each tree is measured in its own subprocess (``PYTHONPATH=<tree>``, so the baseline's own ``bots_verl.rewards`` is
imported) by calling ``compute_score`` from a thread pool, as verl's reward loop does (``--threads``, default 8).
Every answer is correct and must score 1.0, otherwise the run stops: the figure is the cost of scoring answers that
pass, the common case late in training. The workload is fixed (GURU-shaped problems with 8 tests each; math answers
that match as strings and answers that need sympy). One warm-up round (sandbox probe, math workers) is not timed.
Two figures per workload: answers per wall-clock second, and answers per CPU-second used by the scorer and every
process it started (sandboxes, math workers; counted in a cgroup, so it needs root), which depends much less on what
else runs on the machine.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["main"]

_PREFIX = (
    "from typing import *\nfrom collections import *\nfrom itertools import *\nfrom heapq import *\n"
    "from bisect import *\nfrom math import *\ninf = float('inf')\n"
)


# LeetCodeDataset's linked-list helpers (part of its prompt prefix).
_LIST_HELPERS = (
    "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
    "def list_node(values):\n    if not values:\n        return None\n    head = ListNode(values[0])\n    p = head\n"
    "    for val in values[1:]:\n        p.next = ListNode(val)\n        p = p.next\n    return head\n"
    "def is_same_list(p1, p2):\n    if p1 is None and p2 is None:\n        return True\n"
    "    if not p1 or not p2:\n        return False\n    return p1.val == p2.val and is_same_list(p1.next, p2.next)\n"
)


def _code(body: str) -> str:
    return f"Here is my program.\n```python\n{body}\n```\n"


def _stdin_case(program: str, pairs: list[tuple[str, str]]) -> tuple:
    tests = json.dumps({"inputs": [i for i, _ in pairs], "outputs": [o for _, o in pairs]})
    return ("codegen__taco", _code(program), tests, None)


def _code_cases() -> dict[str, tuple]:
    add = [(f"{i} {2 * i}\n", f"{3 * i}\n") for i in range(8)]
    sort_in = [(f"{n}\n" + " ".join(str((7 * k) % 101) for k in range(n)) + "\n") for n in range(200, 1000, 100)]
    sort_pairs = [(s, " ".join(map(str, sorted(int(x) for x in s.split("\n")[1].split()))) + "\n") for s in sort_in]
    inputs = [[i, 2 * i + 6] for i in range(8)]
    calls = {
        "fn_name": "gcd_sum",
        "inputs": inputs,
        "outputs": [[sum(range(a)) % 97 + math.gcd(a, b)] for a, b in inputs],
    }
    leetcode = "def check(candidate):\n" + "".join(
        f"    assert candidate(nums={[k, 1, 5, k + 2]}, target=6) == [1, 2]\n"
        f"    assert candidate(nums={[3, k + 10, 7, 2]}, target={k + 12}) == [1, 3]\n"
        for k in range(4)
    )
    leetcode += "\ncheck(Solution().twoSum)\n"
    # GURU's TACO/PrimeIntellect form (bots_verl.rewards.code_tests.deep_eq_test_code writes the same; this file
    # imports nothing of bots_verl but compute_score, because it also runs against older trees).
    taco = (
        f"_inputs = {[[i, i + 1] for i in range(8)]}\n_outputs = {[[2 * i + 1] for i in range(8)]}\nimport math\n"
        "def _deep_eq(a, b, tol=1e-5):\n"
        "    if isinstance(a, float) or isinstance(b, float):\n"
        "        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)\n"
        "    if isinstance(a, (list, tuple)):\n"
        "        if len(a) != len(b): return False\n"
        "        return all(_deep_eq(x, y, tol) for x, y in zip(a, b))\n"
        "    return a == b\n\n"
        "for i, o in zip(_inputs, _outputs):\n"
        "    assert _deep_eq(add(*i), o[0] if len(o) == 1 else tuple(o))\n"
    )
    two_sum = (
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i\n"
    )
    linked = "def check(candidate):\n" + "".join(
        f"    assert is_same_list(candidate(head=list_node({list(range(k))})), list_node({list(range(k))[::-1]}))\n"
        for k in range(1, 9)
    )
    linked += "\ncheck(Solution().reverseList)\n"
    reverse = (
        "class Solution:\n    def reverseList(self, head: Optional[ListNode]) -> Optional[ListNode]:\n"
        "        prev = None\n        while head:\n            head.next, prev, head = prev, head, head.next\n"
        "        return prev\n"
    )
    return {
        "stdin a+b": _stdin_case("a, b = map(int, input().split())\nprint(a + b)", add),
        "stdin sort": _stdin_case("input()\nprint(*sorted(map(int, input().split())))", sort_pairs),
        "call-based": (
            "codegen__primeintellect",
            _code("import math\ndef gcd_sum(a, b):\n    return sum(range(a)) % 97 + math.gcd(a, b)"),
            json.dumps(calls),
            None,
        ),
        "functional leetcode": ("codegen__leetcode2k", _code(two_sum), json.dumps({"functional": leetcode}), _PREFIX),
        "functional (judge)": (
            "codegen__leetcode2k",
            _code(reverse),
            json.dumps({"functional": linked}),
            _PREFIX + _LIST_HELPERS,
        ),
        "functional taco": (
            "codegen__taco",
            _code("def add(a, b):\n    return a + b"),
            json.dumps({"functional": taco}),
            None,
        ),
    }


# Math answers are made unique per call (k), so that neither implementation is measured on its parse caches; the ground
# truths repeat per problem in training, the answers mostly do not.
_MATH_FAMILIES = {
    "math exact": [
        lambda k: (f"So the answer is \\boxed{{{k}}}.", str(k)),
        lambda k: (f"\\boxed{{\\frac{{{k}}}{{{k + 1}}}}}", f"\\frac{{{k}}}{{{k + 1}}}"),
    ],
    "math symbolic": [
        lambda k: (f"\\boxed{{{k / 2}}}", f"\\frac{{{k}}}{{2}}"),
        lambda k: (f"\\boxed{{{k}+x^2}}", f"x^2+{k}"),
        lambda k: (f"\\boxed{{\\sqrt{{{8 * k * k}}}}}", f"{2 * k}\\sqrt{{2}}"),
        lambda k: (f"\\boxed{{{k}\\pi/2}}", f"\\frac{{{k}\\pi}}{{2}}"),
    ],
}


class _CpuMeter:
    """CPU seconds used by this process and everything it starts, from a cgroup of its own.

    Sandboxed programs live in PID namespaces whose processes are reaped inside the sandbox, so ``getrusage`` misses
    them; a cgroup counts every process in it. Needs root and a cgroup v1 ``cpuacct`` or v2 hierarchy; otherwise
    :meth:`seconds` returns ``None`` and the bench prints wall-clock figures only.
    """

    def __init__(self) -> None:
        self.path: str | None = None
        self._parent: str | None = None
        for parent, usage in (("/sys/fs/cgroup/cpuacct", "cpuacct.usage"), ("/sys/fs/cgroup", "cpu.stat")):
            if os.geteuid() != 0 or not os.path.exists(os.path.join(parent, usage)):
                continue
            path = os.path.join(parent, f"bots_bench_{os.getpid()}")
            try:
                os.makedirs(path, exist_ok=True)
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                continue
            self.path, self._parent, self._usage = path, parent, usage
            atexit.register(self._remove)
            return

    def seconds(self) -> float | None:
        if self.path is None:
            return None
        with open(os.path.join(self.path, self._usage)) as f:
            text = f.read()
        if self._usage == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6

    def _remove(self) -> None:
        try:
            with open(os.path.join(self._parent, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            os.rmdir(self.path)
        except OSError:  # a child still exiting; the empty group is harmless
            pass


_CPU = None


def _cpu_seconds() -> float | None:
    return _CPU.seconds() if _CPU is not None else None


def _throughput(compute_score, make_case, variants: int, threads: int, seconds: float) -> tuple[float, float | None]:
    """(answers per wall-clock second, answers per CPU second of the whole process tree) over whole rounds until
    ``seconds`` have passed; ``make_case(i)`` is the i-th answer."""

    def score(i: int) -> float:
        source, response, truth, extra = make_case(i)
        return compute_score(source, response, truth, extra_info={"prefix": extra} if extra else None)["score"]

    with ThreadPoolExecutor(threads) as pool:
        scores = list(pool.map(score, range(variants)))  # warm-up: sandbox probe, math workers
        if scores != [1.0] * variants:
            raise SystemExit(f"bench: a correct answer did not score 1.0 ({scores}); fix that before timing")
        done, start, cpu_start = variants, time.perf_counter(), _cpu_seconds()
        while True:
            batch = range(done, done + max(threads, variants))
            list(pool.map(score, batch))
            done += len(batch)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                cpu_end = _cpu_seconds()
                per_cpu = None if cpu_start is None else (done - variants) / max(cpu_end - cpu_start, 1e-9)
                return (done - variants) / elapsed, per_cpu


def _measure(threads: int, seconds: float) -> dict[str, tuple[float, float | None]]:
    global _CPU
    _CPU = _CpuMeter()  # before any thread or child exists, so that all of them are counted
    from bots_verl.rewards import compute_score

    def cycle(cases: list) -> tuple:
        return lambda i: cases[i % len(cases)]

    results = {}
    code_cases = _code_cases()
    for name, case in code_cases.items():
        results[name] = _throughput(compute_score, cycle([case]), 1, threads, seconds)
    everything = list(code_cases.values())
    results["code (all kinds)"] = _throughput(compute_score, cycle(everything), len(everything), threads, seconds)
    every_family = []
    for name, families in _MATH_FAMILIES.items():
        every_family += families

        def make(i: int, families: list = families) -> tuple:
            response, truth = families[i % len(families)](i // len(families) + 1)
            return "math__bench", response, truth, None

        results[name] = _throughput(compute_score, make, len(families), threads, seconds)

    def make_any(i: int) -> tuple:
        response, truth = every_family[i % len(every_family)](i // len(every_family) + 1)
        return "math__bench", response, truth, None

    results["math (all kinds)"] = _throughput(compute_score, make_any, len(every_family), threads, seconds)
    return results


def _run_tree(root: str, threads: int, seconds: float) -> dict[str, float]:
    """Measure ``root``'s bots_verl.rewards in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    command = [sys.executable, "-c", Path(__file__).read_text(), "--worker", "--threads", str(threads)]
    command += ["--seconds", str(seconds)]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench: measuring {root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    """Print answers per second for this tree (and ``--baseline``), with the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="root of another checkout to compare with (e.g. /work/main)")
    parser.add_argument("--threads", type=int, default=8, help="scoring threads, like verl's reward thread pool")
    parser.add_argument("--seconds", type=float, default=5.0, help="minimum timed seconds per figure")
    parser.add_argument(
        "--repeat", type=int, default=1, help="alternate the two trees this many times and report medians (for noise)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_measure(args.threads, args.seconds)))
        return
    here = str(Path(__file__).resolve().parents[2])
    afters, befores = [], []
    for repeat in range(args.repeat):
        # Alternate the order, so that a change in machine load does not favour one tree.
        order = (
            [(here, afters), (args.baseline, befores)]
            if repeat % 2 == 0
            else [(args.baseline, befores), (here, afters)]
        )
        for root, runs in order:
            if root:
                runs.append(_run_tree(root, args.threads, args.seconds))
    load = os.getloadavg()
    print(
        f"# {os.cpu_count()} CPUs, load average {load[0]:.1f} (1 min); {args.threads} scoring threads; median of "
        f"{args.repeat} run(s)\n# wall: answers per second; cpu: answers per CPU-second of the scorer and every process"
        " it started, from a cgroup (less sensitive to other load on the machine; n/a without root)"
    )
    columns = ["wall after", "cpu after"]
    if befores:
        columns += ["wall before", "cpu before", "wall ratio", "cpu ratio"]
    print(f"{'workload':22s}" + "".join(f" {c:>11s}" for c in columns))
    for name in afters[0]:
        cells = [_median(run[name][k] for run in afters) for k in (0, 1)]
        if befores:
            cells += [_median(run[name][k] for run in befores) for k in (0, 1)]
            for k in (0, 1):
                pairs = [(a[name][k], b[name][k]) for a, b in zip(afters, befores, strict=True)]
                cells.append(_median(None if None in pair else pair[0] / pair[1] for pair in pairs))
        print(f"{name:22s}" + "".join(_cell(c) for c in cells))


def _median(values) -> float | None:
    values = list(values)
    return None if None in values else statistics.median(values)


def _cell(value: float | None) -> str:
    if value is None:
        return f" {'n/a':>11s}"
    return f" {value:11.2f}" if value < 100 else f" {value:11.0f}"


if __name__ == "__main__":
    main(sys.argv[1:])
