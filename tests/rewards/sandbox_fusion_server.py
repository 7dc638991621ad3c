"""A stand-in SandboxFusion server on 127.0.0.1 for tests: the part of the ``/run_code`` API our client uses.

verl's ``call_sandbox_api`` (which ``bots_verl.rewards.code_reward`` calls) posts JSON with ``code``, ``stdin``,
``language``, ``run_timeout``, ``compile_timeout`` and ``memory_limit_MB``, and reads ``status`` and
``run_result.{status, return_code, stdout}`` from the reply. This server runs the posted Python program in a plain
subprocess (trusted test programs only: there is no isolation) under ``run_timeout`` and answers the way
SandboxFusion does: ``status`` is ``Success`` only for a program that finished with exit status 0, and
``run_result.status`` is ``Finished`` or ``TimeLimitExceeded``. The memory limit is accepted and not enforced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

logger = logging.getLogger(__name__)

# Our tests post programs of a few KiB; anything far larger is a bug in the test.
_MAX_BODY_BYTES = 16 << 20
# A program never runs longer than this, whatever the request asks, so a test cannot hang on the server.
_MAX_RUN_S = 60.0


@dataclass
class FakeSandboxFusion:
    """A running server: its ``url`` (the ``/run_code`` endpoint) and the requests it answered."""

    url: str
    requests: list[dict] = field(default_factory=list)


def _run(request: dict) -> dict:
    """Run one posted program and build SandboxFusion's reply."""
    timeout = min(float(request.get("run_timeout") or _MAX_RUN_S), _MAX_RUN_S)
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", request["code"]],
            input=request.get("stdin") or "",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        stdout = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        run = {"status": "TimeLimitExceeded", "execution_time": timeout, "return_code": None, "stdout": stdout}
        return {"status": "Failed", "message": "", "compile_result": None, "run_result": run}
    run = {"status": "Finished", "return_code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    status = "Success" if done.returncode == 0 else "Failed"
    return {"status": status, "message": "", "compile_result": None, "run_result": run}


def _handler(server_state: FakeSandboxFusion) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/run_code" or not 0 < length <= _MAX_BODY_BYTES:
                self.send_error(404 if self.path != "/run_code" else 413)
                return
            request = json.loads(self.rfile.read(length))
            server_state.requests.append(request)
            if request.get("language") != "python":
                reply = {"status": "SandboxError", "message": f"unsupported language {request.get('language')!r}"}
            else:
                reply = _run(request)
            body = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
            logger.debug("fake SandboxFusion: %s", format % args)

    return Handler


@contextlib.contextmanager
def fake_sandbox_fusion() -> Iterator[FakeSandboxFusion]:
    """Serve on a free port of 127.0.0.1 for the duration of the ``with`` block, then shut down.

    Yields:
        The server's URL and the list of requests it answered.
    """
    state = FakeSandboxFusion(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/run_code"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
