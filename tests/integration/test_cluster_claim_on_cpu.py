"""One training run per Ray cluster (issue 34): a second run is refused before verl's ``tq.init`` attaches it to the
first run's TransferQueue, and touches nothing of the first run. The session's ``ray_tq`` fixture is the first run:
a real TransferQueue controller on a real local Ray cluster."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from bots_verl.integration.hooks import task_runner
from bots_verl.integration.hooks.task_runner import CLAIM_ACTOR, TQ_CONTROLLER, BOTSTaskRunner, take_claim


def _config(experiment: str) -> OmegaConf:
    return OmegaConf.create(
        {
            "trainer": {"project_name": "p", "experiment_name": experiment, "v1": {"trainer_mode": "sync"}},
            "bots": {"run_log": {"dir": None}},
        }
    )


def test_a_run_on_a_cluster_with_a_transfer_queue_is_refused_before_tq_init(ray_tq, monkeypatch) -> None:
    import ray

    controller = ray.get_actor(*TQ_CONTROLLER)  # the first run's
    started = []
    monkeypatch.setattr(
        task_runner.TaskRunnerV1.__ray_actor_class__, "run", lambda self, config: started.append(config)
    )
    runner = object.__new__(BOTSTaskRunner)  # verl's run (tq.init, ..., tq.close) is never reached
    with pytest.raises(RuntimeError) as refused:
        runner.run(_config("second"))
    message = str(refused.value)
    assert "a TransferQueue controller is already running on this Ray cluster: the actor " in message
    assert "transfer_queue/TransferQueueController" in message and "Nothing of the other run was touched" in message
    assert started == []
    # the first run's controller is alive and answers; the refused run gave its claim back
    assert ray.get(controller.get_config.remote(), timeout=60) is not None
    with pytest.raises(ValueError):
        ray.get_actor(*CLAIM_ACTOR)


def test_two_bots_runs_cannot_claim_one_cluster(ray_tq) -> None:
    import ray

    first = take_claim({"experiment": "p/first", "job": "01000000", "pid": 123, "host": "h", "started": "now"})
    with pytest.raises(RuntimeError) as refused:
        take_claim({"experiment": "p/second"}, patience=1)
    message = str(refused.value)
    assert message.startswith("this Ray cluster is in use by another BOTS training run: run p/first (Ray job 01000000")
    assert "holds the actor transfer_queue/bots_verl_run" in message
    ray.kill(first)
    ray.kill(take_claim({"experiment": "p/third"}))  # free again once the first run is gone
