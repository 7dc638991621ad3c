"""Runs that share one Ray cluster started with ``ray start --head`` (``tests/integration/ray_nodes.py``), attached
through ``RAY_ADDRESS``, with the same ``trainer.project_name`` and ``trainer.experiment_name`` (so the same posterior
actor name, ``bots_posterior_<project>_<experiment>``).

verl 0.9.1's TransferQueue (0.1) names its controller and storage actors with fixed names in the fixed namespace
``transfer_queue``: neither verl's config nor ``tq.init`` lets a run choose them (``transfer_queue/interface.py``,
``ray_storage_client.py``). So two runs cannot each have their own queue on one cluster, and the second run is refused
before it touches anything (``bots_verl/integration/hooks/task_runner.py``). Real training (verl's trainer on CPU,
the toy task), so these tests are marked ``cluster`` and run by ``make test-cluster``:

- **1** trains 40 steps; **2**, with the same names, starts while 1 trains and must be refused, 1 untouched.
- **S** is SIGKILLed (the driver) mid-run; **T**, with the same names, must then train on the same cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from integration_helpers import read_metrics, tail, train_env
from ray_nodes import LocalRayNodes, running_cluster

from bots_verl.verl_cpu.addition_task import build_toy, toy_overrides

pytestmark = pytest.mark.cluster

PROMPTS, N = 6, 4
#: long enough that the first run still trains when the second reaches the cluster (its start-up takes minutes here)
FIRST_STEPS = 40
NAMES = ["trainer.project_name=shared", "trainer.experiment_name=same"]


@pytest.fixture(scope="module")
def head():
    with running_cluster(multi_node=False) as cluster:  # one node: loopback only
        yield cluster


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, str]:
    return build_toy(tmp_path_factory.mktemp("toy"))


def _overrides(toy: dict[str, str], work: Path, name: str, steps: int) -> list[str]:
    return [
        *toy_overrides(toy, prompts=PROMPTS, n=N),
        *NAMES,
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=-1",
        f"trainer.default_local_dir={work / name / 'ckpt'}",
        f"bots.run_log.dir={work / name / 'run'}",
    ]


def _start(head: LocalRayNodes, toy: dict[str, str], work: Path, name: str, steps: int) -> subprocess.Popen:
    (work / name).mkdir(parents=True, exist_ok=True)
    log = open(work / name / "driver.log", "w")  # noqa: SIM115  (closed with the process)
    return subprocess.Popen(
        [sys.executable, "-m", "bots_verl.main", *_overrides(toy, work, name, steps)],
        cwd=work,
        env={**train_env(), **head.env},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen, work: Path, name: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    proc.wait(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, (work / name / "driver.log").read_text(), "")


def _wait_for_step(proc: subprocess.Popen, run_dir: Path, log: Path, timeout: float = 1200) -> None:
    """Until the run logged its first step (it holds the cluster and trains)."""
    deadline = time.monotonic() + timeout
    metrics = run_dir / "metrics.jsonl"
    while not (metrics.is_file() and metrics.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.1)


@pytest.fixture(scope="module")
def concurrent(head, toy, tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("shared")
    first = _start(head, toy, work, "first", steps=FIRST_STEPS)
    _wait_for_step(first, work / "first" / "run", work / "first" / "driver.log")
    second = _finish(_start(head, toy, work, "second", steps=3), work, "second", timeout=600)
    first_was_training = first.poll() is None
    first_done = _finish(first, work, "first")
    assert first_was_training, "the first run ended before the second reached the cluster: raise FIRST_STEPS"
    return {"work": work, "first": first_done, "second": second}


def test_a_second_run_with_the_same_names_is_refused_naming_the_actor_and_the_setting(concurrent) -> None:
    second = concurrent["second"]
    assert second.returncode != 0
    out = second.stdout
    assert "this Ray cluster is in use by another BOTS training run: run shared/same" in out, tail(second)
    assert "holds the actor transfer_queue/bots_verl_run" in out
    assert "the setting that separates runs is RAY_ADDRESS" in out
    # refused before the run log or the posterior: nothing of the second run trained
    assert not (concurrent["work"] / "second" / "run" / "metrics.jsonl").is_file() or not read_metrics(
        concurrent["work"] / "second" / "run"
    )


def test_the_first_run_trains_on_untouched(concurrent) -> None:
    first = concurrent["first"]
    assert first.returncode == 0, tail(first)
    metrics = read_metrics(concurrent["work"] / "first" / "run")
    steps = list(range(1, FIRST_STEPS + 1))
    assert sorted(metrics) == steps
    # its posterior received exactly its own rollouts: nothing of the refused run was mixed in
    assert [metrics[s]["bots/posterior_rollouts_total"] for s in steps] == [PROMPTS * N * s for s in steps]


def test_a_driver_killed_with_sigkill_leaves_nothing_that_blocks_the_next_run_with_its_names(
    concurrent, head, toy, tmp_path_factory
) -> None:
    work = tmp_path_factory.mktemp("killed")
    crashed = _start(head, toy, work, "crashed", steps=3)
    _wait_for_step(crashed, work / "crashed" / "run", work / "crashed" / "driver.log")
    os.kill(crashed.pid, signal.SIGKILL)  # the driver only: its task runner, claim and posterior are Ray's to clean
    crashed.wait(timeout=60)
    nxt = _finish(_start(head, toy, work, "next", steps=1), work, "next")
    assert nxt.returncode == 0, tail(nxt)
    assert sorted(read_metrics(work / "next" / "run")) == [1]
    assert json.loads((work / "next" / "run" / "meta.json").read_text())  # a fresh run log of its own
