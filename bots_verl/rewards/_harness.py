"""The program that runs inside every code sandbox: its worker, judge and probe roles.

This code runs inside every sandbox as ``python -I -S -c <bootstrap> <fd> <role> <settings JSON>``, executed after
:mod:`bots_verl.rewards._wire` (the frames and the value codec) and :mod:`bots_verl.rewards._harness_setup` in one
namespace, so it imports only the standard library and nothing from ``bots_verl``; imported as a module, it takes
their names from them.

Roles:

- ``worker`` runs the model's program. It never sees an expected output: the scorer (or, for functional tests, the
  judge) sends it inputs and compares what comes back. Everything a worker sends is therefore only a *claim* by the
  program, and the worker's integrity does not matter: the program may patch builtins, exit early, write to the
  protocol pipe, or replace this harness; it still has to produce the right outputs.
- ``judge`` runs the dataset's functional test code (``assert candidate(...) == ...``) in its own sandbox, with every
  name the program defines replaced by a proxy that calls into the worker over a pipe. Values cross as plain data
  (the codec of ``_wire``), so an object whose ``__eq__`` always returns ``True`` cannot cross, and ``sys.exit(0)``
  in the program ends only the worker, which fails the test.
- ``probe`` reports what the sandbox looks like (used once per process to check that isolation works).
"""

from __future__ import annotations

import builtins
import json
import os
import sys

if __name__ != "__main__":  # imported as a module; in a sandbox (run as __main__) these modules' code ran first, here
    from bots_verl.rewards._harness_setup import _apply_limits, _isolate_fds, _warm_imports
    from bots_verl.rewards._wire import CodecError, decode_value, encode_value, read_frame, write_frame, write_run


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
