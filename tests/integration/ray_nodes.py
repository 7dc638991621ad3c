"""A Ray cluster of several nodes on this machine, started as users start one (``ray start``), for the cluster tests.

:class:`LocalRayNodes` starts a head (``ray start --head --block``) and raylets that join it (``ray start --block
--address=...``), each with a loopback address of its own (127.0.0.2 for the head, 127.0.0.3, ... for the others, so
the nodes differ by address as machines do), token authentication, and a temporary directory of its own.

Ray refuses a second node on a loopback-only cluster (the environment of :func:`bots_verl.verl_cpu.cluster.
use_loopback` makes ``ray start --address=...`` abort: "Multi-node Ray clusters are not supported"), so these nodes run
in Ray's ordinary multi-node mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1``, which ``use_loopback`` then leaves alone
in the runs that attach). Then Ray's GCS and raylets listen on every interface, not 127.0.0.1 only; the token keeps
other clients out, and only ``make test-cluster`` starts such a cluster (never ``make test`` or CI). A cluster of one
node (``multi_node=False``) stays on 127.0.0.1 in the loopback mode. Every ``ray start`` runs in a session of its own,
so
:meth:`LocalRayNodes.kill_node` and :meth:`LocalRayNodes.stop` signal only that session's process group (the raylet,
GCS, and the workers they started), then any process still naming the cluster's temporary directory, by pid. Never
``ray stop``: it stops every Ray process of the user on the machine (other clusters included).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bots_verl.verl_cpu.cluster import LOOPBACK_ENV, attach_env

RAY = str(Path(sys.executable).with_name("ray"))
HEAD_IP = "127.0.0.2"
#: Ray's multi-node mode (see the module docstring)
MULTI_NODE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}

_PROBE = """
import json, sys
from bots_verl.verl_cpu.cluster import use_loopback
use_loopback()
import ray
ray.init(log_to_driver=False)
nodes = [{"id": n["NodeID"], "alive": n["Alive"], "resources": n["Resources"]} for n in ray.nodes()]
print("NODES=" + json.dumps(nodes))
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Node:
    """One ``ray start --block`` process (its own session and process group) and the resources it declared."""

    name: str
    proc: subprocess.Popen
    resources: dict[str, float]
    node_id: str | None = None


class LocalRayNodes:
    """A head and joining raylets on 127.0.0.1 (a context manager; see the module docstring).

    Args:
        multi_node: Ray's multi-node mode on 127.0.0.2, 127.0.0.3, ...; False: one node on 127.0.0.1, loopback only.
        start_timeout: seconds to wait for a node to register with the head.
    """

    def __init__(self, multi_node: bool = True, start_timeout: float = 240.0) -> None:
        # short: Ray's unix sockets live under it (a socket path is limited to 107 bytes)
        self.root = Path(tempfile.mkdtemp(prefix="b2n", dir="/tmp"))
        self.port = free_port()
        self.multi_node = multi_node
        self._mode_env = MULTI_NODE_ENV if multi_node else LOOPBACK_ENV
        self.address = f"{HEAD_IP if multi_node else '127.0.0.1'}:{self.port}"
        self.start_timeout = start_timeout
        self._token = secrets.token_hex(32)
        self.nodes: dict[str, Node] = {}
        self._started = 0

    @property
    def env(self) -> dict[str, str]:
        """The environment that attaches a process to this cluster (``RAY_ADDRESS`` and the token)."""
        return {**self._mode_env, **attach_env(self.address, self._token)}

    def _base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update({**self._mode_env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self._token})
        return env

    def _start(self, name: str, args: list[str], resources: dict[str, float]) -> Node:
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115  (closed when the test session ends)
        ip = self.address.split(":")[0] if name == "head" else f"127.0.0.{3 + self._started}"
        self._started += 1
        proc = subprocess.Popen(
            [RAY, "start", "--block", "--node-ip-address", ip, "--temp-dir", str(self.root / name)]
            + ["--disable-usage-stats", "--resources", json.dumps(resources), *args],
            env=self._base_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        node = Node(name, proc, resources)
        self.nodes[name] = node
        return node

    def start_head(self, num_cpus: int, num_gpus: int = 0, resources: dict[str, float] | None = None) -> Node:
        """``ray start --head`` with ``num_cpus``/``num_gpus`` logical CPUs/GPUs and custom ``resources``."""
        resources = {"bots_test_head": 1.0, **(resources or {})}
        args = ["--head", "--port", str(self.port), "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus)]
        node = self._start("head", [*args, "--include-dashboard=false"], resources)
        self._wait_for(node)
        return node

    def add_node(self, name: str, num_cpus: int, num_gpus: int = 0, resources: dict[str, float] | None = None) -> Node:
        """A raylet that joins the head (``ray start --address=...``), declaring ``resources`` (plus a marker)."""
        if not self.multi_node:
            raise RuntimeError("a loopback-only cluster (multi_node=False) has one node: Ray refuses a second")
        resources = {f"bots_test_{name}": 1.0, **(resources or {})}
        args = ["--address", self.address, "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus)]
        node = self._start(name, args, resources)
        self._wait_for(node)
        return node

    def alive_nodes(self) -> list[dict]:
        """``ray.nodes()`` of the cluster, asked by a fresh driver process: ``[{"id", "alive", "resources"}]``."""
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        for line in proc.stdout.splitlines():
            if line.startswith("NODES="):
                return [n for n in json.loads(line[len("NODES=") :]) if n["alive"]]
        raise RuntimeError(f"could not list the nodes of {self.address}: {proc.stderr[-3000:]}")

    def _wait_for(self, node: Node) -> None:
        marker = next(iter(node.resources))
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RuntimeError(f"ray start of {node.name} exited: {self.log(node.name)[-3000:]}")
            try:
                found = [n for n in self.alive_nodes() if n["resources"].get(marker)]
            except (RuntimeError, subprocess.TimeoutExpired):
                found = []
            if found:
                node.node_id = found[0]["id"]
                return
            time.sleep(1.0)
        raise RuntimeError(f"node {node.name} did not join {self.address} in {self.start_timeout:.0f} s")

    def log(self, name: str) -> str:
        """What ``ray start`` of node ``name`` printed."""
        return (self.root / f"{name}.log").read_text(errors="replace")

    def kill_node(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill node ``name`` at once (its ``ray start`` session: raylet, workers), as a lost machine would be."""
        node = self.nodes.pop(name)
        _signal_group(node.proc, sig)
        node.proc.wait(timeout=60)
        self._kill_leftovers(self.root / name)

    def stop(self) -> None:
        """Stop every node of this cluster, then remove its temporary directory; nothing else is touched."""
        for name in [n for n in self.nodes if n != "head"] + [n for n in self.nodes if n == "head"]:
            node = self.nodes.pop(name)
            _signal_group(node.proc, signal.SIGTERM)
            try:
                node.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(node.proc, signal.SIGKILL)
            node.proc.wait(timeout=60)
        self._kill_leftovers(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    def own_processes(self, under: Path | None = None) -> list[int]:
        """Pids of live processes whose command line names this cluster's temporary directory (or ``under``)."""
        needle = str(under or self.root)
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().split(") ", 1)[1][:1]
            except OSError:
                continue
            if needle in cmdline and state != "Z":
                pids.append(int(entry.name))
        return pids

    def _kill_leftovers(self, under: Path) -> None:
        for pid in self.own_processes(under):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> LocalRayNodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_cluster(
    multi_node: bool = True, num_cpus: int = 8, num_gpus: int = 1, workers: dict[str, dict[str, Any]] | None = None
) -> Iterator[LocalRayNodes]:
    """A test module's cluster: a head (and the ``workers``, name -> :meth:`LocalRayNodes.add_node` arguments), stopped
    afterwards and checked to leave none of its processes behind."""
    cluster = LocalRayNodes(multi_node=multi_node)
    try:
        cluster.start_head(num_cpus=num_cpus, num_gpus=num_gpus)
        for name, kwargs in (workers or {}).items():
            cluster.add_node(name, **kwargs)
        yield cluster
    finally:
        cluster.stop()
    assert cluster.own_processes() == [], "a process of the test cluster outlived its teardown"


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal the process group that ``ray start`` leads (it was started in a session of its own)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
