"""One local Ray cluster shared by several CPU training runs, so that each run attaches instead of starting its own.

Starting a local cluster (GCS, raylet, object store) and shutting it down costs every ``python -m bots_verl.main``
run of a benchmark 5-17 s on 2 cores. :class:`SharedRayCluster` starts one cluster in a small head process (this
module's ``main``) and hands out the environment that makes a run attach to it: ``RAY_ADDRESS`` (read by
``ray.init`` inside verl's ``run_ppo``) and the cluster's authentication token. :func:`bots_verl.verl_cpu.launch.
set_ray_init` sees ``RAY_ADDRESS`` and leaves out the resource arguments that ``ray.init`` refuses when it attaches.

A cluster serves **one run at a time**: TransferQueue names its controller and storage actors in a fixed namespace
(``transfer_queue``), so a second run in flight would join the first run's queue. Every run is its own Ray job, so its
actors die with it; :meth:`SharedRayCluster.wait_idle` waits until they are gone and the resources are free before
the next run attaches (a benchmark that trains two runs at a time starts two clusters). Size the cluster as one run
would size its own: one logical GPU per training rank, :data:`~bots_verl.verl_cpu.launch.MIN_RAY_CPUS` CPUs.

Ray processes that the head starts are its children, so stopping the head (closing its stdin) stops the cluster and
nothing else on the machine; ``ray stop`` would stop every cluster of the user.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from types import ModuleType, TracebackType
from typing import IO

logger = logging.getLogger(__name__)

__all__ = ["LOOPBACK_ENV", "SharedRayCluster", "attach_env", "attached_address", "use_loopback"]

#: the variables a process needs to attach to a shared cluster
_ADDRESS_ENV = "RAY_ADDRESS"
_AUTH_MODE_ENV = "RAY_AUTH_MODE"
_AUTH_TOKEN_ENV = "RAY_AUTH_TOKEN"
_READY_PREFIX = "BOTS_RAY_ADDRESS="
_IDLE = "IDLE"
#: Ray's switch for a one-machine cluster: its node address is then 127.0.0.1 and the GCS and raylets listen on the
#: loopback interface only (``ray.init(_node_ip_address="127.0.0.1")`` is turned into the eth0 address by Ray's
#: ``resolve_ip_for_localhost``). Every cluster the CPU backend starts sets it; a run that attaches inherits it.
_MULTI_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_ENV = {_MULTI_NODE_ENV: "0"}


def use_loopback() -> None:
    """Make every Ray cluster this process starts or attaches to use 127.0.0.1 (:data:`LOOPBACK_ENV`).

    Ray reads the switch once, when ``ray._private.ray_constants`` is imported; hydra's composition of verl's config
    may import ray before the entry point runs, so the already-read value is updated as well. Processes started
    from here (the raylet, Ray's workers) inherit the environment.

    A process told ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1`` is left as it is: Ray refuses a second node (``ray start
    --address=...``) on a loopback-only cluster, so a cluster of several nodes, even on one machine
    (``tests/integration/ray_nodes.py``), runs in Ray's ordinary multi-node mode, and its runs must attach the same way.
    """
    if os.environ.get(_MULTI_NODE_ENV) == "1":
        return
    os.environ.update(LOOPBACK_ENV)
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


#: TransferQueue's controller: its fixed name and namespace are why a cluster serves one run at a time
_TQ_CONTROLLER = ("TransferQueueController", "transfer_queue")


def attached_address(env: dict[str, str] | None = None) -> str | None:
    """The address of the cluster this process is told to attach to (``RAY_ADDRESS``), or None to start its own."""
    value = (os.environ if env is None else env).get(_ADDRESS_ENV, "").strip()
    return value or None


def attach_env(address: str, token: str) -> dict[str, str]:
    """The environment that makes a ``bots_verl.main`` process attach to the cluster at ``address``."""
    return {_ADDRESS_ENV: address, _AUTH_MODE_ENV: "token", _AUTH_TOKEN_ENV: token}


class SharedRayCluster:
    """A local Ray cluster in a head process of its own, for the runs of one benchmark (a context manager).

    Args:
        num_cpus: logical CPUs of the cluster (the sum over the runs it serves at a time).
        num_gpus: logical GPUs of the cluster (the CPU backend's training ranks, summed the same way).
        start_timeout: seconds to wait for the cluster to come up.

    Example:
        >>> with SharedRayCluster(num_cpus=16, num_gpus=2) as cluster:  # doctest: +SKIP
        ...     subprocess.run([sys.executable, "-m", "bots_verl.main", ...], env={**os.environ, **cluster.env})
    """

    def __init__(self, num_cpus: int, num_gpus: int, start_timeout: float = 300.0) -> None:
        if num_cpus < 1 or num_gpus < 0:
            raise ValueError(f"a shared cluster needs num_cpus >= 1 and num_gpus >= 0, got {num_cpus}, {num_gpus}")
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.start_timeout = start_timeout
        self.address: str | None = None
        self.startup_s: float | None = None
        self._token = secrets.token_hex(32)
        self._proc: subprocess.Popen[str] | None = None
        # the head's stderr: read back when it fails (Ray's own reason), dropped with the file when it stops
        self._stderr: IO[str] | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment that makes a run attach to this cluster (only while it runs)."""
        if self.address is None:
            raise RuntimeError("the shared Ray cluster is not running")
        return attach_env(self.address, self._token)

    @property
    def pid(self) -> int | None:
        """The head process's pid (its descendants are the cluster's processes), or None when stopped."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> SharedRayCluster:
        """Start the head process and wait until it reports the cluster's address.

        Raises:
            RuntimeError: if the head exits or does not report within ``start_timeout``; the message ends with the
                end of the head's stderr (Ray's own reason).
        """
        env = {k: v for k, v in os.environ.items() if k != _ADDRESS_ENV}
        env.update({_AUTH_MODE_ENV: "token", _AUTH_TOKEN_ENV: self._token, **LOOPBACK_ENV})
        begin = time.monotonic()
        self._stderr = tempfile.TemporaryFile("w+", prefix="bots-ray-head-", suffix=".stderr")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, "--num-cpus", str(self.num_cpus), "--num-gpus", str(self.num_gpus)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            text=True,
        )
        assert self._proc.stdout is not None
        # the head prints one line once ray.init returned; readline blocks, so a timer kills a head that hangs
        watchdog = threading.Timer(self.start_timeout, self._proc.kill)
        watchdog.start()
        try:
            while self.address is None:
                line = self._proc.stdout.readline()
                if not line:
                    code = self._proc.wait()
                    self._proc = None
                    raise RuntimeError(
                        f"the shared Ray cluster's head exited with {code} before it was ready "
                        f"(killed after {self.start_timeout:.0f} s if negative); its stderr ends with:\n"
                        f"{self._stderr_tail()}"
                    )
                if line.startswith(_READY_PREFIX):
                    self.address = line[len(_READY_PREFIX) :].strip()
        finally:
            watchdog.cancel()
        self.startup_s = time.monotonic() - begin
        logger.info(
            "shared Ray cluster at %s (%d CPUs, %d GPUs, logical) up in %.1f s",
            self.address,
            self.num_cpus,
            self.num_gpus,
            self.startup_s,
        )
        return self

    def _stderr_tail(self, chars: int = 4000) -> str:
        """The end of the head's stderr, then the file is closed (only called once the head is gone)."""
        if self._stderr is None:
            return "(not captured)"
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()
        finally:
            self._stderr.close()
            self._stderr = None
        return text[-chars:].strip() or "(nothing)"

    def wait_idle(self, timeout: float = 180.0) -> None:
        """Block until the previous run's actors are gone and every logical resource is free again.

        Raises:
            RuntimeError: if the cluster is not running, or is still busy after ``timeout`` seconds.
        """
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("the shared Ray cluster is not running")
        proc.stdin.write(f"wait {timeout}\n")
        proc.stdin.flush()
        answer = proc.stdout.readline().strip()
        if answer != _IDLE:
            raise RuntimeError(f"the shared Ray cluster at {self.address} is busy after {timeout:.0f} s: {answer}")

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the cluster: close the head's stdin (it shuts Ray down), then terminate it if it lingers."""
        proc, self._proc, self.address = self._proc, None, None
        stderr, self._stderr = self._stderr, None
        if stderr is not None:
            stderr.close()
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> SharedRayCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """The head process: start a local cluster, print its address, hold it until stdin closes."""
    parser = argparse.ArgumentParser(description="the head of a shared local Ray cluster (see SharedRayCluster)")
    parser.add_argument("--num-cpus", type=int, required=True)
    parser.add_argument("--num-gpus", type=int, required=True)
    args = parser.parse_args(argv)
    use_loopback()
    import ray

    # address="local": always a new cluster. Without it ray.init attaches to the address in
    # /tmp/ray/ray_current_cluster, which a killed `ray start --block` leaves behind (then it fails, or joins a
    # cluster that is not ours).
    context = ray.init(
        address="local",
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
        include_dashboard=False,
        log_to_driver=False,
    )
    print(_READY_PREFIX + context.address_info["gcs_address"], flush=True)
    try:
        # one command per line from the owner; the loop ends when the owner closes the pipe or dies
        for line in sys.stdin:
            words = line.split()
            if words and words[0] == "wait":
                print(_idle_answer(ray, float(words[1]) if len(words) > 1 else 180.0), flush=True)
    finally:
        ray.shutdown()
    return 0


def _idle_answer(ray: ModuleType, timeout: float) -> str:
    """``IDLE`` once no TransferQueue controller is alive and every resource is free, else what is still held."""
    deadline = time.monotonic() + timeout
    while True:
        total, free = ray.cluster_resources(), ray.available_resources()
        held = {k: total[k] - free.get(k, 0.0) for k in ("CPU", "GPU") if total.get(k, 0.0) > free.get(k, 0.0)}
        try:
            ray.get_actor(_TQ_CONTROLLER[0], namespace=_TQ_CONTROLLER[1])
            controller = True
        except ValueError:
            controller = False
        if not held and not controller:
            return _IDLE
        if time.monotonic() > deadline:
            return f"BUSY held={held} transfer_queue_controller={controller}"
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
