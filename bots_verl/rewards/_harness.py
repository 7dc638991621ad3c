"""The program that runs inside every code sandbox, and the wire format it shares with the scorer.

This file is run as ``python -I -S -c <this source> <role> <settings JSON>`` inside a sandbox, so it imports only
the standard library and nothing from ``bots_verl``; the scorer imports it for the same frame and value codecs.

Roles:

- ``worker`` runs the model's program. It never sees an expected output: the scorer (or, for functional tests, the
  judge) sends it inputs and compares what comes back. Everything a worker sends is therefore only a *claim* by the
  program, and the worker's integrity does not matter: the program may patch builtins, exit early, write to the
  protocol pipe, or replace this harness; it still has to produce the right outputs.
- ``judge`` runs the dataset's functional test code (``assert candidate(...) == ...``) in its own sandbox, with every
  name the program defines replaced by a proxy that calls into the worker over a pipe. Values cross as plain data
  (the codec below), so an object whose ``__eq__`` always returns ``True`` cannot cross, and ``sys.exit(0)`` in the
  program ends only the worker, which fails the test.
- ``probe`` reports what the sandbox looks like (used once per process to check that isolation works).

Wire format: a frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Values travel as a flat node
table (:func:`encode_value`), so deep or cyclic structures need no recursion and cannot blow the stack of the reader.
The report of a stdin run is followed by the run's output as raw bytes (:func:`write_run`).
"""

from __future__ import annotations

import builtins
import json
import os
import struct
import sys

HEADER = struct.Struct(">I")
# JSON cannot hold ints beyond what ``int.__str__`` allows (4300 digits); larger magnitudes travel as hex.
_INT_INLINE = 1 << 63


class CodecError(ValueError):
    """A value that cannot be encoded, or a node table that does not decode."""


# ---------------------------------------------------------------------------------------------------------- frames
def write_frame(fd: int, obj: object) -> None:
    """Write one frame to a blocking file descriptor."""
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def write_run(fd: int, report: dict, output: list[bytes]) -> None:
    """Write a run's report frame, then its ``report["stdout_bytes"]`` bytes of output raw, not as JSON.

    JSON would escape a control byte as six (``\\u0001``), and the scorer would hold the frame, a copy and the
    decoded string at once; raw, the scorer reads exactly the announced bytes (at most the output cap) into one buffer.
    """
    write_frame(fd, report)
    for chunk in output:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int = 1 << 30) -> object:
    """Read one frame from a blocking file descriptor; ``None`` at end of file or for an oversized frame."""
    head = _read_exact(fd, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > max_bytes:
        return None
    data = _read_exact(fd, size)
    return None if data is None else json.loads(data)


# ---------------------------------------------------------------------------------------------------------- values
_IMMUTABLE_TAGS = ("t", "s", "z")
_REF_TYPES = (list, dict)  # in a decoded frame, every other JSON value is a plain scalar
_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _special_float(value: float) -> dict:
    return {"f": "nan" if value != value else ("inf" if value > 0 else "-inf")}


def encode_value(value: object, max_nodes: int = 5_000_000) -> dict:
    """Encode a value as ``{"r": ref, "n": nodes}`` (iteratively: any depth; cycles and sharing preserved).

    A ref is a JSON scalar (``None``, a bool, a str, an int below 2**63, a finite float), ``{"i": hex}`` (a larger
    int), ``{"f": "nan"|"inf"|"-inf"}``, or ``[index]`` (a node). Nodes are ``["l"|"t"|"s"|"z", [refs]]`` (list,
    tuple, set, frozenset), ``["d", [key, value, key, value, ...]]``, ``["b", latin-1 text]`` (bytes) and
    ``["o", class name, [attribute, ref, attribute, ref, ...]]`` (an instance of a class the running program defined,
    by its ``__dict__``). Subclasses of builtin types travel as the builtin value, so no custom method crosses.

    Raises:
        CodecError: for a value of any other type, or more than ``max_nodes`` containers.
    """
    nodes: list = []
    index_of: dict[int, int] = {}
    keep_alive: list = []  # ids are unique only while their objects live
    todo: list = []

    def ref(item: object) -> object:
        kind = type(item)
        if kind is int:
            return item if -_INT_INLINE < item < _INT_INLINE else {"i": hex(item)}
        if kind is str or kind is bool or item is None:
            return item
        if kind is float:
            return item if item - item == 0.0 else _special_float(item)
        if kind not in (list, tuple, dict, set, frozenset):
            for base in (int, float, str):  # builtin subclasses become the builtin value (bool cannot be subclassed)
                if isinstance(item, base):
                    return ref(base(item))
        key = id(item)
        index = index_of.get(key)
        if index is None:
            index = index_of[key] = len(nodes)
            if index >= max_nodes:
                raise CodecError("value too large")
            keep_alive.append(item)
            nodes.append(None)
            todo.append(item)
        return [index]

    def refs(items: object) -> list:
        # Plain scalars inline without a call to ref(): most payloads are long runs of small ints and strings.
        return [
            x if (t := type(x)) is str or (t is int and -_INT_INLINE < x < _INT_INLINE) or x is None else ref(x)
            for x in items
        ]

    root = ref(value)
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is list or (kind is not tuple and isinstance(item, list)):
            node = ["l", refs(list.__iter__(item))]
        elif isinstance(item, tuple):
            node = ["t", refs(tuple.__iter__(item))]
        elif isinstance(item, dict):
            node = ["d", refs(x for pair in dict.items(item) for x in pair)]
        elif isinstance(item, frozenset):
            node = ["z", refs(frozenset.__iter__(item))]
        elif isinstance(item, set):
            node = ["s", refs(set.__iter__(item))]
        elif isinstance(item, bytes | bytearray):
            node = ["b", bytes(item).decode("latin-1")]
        else:
            attrs = getattr(item, "__dict__", None)
            if type(item).__module__ != "__main__" or not isinstance(attrs, dict):
                raise CodecError(f"cannot send a {type(item).__name__}")
            flat = []
            for key, val in dict.items(attrs):
                flat.append(str(key))
                flat.append(ref(val))
            node = ["o", str(type(item).__name__), flat]
        nodes[index_of[id(item)]] = node
    return {"r": root, "n": nodes}


def decode_value(blob: object, classes: dict | None = None, max_nodes: int | None = None) -> object:
    """Decode :func:`encode_value`'s output without running any of the sender's code.

    Args:
        blob: the ``{"r", "n"}`` dict.
        classes: class name -> class for ``"o"`` nodes; instances are made with ``object.__new__`` and their
            ``__dict__`` filled (``__init__`` is not called). An unknown class name is an error.
        max_nodes: refuse values of more containers than this (bounds the decoding time).

    Raises:
        CodecError: for anything malformed (unknown tags, bad references, unhashable keys, unknown classes) or too
            large.
    """
    if type(blob) is not dict or "r" not in blob or type(blob.get("n")) is not list:
        raise CodecError("not an encoded value")
    nodes = blob["n"]
    if max_nodes is not None and len(nodes) > max_nodes:
        raise CodecError(f"more than {max_nodes} containers")
    count = len(nodes)
    built: list = [None] * count
    pending_immutables = []
    for i, node in enumerate(nodes):
        if type(node) is not list or len(node) < 2:
            raise CodecError("bad node")
        tag = node[0]
        if tag == "l" or tag == "d":
            if type(node[1]) is not list or (tag == "d" and len(node[1]) % 2):
                raise CodecError("bad node payload")
            built[i] = [] if tag == "l" else {}
        elif tag == "o":
            cls = (classes or {}).get(node[1]) if len(node) == 3 and type(node[1]) is str else None
            if not isinstance(cls, type) or type(node[2]) is not list or len(node[2]) % 2:
                raise CodecError(f"unknown class or bad object node ({node[1] if len(node) > 1 else None!r})")
            try:
                built[i] = object.__new__(cls)
            except TypeError as err:
                raise CodecError(f"cannot rebuild a {cls.__name__}") from err
        elif tag == "b" and type(node[1]) is str:
            try:
                built[i] = node[1].encode("latin-1")
            except UnicodeEncodeError as err:
                raise CodecError("bad bytes") from err
        elif tag in _IMMUTABLE_TAGS and type(node[1]) is list:
            pending_immutables.append(i)
        else:
            raise CodecError(f"bad node {tag!r}")

    def value(ref: object) -> object:
        kind = type(ref)
        if kind is list:
            if len(ref) == 1 and type(ref[0]) is int and 0 <= ref[0] < count:
                found = built[ref[0]]
                if found is not None:
                    return found
                raise _Unbuilt(ref[0])
            raise CodecError("bad reference")
        if kind is dict:
            if len(ref) == 1:
                if type(ref.get("i")) is str:
                    try:
                        return int(ref["i"], 16)
                    except ValueError as err:
                        raise CodecError("bad int") from err
                if ref.get("f") in _NONFINITE:
                    return _NONFINITE[ref["f"]]
            raise CodecError("bad reference")
        return ref  # json.loads makes only None, bool, int, float and str besides lists and dicts

    # Tuples and (frozen)sets need their members first: post-order with an explicit stack. Mutable nodes exist
    # already as empty shells, so a legitimate cycle always passes through one; any other cycle is an error.
    for start in pending_immutables:
        stack, on_stack = [start], {start}  # the stack is a dependency path: each entry waits for the one above
        while stack:
            i = stack[-1]
            if built[i] is not None:
                on_stack.discard(stack.pop())
                continue
            try:
                members = [value(ref) for ref in nodes[i][1]]
            except _Unbuilt as missing:
                if missing.index in on_stack:
                    raise CodecError("cycle through immutable nodes") from None
                stack.append(missing.index)
                on_stack.add(missing.index)
                continue
            tag = nodes[i][0]
            try:
                built[i] = tuple(members) if tag == "t" else set(members) if tag == "s" else frozenset(members)
            except TypeError as err:
                raise CodecError("unhashable member") from err
            on_stack.discard(stack.pop())

    try:
        for i, node in enumerate(nodes):
            tag = node[0]
            if tag == "l":
                built[i].extend([r if type(r) not in _REF_TYPES else value(r) for r in node[1]])
            elif tag == "d":
                flat = node[1]
                target = built[i]
                for k in range(0, len(flat), 2):
                    target[value(flat[k])] = value(flat[k + 1])
            elif tag == "o":
                flat = node[2]
                attrs = built[i].__dict__
                for k in range(0, len(flat), 2):
                    if type(flat[k]) is not str:
                        raise CodecError("bad attribute")
                    attrs[flat[k]] = value(flat[k + 1])
        return value(blob["r"])
    except _Unbuilt as err:
        raise CodecError("unresolved reference") from err
    except TypeError as err:  # an unhashable dict key
        raise CodecError("unhashable key") from err


class _Unbuilt(Exception):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


# ---------------------------------------------------------------------------------------------------------- setup
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


# ---------------------------------------------------------------------------------------------------------- worker
def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    return code if type(code) is int else 1


def _run_program_once(
    code_obj: object, stdin_text: str, settings: dict, proto: tuple[int, int]
) -> tuple[dict, list[bytes]]:
    """Fork, run the program with ``stdin_text`` as standard input, and collect its standard output.

    The output is what the program wrote by the time its main process exited; processes it left behind are killed
    (in a PID namespace of our own: all of them) and not waited for. At most ``max_output_bytes`` plus one read are
    held; a program that writes more is killed then, and its output is dropped.

    Returns:
        The report (``stdout_bytes``, ``truncated``, ``exit``) and the output as chunks of ``stdout_bytes`` bytes
        in all (none when truncated); :func:`write_run` sends both.
    """
    import select
    import signal

    max_output = settings["max_output_bytes"]
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the test run: never return into the harness
        status = 1
        try:
            os.setpgid(0, 0)
            os.dup2(stdin_r, 0)
            os.dup2(out_w, 1)
            for fd in (stdin_r, stdin_w, out_r, out_w, *proto):
                os.close(fd)
            sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            status = 0
            try:
                exec(code_obj, {"__name__": "__main__", "__builtins__": builtins})
            except SystemExit as exc:
                status = _exit_code(exc)
            except BaseException:
                status = 1
            # What the interpreter does at exit: wait for non-daemon threads, run atexit hooks, flush.
            import atexit
            import threading

            for thread in threading.enumerate():
                if thread is not threading.current_thread() and not thread.daemon:
                    thread.join()
            atexit._run_exitfuncs()
            sys.stdout.flush()
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(stdin_r)
    os.close(out_w)
    pending = memoryview(stdin_text.encode("utf-8", errors="surrogatepass"))
    os.set_blocking(stdin_w, False)
    chunks, size = [], 0
    try:
        exited_fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # Linux < 5.3: poll waitpid instead
        exited_fd = None
    poller = select.poll()
    poller.register(out_r, select.POLLIN)
    if exited_fd is not None:
        poller.register(exited_fd, select.POLLIN)
    if pending:
        poller.register(stdin_w, select.POLLOUT)
    else:
        os.close(stdin_w)
        stdin_w = -1
    status = None
    while True:
        ready = {fd for fd, _ in poller.poll(None if exited_fd is not None else 20)}
        if stdin_w in ready:
            try:
                pending = pending[os.write(stdin_w, pending[: 1 << 16]) :]
            except BlockingIOError:
                pass
            except OSError:  # the program closed its stdin
                pending = pending[:0]
            if not pending:
                poller.unregister(stdin_w)
                os.close(stdin_w)
                stdin_w = -1
        if out_r in ready:
            chunk = os.read(out_r, 1 << 16)
            chunks.append(chunk)
            size += len(chunk)
            if size > max_output:
                break
            if not chunk:
                poller.unregister(out_r)
        if exited_fd is None:
            waited, status = os.waitpid(pid, os.WNOHANG)
            exited = waited == pid
        else:
            exited = exited_fd in ready
        if exited:
            # Take what is already written; descendants that still hold the pipe are not waited for.
            os.set_blocking(out_r, False)
            while size <= max_output:
                try:
                    chunk = os.read(out_r, 1 << 16)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            break
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if status is None:
        _, status = os.waitpid(pid, 0)
    if settings.get("pidns"):
        # Alone in our PID namespace: end every straggler (setsid daemons included) before the next test.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    for fd in (out_r, stdin_w, exited_fd):
        if fd is not None and fd >= 0:
            os.close(fd)
    if size > max_output:
        # A flooded run fails whatever it printed: its output is dropped here, inside the sandbox, so that the
        # scorer never receives, buffers or decodes it.
        return {"stdout_bytes": 0, "truncated": True, "exit": None}, []
    result: dict = {"stdout_bytes": size, "truncated": False}
    if os.WIFEXITED(status):
        result["exit"] = os.WEXITSTATUS(status)
    else:
        result["exit"] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return result, chunks


def _quit(code: object = None) -> None:
    raise SystemExit(code)


def _user_classes(namespace: dict) -> dict:
    return {k: v for k, v in namespace.items() if isinstance(v, type) and v.__module__ == "__main__"}


def _worker(settings: dict) -> None:
    proto = _isolate_fds()
    _apply_limits(settings)
    # python -S skips the site module, which defines exit() and quit(); programs use them.
    builtins.exit = builtins.quit = _quit
    if settings["kind"] == "stdin":
        _warm_imports()
    proto_in, proto_out = proto
    load = read_frame(proto_in)
    if not isinstance(load, dict):
        return
    source = f"{load.get('prefix') or ''}\n{load['code']}"
    try:
        code_obj = compile(source, "<solution>", "exec")
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        write_frame(proto_out, {"ok": False, "error": f"compile: {type(exc).__name__}"})
        return
    if settings["kind"] == "stdin":
        write_frame(proto_out, {"ok": True})
        while True:
            request = read_frame(proto_in)
            if not isinstance(request, dict):
                return
            write_run(proto_out, *_run_program_once(code_obj, request["stdin"], settings, proto))

    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(code_obj, namespace)
    except BaseException as exc:
        write_frame(proto_out, {"ok": False, "error": f"load: {type(exc).__name__}"})
        return
    write_frame(proto_out, {"ok": True})
    handles: list = []
    entry_cache: dict = {}
    while True:
        request = read_frame(proto_in)
        if not isinstance(request, dict):
            return
        try:
            reply = _serve_call(request, namespace, handles, entry_cache)
        except BaseException as exc:
            reply = {"ok": False, "error": type(exc).__name__}
        try:
            write_frame(proto_out, reply)
        except CodecError as exc:
            write_frame(proto_out, {"ok": False, "error": f"result: {exc}"})


def _serve_call(request: dict, namespace: dict, handles: list, entry_cache: dict) -> dict:
    classes = _user_classes(namespace)
    args = decode_value(request["args"], classes)
    kwargs = decode_value(request["kwargs"], classes) if "kwargs" in request else {}
    target = request["target"]
    if "entry" in target:  # call-based tests: see bots_verl.rewards.code_tests.Call.via
        name, via = target["entry"], target.get("via", "either")
        fn = entry_cache.get((name, via))
        if fn is None:
            solution = namespace.get("Solution")
            if via in ("function", "either"):
                fn = namespace.get(name)
            if via != "function" and not callable(fn) and isinstance(solution, type):
                fn = getattr(solution(), name, None)
            if not callable(fn):
                return {"ok": False, "error": f"no function {name!r}"}
            if via != "fresh":
                entry_cache[(name, via)] = fn
        return {"ok": True, "value": encode_value(fn(*args, **kwargs))}
    if "handle" in target:
        obj = getattr(handles[target["handle"]], target["attr"])
    else:
        obj = namespace[target["name"]]
        for attr in target.get("attrs", ()):
            obj = getattr(obj, attr)
        if isinstance(obj, type) and not target.get("attrs"):
            handles.append(obj(*args, **kwargs))
            return {"ok": True, "handle": len(handles) - 1}
    before = [json.dumps(request["args"]["n"]), json.dumps(request["kwargs"]["n"])] if "kwargs" in request else None
    value = obj(*args, **kwargs)
    reply = {"ok": True, "value": encode_value(value)}
    if before is not None:
        # In-place changes to the arguments (LeetCode "modify nums in-place" problems) travel back.
        after_args, after_kwargs = encode_value(args), encode_value(kwargs)
        if json.dumps(after_args["n"]) != before[0] or json.dumps(after_kwargs["n"]) != before[1]:
            reply["after"] = [after_args, after_kwargs]
    return reply


# ---------------------------------------------------------------------------------------------------------- judge
class _RemoteError(Exception):
    """The program's side of a call failed (exception, crash, or a value that cannot be sent)."""


class _Link:
    def __init__(self, to_worker: int, from_worker: int, namespace: dict, prefix_classes: dict) -> None:
        self.to_worker, self.from_worker, self.calls = to_worker, from_worker, 0
        self._namespace, self._prefix_classes = namespace, prefix_classes

    @property
    def classes(self) -> dict:
        return {**self._prefix_classes, **_user_classes(self._namespace)}

    def call(self, target: dict, args: tuple, kwargs: dict) -> dict:
        request = {"target": target, "args": encode_value(list(args)), "kwargs": encode_value(kwargs)}
        write_frame(self.to_worker, request)
        reply = read_frame(self.from_worker)
        if not isinstance(reply, dict) or reply.get("ok") is not True:
            raise _RemoteError(reply.get("error") if isinstance(reply, dict) else "worker gone")
        self.calls += 1
        after = reply.get("after")
        if isinstance(after, list) and len(after) == 2:
            after_args, after_kwargs = (decode_value(blob, self.classes) for blob in after)
            if isinstance(after_args, list) and len(after_args) == len(args) and isinstance(after_kwargs, dict):
                for original, new in zip(args, after_args, strict=True):
                    _update_in_place(original, new)
                for key, original in kwargs.items():
                    _update_in_place(original, after_kwargs.get(key))
        return reply


def _update_in_place(original: object, new: object) -> None:
    if type(original) is not type(new):
        return
    if isinstance(original, list):
        original[:] = new
    elif isinstance(original, dict | set):
        original.clear()
        original.update(new)
    elif hasattr(original, "__dict__") and type(original).__module__ == "__main__":
        original.__dict__.clear()
        original.__dict__.update(new.__dict__)


class _RemoteHandle:
    """An object that lives in the worker (e.g. ``Solution()``); only its methods can be called."""

    def __init__(self, link: _Link, handle: int) -> None:
        self._link, self._handle = link, handle

    def __getattr__(self, attr: str) -> _RemoteCallable:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _RemoteCallable(self._link, {"handle": self._handle, "attr": attr})


class _RemoteCallable:
    """A function, class or method of the program, called by value over the link."""

    def __init__(self, link: _Link, target: dict) -> None:
        self._link, self._target = link, target

    def __getattr__(self, attr: str) -> _RemoteCallable:
        if attr.startswith("__") or "handle" in self._target:
            raise AttributeError(attr)
        return _RemoteCallable(self._link, {**self._target, "attrs": [*self._target.get("attrs", ()), attr]})

    def __call__(self, *args: object, **kwargs: object) -> object:
        reply = self._link.call(self._target, args, kwargs)
        if "handle" in reply:
            return _RemoteHandle(self._link, reply["handle"])
        return decode_value(reply["value"], self._link.classes)


def _bound_names(tree: object) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _top_level_names(source: str) -> set[str]:
    import ast

    try:
        tree = ast.parse(source)
    except BaseException:  # the program's syntax is the worker's problem
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _judge(settings: dict) -> None:
    import ast

    proto_in, proto_out = _isolate_fds()
    _apply_limits(settings)
    # Test helpers such as is_same_list recurse once per node of the program's answer.
    sys.setrecursionlimit(100_000)
    load = read_frame(proto_in)
    if not isinstance(load, dict):
        return
    to_worker, from_worker = settings["to_worker"], settings["from_worker"]

    def verdict(passed: bool, error: str | None = None, calls: int = 0) -> None:
        write_frame(proto_out, {"passed": passed, "error": error, "calls": calls})

    write_frame(to_worker, load["worker"])
    ready = read_frame(from_worker)
    if not isinstance(ready, dict) or ready.get("ok") is not True:
        verdict(False, ready.get("error") if isinstance(ready, dict) else "worker gone")
        return
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(load["prefix"] or "", "<prefix>", "exec"), namespace)
        test_tree = ast.parse(load["test"])
    except BaseException as exc:
        verdict(False, f"test setup: {type(exc).__name__}: {exc}")
        return
    # Results decode into the prefix's classes (ListNode, TreeNode) even where the program redefines them.
    link = _Link(to_worker, from_worker, namespace, _user_classes(namespace))
    # GURU runs prefix + program + test as one file, so a name the test reads but does not define is the program's
    # if the program defines it at top level (Solution, the entry point, helpers; shadowing the prefix and
    # builtins), else the prefix's, else a builtin; anything else is looked up in the program too.
    loaded = {n.id for n in ast.walk(test_tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    program = _top_level_names(load["worker"]["code"])
    for name in loaded - _bound_names(test_tree):
        if name in program or (name not in namespace and not hasattr(builtins, name)):
            namespace[name] = _RemoteCallable(link, {"name": name})
    try:
        exec(compile(test_tree, "<test>", "exec"), namespace)
    except SystemExit as exc:
        if _exit_code(exc) != 0:
            verdict(False, "test exited", link.calls)
            return
    except BaseException as exc:
        verdict(False, f"{type(exc).__name__}: {str(exc)[:200]}", link.calls)
        return
    verdict(link.calls > 0, None if link.calls else "the test never called the program", link.calls)


# ---------------------------------------------------------------------------------------------------------- probe
def _probe(settings: dict) -> None:
    _, proto_out = _isolate_fds()
    _apply_limits(settings)
    import socket

    report: dict = {"uid": os.getuid(), "pid": os.getpid(), "environ": sorted(os.environ)}
    report["namespaces"] = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in ("net", "pid", "mnt", "ipc", "uts")}
    try:
        socket.create_connection(("192.0.2.1", 9), timeout=1).close()  # TEST-NET-1: routable only with a network
        report["network"] = "open"
    except OSError as exc:
        report["network"] = type(exc).__name__
    writable = []
    for path in ("/", "/usr", "/tmp", os.path.dirname(sys.executable)):
        try:
            with open(os.path.join(path, ".bots_probe"), "w") as handle:
                handle.write("x")
            writable.append(path)
        except OSError:
            pass
    report["writable"] = writable
    report["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    try:
        os.close(os.memfd_create("probe"))
        report["memfd"] = "allowed"
    except OSError:
        report["memfd"] = "denied"
    write_frame(proto_out, report)


def main(argv: list[str]) -> None:
    """Entry point inside the sandbox: ``<role> <settings JSON>``."""
    role, settings = argv[0], json.loads(argv[1])
    {"worker": _worker, "judge": _judge, "probe": _probe}[role](settings)
    # Exit at once: no waiting for threads or atexit hooks the program may have left in this process.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
