"""Registrations with verl's registries, installed when verl imports the module that holds each registry.

verl imports every module named in ``VERL_USE_EXTERNAL_MODULES`` at ``import verl`` in every Ray process. Importing
verl's engine and rollout modules there would add 3-4 s of imports to each process (reward workers, agent-loop
workers, ...) that never uses them, so each registration below is a post-import hook: it runs right after verl itself
imports the module (or at once if it already did).

- ``verl.workers.engine.fsdp.transformer_impl``: ``FSDPEngineWithLMHead`` and ``FSDPEngineWithValueHead`` registered
  for device ``cpu``; unpinned reference-model offload (cpu platform only).
- ``verl.workers.rollout.base``: ``_ROLLOUT_REGISTRY[("hf", "async")]`` (a private dict) names
  :class:`~bots_verl.verl_cpu.hf_rollout.HFServerAdapter`.
- ``verl.workers.rollout.replica``: ``RolloutReplicaRegistry.register("hf", ...)`` loads
  :class:`~bots_verl.verl_cpu.hf_rollout.HFReplica`.
- ``verl.checkpoint_engine.base``: ``CheckpointEngineRegistry`` gets the ``cpu_gloo`` engine
  (:class:`~bots_verl.verl_cpu.checkpoint_engine.GlooCheckpointEngine`): the weight sync of ``separate_async``.
- ``verl.utils.distributed`` and ``verl.workers.engine_workers``: plain ``gloo`` process groups (cpu platform only).
- ``verl.workers.engine_workers`` (imported by the processes that train or build the workers): torch's intra-op
  threads set to ``BOTS_TRAIN_THREADS`` (cpu platform only). Every process starts with ``OMP_NUM_THREADS=1``
  (:func:`bots_verl.verl_cpu.launch.env_vars`), right for the many processes that share a few cores; but the sync
  trainer runs generation and the update one after the other, so while the actor computes log-probs or updates,
  the cores are otherwise idle.

:mod:`bots_verl.integration.safety.verl_pins` pins the verl sources these depend on;
``tests/integration/test_verl_pins_on_cpu.py`` fails when they change.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

import wrapt

from bots_verl.verl_cpu import compat

logger = logging.getLogger(__name__)

ROLLOUT_NAME = "hf"
ADAPTER_FQN = "bots_verl.verl_cpu.hf_rollout.HFServerAdapter"
ENGINE_MODEL_TYPES = {"language_model": "FSDPEngineWithLMHead", "value_model": "FSDPEngineWithValueHead"}
FSDP_BACKENDS = ["fsdp", "fsdp2"]
TRAIN_THREADS_ENV = "BOTS_TRAIN_THREADS"

_installed = False


def cpu_platform_selected() -> bool:
    """True when this process runs verl on the cpu platform (``VERL_PLATFORM=cpu``)."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def _register_engines(transformer_impl: ModuleType) -> None:
    from verl.workers.engine.base import EngineRegistry

    for model_type, class_name in ENGINE_MODEL_TYPES.items():
        registered = EngineRegistry._engines.get(model_type, {})
        engine_cls = getattr(transformer_impl, class_name)
        for backend in FSDP_BACKENDS:
            if registered.get(backend, {}).get("cpu") is not None:
                continue
            EngineRegistry.register(model_type=model_type, backend=backend, device="cpu")(engine_cls)
    if cpu_platform_selected():
        compat.unpinned_offload_policy(transformer_impl)


def _register_rollout(rollout_base: ModuleType) -> None:
    rollout_base._ROLLOUT_REGISTRY.setdefault((ROLLOUT_NAME, "async"), ADAPTER_FQN)


def _load_replica():
    from bots_verl.verl_cpu.hf_rollout import HFReplica

    return HFReplica


def _register_replica(replica: ModuleType) -> None:
    replica.RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)


def _register_checkpoint_engine(checkpoint_engine_base: ModuleType) -> None:
    # importing the module registers the engine (its class decorator); verl's base module is loaded by now
    import bots_verl.verl_cpu.checkpoint_engine  # noqa: F401


def _fix_process_group(distributed: ModuleType) -> None:
    if cpu_platform_selected():
        compat.gloo_process_group(distributed)


def training_threads() -> int | None:
    """Intra-op threads of the training worker (``BOTS_TRAIN_THREADS``), or None when unset.

    Raises:
        ValueError: for a value that is not a positive integer.
    """
    value = os.environ.get(TRAIN_THREADS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{TRAIN_THREADS_ENV}={value!r} must be a positive integer")
    return int(value)


def _set_training_threads() -> None:
    threads = training_threads()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
        logger.info("CPU backend: %d intra-op threads for the training worker", threads)


def _engine_workers_loaded(engine_workers: ModuleType) -> None:
    if cpu_platform_selected():
        _rebind_process_group(engine_workers)
        _set_training_threads()


def _rebind_process_group(engine_workers: ModuleType) -> None:
    # engine_workers bound the function by name at import; point it at the (possibly wrapped) current one
    import verl.utils.distributed as distributed

    compat.gloo_process_group(distributed)
    engine_workers.initialize_global_process_group_ray = distributed.initialize_global_process_group_ray


HOOKS = {
    "verl.workers.engine.fsdp.transformer_impl": _register_engines,
    "verl.workers.rollout.base": _register_rollout,
    "verl.workers.rollout.replica": _register_replica,
    "verl.checkpoint_engine.base": _register_checkpoint_engine,
    "verl.utils.distributed": _fix_process_group,
    "verl.workers.engine_workers": _engine_workers_loaded,
}


def install() -> None:
    """Install every hook once per process (each runs at once if verl already imported its module)."""
    global _installed
    if _installed:
        return
    _installed = True
    for module_name, hook in HOOKS.items():
        wrapt.register_post_import_hook(hook, module_name)
