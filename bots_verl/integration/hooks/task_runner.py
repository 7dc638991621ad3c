"""``BOTSTaskRunner``: verl's own V1 task runner, building :class:`~bots_verl.integration.hooks.trainer.BOTSTrainer`.

``trainer.v1.trainer_mode`` stays ``sync``: verl string-compares the mode in several places, so the runner runs verl's
``TaskRunnerV1.run`` with ``BOTSTrainer`` registered for that mode in its own process (:func:`trainer_registered`),
after pointing verl's file logger at the run log (:func:`use_run_log`).

**One run per Ray cluster** (:func:`claim_cluster`). TransferQueue 0.x names its controller
``TransferQueueController`` in the namespace ``transfer_queue``, both fixed (``transfer_queue.interface``: nothing in
its config chooses them). verl's ``TaskRunnerV1.run`` calls ``tq.init()``, which *attaches* to a controller that
already exists, and its ``finally`` calls ``tq.close()``, which *kills* it. A second run on a cluster where a run
trains would therefore train on the first run's queue, or, when anything fails, kill the first run's controller (the
first run then hangs without an error). So before anything else (the run log, verl's ``run``), the runner takes a named
claim actor (atomically: a second run's claim fails) and checks that no controller exists; either refusal names what
holds the cluster, and nothing of the other run is touched. The claim fate-shares with this runner and is released
when the run ends.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import ray
from omegaconf import DictConfig
from verl.trainer.main_ppo import TaskRunnerV1
from verl.trainer.ppo.v1 import trainer_base

from bots_verl.config.settings import BOTSSettings
from bots_verl.integration.hooks.async_trainer import bots_trainer_class
from bots_verl.integration.safety.resume import check_run_log_dir
from bots_verl.runlog import METRICS_FILE, rotate_metrics

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

__all__ = [
    "CLAIM_ACTOR",
    "TQ_CONTROLLER",
    "BOTSTaskRunner",
    "check_no_transfer_queue",
    "claim_cluster",
    "take_claim",
    "task_runner_with",
    "trainer_registered",
    "use_run_log",
]

#: TransferQueue's controller actor, ``(name, namespace)``: fixed by ``transfer_queue.interface.init``
TQ_CONTROLLER = ("TransferQueueController", "transfer_queue")
#: the claim a BOTS run holds on its Ray cluster while it trains, ``(name, namespace)``
CLAIM_ACTOR = ("bots_verl_run", "transfer_queue")


def use_run_log(config: DictConfig) -> None:
    """Point verl's file logger at ``<bots.run_log.dir>/metrics.jsonl`` in this process, keeping earlier steps.

    The driver made the directory absolute (``bots_verl.main``), so every process resolves it the same way.

    Raises:
        ValueError: for a fresh run in a directory holding an earlier run's metrics
            (:func:`~bots_verl.integration.safety.resume.check_run_log_dir`); nothing is moved then.
    """
    run_dir = config.bots.run_log.get("dir", None)
    if not run_dir:
        return
    if not os.path.isabs(run_dir):
        raise ValueError(f"bots.run_log.dir={run_dir!r} must be absolute here (bots_verl.main resolves it)")
    # The driver checked this too, but relative checkpoint paths resolve here as in verl: refuse before rotating.
    check_run_log_dir(config)
    # verl's file logger reads this in this process (the driver's environment may not reach Ray workers)
    os.environ["VERL_FILE_LOGGER_PATH"] = os.path.join(run_dir, METRICS_FILE)
    # it also truncates the file: keep a resumed run's earlier steps as metrics.part<k>.jsonl
    rotated = rotate_metrics(run_dir)
    if rotated is not None:
        logger.info("kept the previous metrics of %s as %s", run_dir, rotated.name)


@contextlib.contextmanager
def trainer_registered(mode: str, trainer_cls: type) -> Iterator[None]:
    """Make verl's trainer registry return ``trainer_cls`` for ``mode`` in this process, for the duration."""
    registry = trainer_base.TRAINER_REGISTRY
    previous = registry.get(mode)
    registry[mode] = trainer_cls
    try:
        yield
    finally:
        if previous is None:
            registry.pop(mode, None)
        else:
            registry[mode] = previous


@ray.remote(num_cpus=0)
class _ClusterClaim:
    """Holds :data:`CLAIM_ACTOR`'s name for one run and says whose it is."""

    def __init__(self, owner: dict[str, Any]) -> None:
        self._owner = owner

    def owner(self) -> dict[str, Any]:
        return self._owner


def _describe(owner: dict[str, Any] | None) -> str:
    if not owner:
        return "a run that did not say who it is"
    return (
        f"run {owner.get('experiment', '?')} (Ray job {owner.get('job', '?')}, task runner pid {owner.get('pid', '?')} "
        f"on {owner.get('host', '?')}, since {owner.get('started', '?')})"
    )


def _remedy() -> str:
    return (
        "TransferQueue (verl 0.9.1's) names its controller and storage actors with fixed names in the fixed "
        "namespace transfer_queue, and neither verl nor TransferQueue lets a run choose them, so two runs on one "
        "cluster would share one queue, and a run that fails would kill the other's. Wait for that run to finish, "
        "or give this run a Ray cluster of its own: the setting that separates runs is RAY_ADDRESS (start another "
        "cluster with ray start --head --port=<another port> and point this run's RAY_ADDRESS at it; unset, the run "
        "starts a local one). Nothing of the other run was touched."
    )


def take_claim(owner: dict[str, Any], patience: float = 15.0) -> Any:
    """Create the named claim actor :data:`CLAIM_ACTOR` for ``owner``; atomic, so only one run can hold it.

    Args:
        owner: who this run is, shown to a refused second run.
        patience: seconds to wait for a claim that does not answer (its run just ended and it is being torn down).

    Returns:
        The claim's handle: keep it (the claim lives as long as a handle and its creator do).

    Raises:
        RuntimeError: another run holds the claim; the message names that run.
    """
    name, namespace = CLAIM_ACTOR
    deadline = time.monotonic() + patience
    other: dict[str, Any] | None = None
    while True:
        try:
            return _ClusterClaim.options(name=name, namespace=namespace, lifetime=None).remote(owner)
        except ValueError:
            pass
        try:
            other = ray.get(ray.get_actor(name, namespace=namespace).owner.remote(), timeout=5)
            break  # a live run answers: refuse
        except ValueError:
            pass  # gone between the two calls: take it now
        except Exception:  # dying with its run, or not answering: give it a moment
            time.sleep(0.5)
        if time.monotonic() > deadline:
            break
    raise RuntimeError(
        f"this Ray cluster is in use by another BOTS training run: {_describe(other)}, which holds the actor "
        f"{namespace}/{name}. {_remedy()}"
    )


def check_no_transfer_queue() -> None:
    """Refuse when a TransferQueue controller already exists on the cluster (a run without BOTS may own it).

    Raises:
        RuntimeError: naming the controller actor (and its job and pid when Ray's state API can tell).
    """
    name, namespace = TQ_CONTROLLER
    try:
        ray.get_actor(name, namespace=namespace)
    except ValueError:
        return
    details = ""
    try:
        from ray.util.state import list_actors

        found = list_actors(filters=[("name", "=", name), ("state", "=", "ALIVE")], timeout=10)
        if found:
            details = f" (Ray job {found[0].job_id}, pid {found[0].pid})"
    except Exception:  # the state API needs the dashboard's agent; the name alone is enough to refuse
        pass
    raise RuntimeError(
        f"a TransferQueue controller is already running on this Ray cluster: the actor {namespace}/{name}{details}, "
        f"owned by another verl run. This run would attach to its queue (verl's tq.init) and kill it on exit "
        f"(tq.close). {_remedy()}"
    )


def claim_cluster(config: DictConfig) -> Any:
    """Make sure this run is the only training run on its Ray cluster before verl's ``run`` calls ``tq.init``.

    Takes the claim (:func:`take_claim`), then checks that no TransferQueue controller exists
    (:func:`check_no_transfer_queue`); on a refusal the claim is given back first.

    Returns:
        The claim's handle, held until the run ends.

    Raises:
        RuntimeError: the cluster is in use, naming by what.
    """
    trainer = config.get("trainer", {}) or {}
    owner = {
        "experiment": f"{trainer.get('project_name', '?')}/{trainer.get('experiment_name', '?')}",
        "job": ray.get_runtime_context().get_job_id(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    claim = take_claim(owner)
    try:
        check_no_transfer_queue()
    except BaseException:
        ray.kill(claim)
        raise
    return claim


class BOTSTaskRunner(TaskRunnerV1.__ray_actor_class__):
    """verl's V1 task runner building :class:`BOTSTrainer` with the driver's settings (:func:`task_runner_with`).

    Args:
        settings: the run's BOTS settings, resolved once by the driver (:mod:`bots_verl.config.settings`).
    """

    def __init__(self, settings: BOTSSettings) -> None:
        super().__init__()
        self.bots_settings = settings

    def run(self, config: DictConfig) -> None:
        """verl's ``TaskRunnerV1.run`` (TransferQueue, trainer, agent loop, fit), with ``BOTSTrainer``.

        Raises:
            RuntimeError: before TransferQueue is touched, when another run uses this Ray cluster
                (:func:`claim_cluster`).
        """
        claim = claim_cluster(config)  # first: even the run log of a run on a busy cluster stays untouched
        try:
            use_run_log(config)
            mode = config.trainer.v1.trainer_mode
            trainer = functools.partial(bots_trainer_class(mode), settings=self.bots_settings)
            with trainer_registered(mode, trainer):
                super().run(config)
        finally:
            with contextlib.suppress(Exception):
                ray.kill(claim)


class _RunnerWithSettings:
    """What verl's ``run_ppo`` takes as ``task_runner_class``: it calls ``.remote()`` (or ``.options(...).remote()``)
    without arguments, so the driver's settings are bound here."""

    def __init__(self, actor_class: Any, settings: BOTSSettings) -> None:
        self._actor_class = actor_class
        self._settings = settings

    def options(self, **options: Any) -> _RunnerWithSettings:
        return _RunnerWithSettings(self._actor_class.options(**options), self._settings)

    def remote(self) -> Any:
        return self._actor_class.remote(self._settings)


def task_runner_with(settings: BOTSSettings) -> Any:
    """``run_ppo``'s ``task_runner_class``: :class:`BOTSTaskRunner` (one CPU) created with the driver's ``settings``,
    so the trainer and the selector's actor take the run's settings from the driver and read no yaml.

    Args:
        settings: the run's BOTS settings (:func:`bots_verl.config.settings.resolve_settings`).
    """
    return _RunnerWithSettings(ray.remote(num_cpus=1)(BOTSTaskRunner), settings)
