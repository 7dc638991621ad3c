"""What a sandboxed harness process does before it runs any model code: private protocol descriptors, the sandbox uid
and resource limits, and warm imports.

Executed inside every sandbox after :mod:`bots_verl.rewards._wire` and before :mod:`bots_verl.rewards._harness`, in
one namespace (:func:`bots_verl.rewards.sandbox.launch`): it imports only the standard library.
"""

from __future__ import annotations

import os


def _isolate_fds() -> tuple[int, int]:
    """Keep the protocol on private descriptors and point 0, 1, 2 at /dev/null (stray prints go nowhere)."""
    proto_in, proto_out = os.dup(0), os.dup(1)  # os.dup makes non-inheritable copies: exec'd programs lose them
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return proto_in, proto_out


def _apply_limits(settings: dict) -> None:
    """Drop to the sandbox uid (root-run sandboxes) and set the resource limits, before any model code runs."""
    import resource

    uid = settings.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("harness: could not drop root")
    limits = {
        "memory_bytes": resource.RLIMIT_AS,
        "cpu_s": resource.RLIMIT_CPU,
        "file_bytes": resource.RLIMIT_FSIZE,
        "nproc": resource.RLIMIT_NPROC,
        "nofile": resource.RLIMIT_NOFILE,
    }
    for key, which in limits.items():
        value = settings.get(key)
        if value is not None:
            resource.setrlimit(which, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _warm_imports() -> None:
    # Forked test runs inherit these already imported (json has brought re, enum, functools and collections).
    import bisect  # noqa: F401
    import heapq  # noqa: F401
    import itertools  # noqa: F401
    import math  # noqa: F401
    import string  # noqa: F401
