"""BOTS on a Ray cluster of two nodes, started as users start one: ``ray start --head`` and a second raylet that
joins it (``tests/integration/ray_nodes.py``, both on 127.0.0.1), the run attached through ``RAY_ADDRESS``.

The head holds the driver, all the CPUs and the one logical GPU, so verl's task runner, reward workers, FSDP worker
and ``hf`` rollout run there; the second node declares no CPU and ``bots_posterior``, and the runs set
``bots.actor.node_resource=bots_posterior``, so the posterior actor (our package's ``SelectorService``, which asks for
no CPU) runs in a worker process of the second node. (A second node with CPUs gets verl's task runner as well, by
Ray's default scheduling; losing it then stops the run with Ray's ``ActorUnavailableError`` from verl's ``run_ppo``.
TransferQueue's storage units are kept on the head with its ``required_node_resource``.)
Real training (verl's trainer on CPU, the toy task, nothing faked), so these tests are marked ``cluster`` and run by
``make test-cluster``:

- **A**: 4 steps, checkpoints at 2 and 4; the posterior's node is recorded.
- **K**: A's configuration; the second node is SIGKILLed (raylet, workers) once the step-2 checkpoint is written.
- **R**: a new second node joins; K resumes from its step-2 checkpoint to step 4 and is compared with A.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from integration_helpers import ROOT, read_metrics, tail, train_env
from ray_nodes import LocalRayNodes, running_cluster

from bots_verl.verl_cpu.addition_task import build_toy, toy_overrides
from bots_verl.verl_cpu.smoke import compare_checkpoints

pytestmark = pytest.mark.cluster

PROMPTS, N, STEPS = 6, 4, 4
RESOURCE = "bots_posterior"
RUN = str(ROOT / "tests" / "integration" / "cluster_run.py")


@pytest.fixture(scope="module")
def nodes():
    with running_cluster(workers={"worker": {"num_cpus": 0, "resources": {RESOURCE: 1.0}}}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, str]:
    return build_toy(tmp_path_factory.mktemp("toy"))


def _overrides(toy: dict[str, str], work: Path, *extra: str) -> list[str]:
    return [
        *toy_overrides(toy, prompts=PROMPTS, n=N),
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        f"trainer.total_training_steps={STEPS}",
        "trainer.save_freq=2",
        "trainer.experiment_name=two_nodes",
        f"bots.actor.node_resource={RESOURCE}",
        # TransferQueue places its storage units round-robin over all nodes (with a hard node affinity): keep them on
        # the head, as the second node has no CPU for them
        "+transfer_queue.backend.SimpleStorage.required_node_resource=bots_test_head",
        f"trainer.default_local_dir={work / 'ckpt'}",
        *extra,
    ]


def _start(nodes: LocalRayNodes, work: Path, overrides: list[str]) -> subprocess.Popen:
    env = {**train_env(), **nodes.env}  # attach through RAY_ADDRESS, as on a real cluster
    log = open(work / "driver.log", "w")  # noqa: SIM115  (closed by the caller's wait)
    return subprocess.Popen(
        [sys.executable, RUN, str(work / "record.json"), *overrides],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen, work: Path, timeout: float = 1200) -> subprocess.CompletedProcess:
    proc.wait(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, (work / "driver.log").read_text(), "")


def test_our_package_reaches_a_worker_process_on_the_second_node(nodes) -> None:
    probe = (
        "from bots_verl.verl_cpu.cluster import use_loopback; use_loopback()\n"
        "import json, ray\n"
        "ray.init(log_to_driver=False)\n"
        f"@ray.remote(num_cpus=0, resources={{'{RESOURCE}': 0.001}})\n"
        "def where():\n"
        "    import bots_verl, bots_verl.integration.transport.selector_service\n"
        "    return ray.get_runtime_context().get_node_id(), bots_verl.__file__\n"
        "print('WHERE=' + json.dumps(ray.get(where.remote(), timeout=120)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env={**train_env(), **nodes.env}, capture_output=True, text=True, timeout=300
    )
    found = [line for line in proc.stdout.splitlines() if line.startswith("WHERE=")]
    assert found, proc.stderr[-3000:]
    node, package = json.loads(found[0][len("WHERE=") :])
    # installed on every node (here: the same environment), not shipped with runtime_env: see the README
    assert node == nodes.nodes["worker"].node_id and node != nodes.nodes["head"].node_id
    assert Path(package).resolve() == (ROOT / "bots_verl" / "__init__.py").resolve()


@pytest.fixture(scope="module")
def run_a(nodes, toy, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("two_nodes_a")
    done = _finish(_start(nodes, work, _overrides(toy, work, f"bots.run_log.dir={work / 'run'}")), work)
    assert done.returncode == 0, tail(done)
    return work


def test_the_posterior_lives_on_the_node_that_declares_bots_actor_node_resource(run_a, nodes) -> None:
    record = json.loads((run_a / "record.json").read_text())
    assert record["posterior_node"] == nodes.nodes["worker"].node_id
    assert record["driver_node"] == nodes.nodes["head"].node_id
    metrics = read_metrics(run_a / "run")
    assert sorted(metrics) == list(range(1, STEPS + 1))
    assert metrics[STEPS]["bots/posterior_rollouts_total"] == PROMPTS * N * STEPS


@pytest.fixture(scope="module")
def killed_and_resumed(run_a, nodes, toy, tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("two_nodes_k")
    proc = _start(nodes, work, _overrides(toy, work, f"bots.run_log.dir={work / 'run_k'}"))
    tracker = work / "ckpt" / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + 1200
    while not (tracker.is_file() and tracker.read_text().strip() == "2"):
        assert proc.poll() is None and time.monotonic() < deadline, (work / "driver.log").read_text()[-4000:]
        time.sleep(0.05)
    nodes.kill_node("worker")  # the machine holding the posterior is lost
    killed = _finish(proc, work, timeout=900)
    latest = tracker.read_text().strip()
    nodes.add_node("worker2", num_cpus=0, resources={RESOURCE: 1.0})  # a replacement machine joins
    resumed = _finish(_start(nodes, work, _overrides(toy, work, f"bots.run_log.dir={work / 'run_r'}")), work)
    return {"work": work, "killed": killed, "latest": latest, "resumed": resumed}


def test_a_lost_node_stops_the_run_with_a_clear_error_and_nothing_after_the_checkpoint(killed_and_resumed) -> None:
    killed = killed_and_resumed["killed"]
    assert killed.returncode != 0
    lost = "PosteriorLostError: the BOTS posterior actor died or became unreachable (its process or its node is gone"
    assert lost in killed.stdout, tail(killed)
    # Ray's own words follow: the connection to the lost node closed, or the node died
    reason = killed.stdout.split(lost, 1)[1].split("\n", 1)[0]
    assert "ActorUnavailableError" in reason or "node has died" in reason, reason
    assert killed_and_resumed["latest"] == "2"


def test_the_run_resumes_exactly_from_its_last_checkpoint_on_a_new_node(killed_and_resumed, run_a, nodes) -> None:
    resumed = killed_and_resumed["resumed"]
    assert resumed.returncode == 0, tail(resumed)
    work = killed_and_resumed["work"]
    assert json.loads((work / "record.json").read_text())["posterior_node"] == nodes.nodes["worker2"].node_id
    assert sorted(read_metrics(work / "run_r")) == [3, 4]
    result = compare_checkpoints(run_a / "ckpt", work / "ckpt", STEPS)
    assert result["selections"] == [] and result["posterior"] == [] and result["weights"] == [], result
