"""A shared local Ray cluster (``bots_verl.verl_cpu.cluster``): real Ray, runs attached from other processes.

The real training runs that attach to it are in ``tests/toy/test_benchmark.py`` (the toy benchmark shares one
cluster per concurrent run); here the cluster's own contract: attach, one run at a time, stop only itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import psutil
import pytest

from bots_verl.verl_cpu.cluster import SharedRayCluster, attach_env, attached_address

pytestmark = pytest.mark.slow

_ATTACHED_JOB = textwrap.dedent(
    """
    import os, sys, ray
    ray.init(runtime_env={"env_vars": {"JOB_VAR": "job"}})  # RAY_ADDRESS: attach, start nothing
    @ray.remote(num_gpus=1)
    def probe():
        return os.environ.get("JOB_VAR")
    print("RESULT", ray.get(probe.remote()), ray.cluster_resources().get("GPU"))
    if sys.argv[1] == "leak":  # an actor that outlives its job holds the cluster's only GPU
        Holder = ray.remote(num_gpus=1)(type("Holder", (), {"ping": lambda self: 1}))
        holder = Holder.options(name="holder", lifetime="detached").remote()
        ray.get(holder.ping.remote())
    """
)


def _attached(cluster: SharedRayCluster, mode: str) -> str:
    env = {**os.environ, **cluster.env}
    proc = subprocess.run(
        [sys.executable, "-c", _ATTACHED_JOB, mode], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return next(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))


def test_runs_attach_one_after_another_and_stop_stops_only_the_cluster() -> None:
    with SharedRayCluster(num_cpus=4, num_gpus=1) as cluster:
        head = psutil.Process(cluster.pid)
        daemons = head.children(recursive=True)
        assert daemons, "the head process owns the cluster's processes"
        assert cluster.address.startswith("127.0.0.1:"), cluster.address  # loopback only, never eth0
        listening = {c.laddr.ip for p in daemons for c in p.net_connections(kind="tcp") if c.status == "LISTEN"}
        assert listening and listening <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
        for _ in range(2):  # a second job gets the GPU back: the first one's resources were freed
            cluster.wait_idle(timeout=60)
            assert _attached(cluster, "clean") == "RESULT job 1.0"
        cluster.wait_idle(timeout=60)
    assert cluster.address is None
    gone, alive = psutil.wait_procs([head, *daemons], timeout=30)
    assert not alive, f"left running: {[p.pid for p in alive]}"


def test_a_run_that_leaves_resources_held_makes_wait_idle_fail() -> None:
    with SharedRayCluster(num_cpus=4, num_gpus=1) as cluster:
        assert _attached(cluster, "leak") == "RESULT job 1.0"
        with pytest.raises(RuntimeError, match="busy after 2 s: BUSY held=.*GPU"):
            cluster.wait_idle(timeout=2)
        with pytest.raises(RuntimeError, match="not running"):
            SharedRayCluster(num_cpus=1, num_gpus=0).wait_idle()


def test_attach_environment() -> None:
    env = attach_env("10.0.0.1:6379", "secret")
    assert attached_address(env) == "10.0.0.1:6379"
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"] == "secret"
    assert attached_address({"RAY_ADDRESS": "  "}) is None and attached_address({}) is None
