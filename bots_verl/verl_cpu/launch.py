"""Driver-side set-up of a CPU run: the CPU settings, the environment of every Ray process, and Ray's resources.

``python -m bots_verl.main trainer.device=cpu ...`` calls :func:`prepare` before anything resolves verl's platform:

1. **Settings.** Every key of ``bots_verl/config/cpu_backend.yaml`` (fsdp2 in float32, eager attention, no
   torch.compile, one logical GPU, one storage unit for TransferQueue, ``rollout.name=hf``, ...) is applied unless
   the command line sets that key itself (so ``trainer.device=cpu`` alone is a working CPU config, and any key can
   still be overridden). With ``trainer.v1.trainer_mode=separate_async``, :data:`SEPARATE_ASYNC_SETTINGS` too: the
   rollout on one logical GPU of its own, synced by the ``cpu_gloo`` checkpoint engine (:mod:`.checkpoint_engine`).
   With ``actor_rollout_ref.rollout.name=vllm`` (vLLM's CPU build, ``make vllm-cpu``), :data:`VLLM_SETTINGS` too.
2. **Environment.** ``VERL_USE_EXTERNAL_MODULES=bots_verl.verl_cpu.register`` and ``VERL_PLATFORM=cpu`` (plus
   ``OMP_NUM_THREADS`` and ``TOKENIZERS_PARALLELISM``) go into this process and into
   ``ray_kwargs.ray_init.runtime_env.env_vars``, which verl's ``run_ppo`` passes to ``ray.init``, so the task
   runner, workers, rollout server, agent-loop and reward workers all load the backend.
3. **Ray.** ``ray_kwargs.ray_init`` gets ``num_gpus`` = the training ranks plus, in ``separate_async``, the
   standalone rollout's (logical GPUs: verl's resource pools ask for GPU bundles) and ``num_cpus`` >=
   :data:`MIN_RAY_CPUS` (logical: TransferQueue's actors hang on a 2-core box with fewer); with ``RAY_ADDRESS`` set,
   the run attaches to that cluster instead (:mod:`bots_verl.verl_cpu.cluster`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from bots_verl.verl_cpu.cluster import LOOPBACK_ENV, attached_address, use_loopback
from bots_verl.verl_cpu.verl_registrations import TRAIN_THREADS_ENV

logger = logging.getLogger(__name__)

__all__ = [
    "CPU_PROFILE",
    "MIN_RAY_CPUS",
    "SEPARATE_ASYNC_SETTINGS",
    "VLLM_SETTINGS",
    "activate",
    "apply_cpu_settings",
    "check_cpu_settings",
    "env_vars",
    "prepare",
    "separate_async",
    "set_ray_init",
    "standalone_rollout_gpus",
    "uses_cpu_backend",
    "uses_vllm",
]

CPU_PROFILE = Path(__file__).resolve().parent.parent / "config" / "cpu_backend.yaml"
MODULE = "bots_verl.verl_cpu.register"
MIN_RAY_CPUS = 8
#: the checkpoint engine that syncs a separate rollout on CPU (bots_verl.verl_cpu.checkpoint_engine.BACKEND; not
#: imported here: that module imports verl, which must not pick a platform before the backend is active)
CPU_CHECKPOINT_ENGINE = "cpu_gloo"
#: ``separate_async`` on CPU, unless the command line sets a key: the rollout on one logical GPU of its own (verl's
#: default is a standalone pool of 8 per node), synced by the CPU checkpoint engine (verl refuses ``naive`` there)
SEPARATE_ASYNC_SETTINGS: dict[str, Any] = {
    "actor_rollout_ref.rollout.nnodes": 1,
    "actor_rollout_ref.rollout.n_gpus_per_node": 1,
    "actor_rollout_ref.rollout.checkpoint_engine.backend": CPU_CHECKPOINT_ENGINE,
}

#: ``rollout.name=vllm`` on CPU, unless the command line sets a key: vLLM's CPU platform has no sleep mode (it refuses
#: verl's default ``True``: "Sleep mode is not supported on current platform"), and eager mode as the actor (capturing
#: or compiling the model costs minutes on CPU)
VLLM_SETTINGS: dict[str, Any] = {
    "actor_rollout_ref.rollout.enable_sleep_mode": False,
    "actor_rollout_ref.rollout.enforce_eager": True,
}
#: vLLM's KV cache on CPU, in GiB (vLLM's own variable), unless the environment sets it: the CPU models are tiny
VLLM_KVCACHE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def uses_vllm(config: DictConfig) -> bool:
    """True when the run generates with verl's vLLM rollout."""
    return str(config.actor_rollout_ref.rollout.name) == "vllm"


def separate_async(config: DictConfig) -> bool:
    """True when the run uses verl's ``separate_async`` trainer (the rollout on resources of its own)."""
    return str(config.trainer.get("v1", {}).get("trainer_mode", "sync")) == "separate_async"


def standalone_rollout_gpus(config: DictConfig) -> int:
    """Logical GPUs of the standalone rollout pool (``separate_async``), 0 in the other modes."""
    if not separate_async(config):
        return 0
    rollout = config.actor_rollout_ref.rollout
    return int(rollout.get("nnodes", 0) or 0) * int(rollout.get("n_gpus_per_node", 0) or 0)


def uses_cpu_backend(config: DictConfig) -> bool:
    """True when the config asks for the CPU backend (``trainer.device=cpu``)."""
    return str(config.trainer.get("device", "cuda")) == "cpu"


def _leaves(node: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def env_vars() -> dict[str, str]:
    """The environment every process of a CPU run needs."""
    modules = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if MODULE not in modules:
        modules.append(MODULE)
    return {
        "VERL_USE_EXTERNAL_MODULES": ",".join(modules),
        "VERL_PLATFORM": "cpu",
        # one BLAS thread per process: several processes share a few cores, oversubscription only slows them
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "false"),
        # the training worker alone uses every core: the sync trainer never generates while it updates
        TRAIN_THREADS_ENV: os.environ.get(TRAIN_THREADS_ENV, str(_usable_cores())),
        # the CPU backend runs on one machine: a cluster it starts listens on 127.0.0.1 only (cluster.LOOPBACK_ENV)
        **{k: os.environ.get(k, v) for k, v in LOOPBACK_ENV.items()},
    }


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def activate(env: dict[str, str] | None = None) -> None:
    """Load the CPU backend in this process (set its environment, register the platform and hooks).

    Raises:
        RuntimeError: if verl already resolved another platform in this process.
    """
    os.environ.update(env or env_vars())
    use_loopback()
    from verl.plugin.platform import get_platform

    import bots_verl.verl_cpu.register  # noqa: F401  (registers the platform and hooks)

    platform = get_platform()
    if platform.device_name != "cpu":
        raise RuntimeError(
            f"verl already resolved the {platform.device_name!r} platform in this process; the CPU backend must be "
            "activated before verl picks a device"
        )


def apply_cpu_settings(config: DictConfig, user_keys: Iterable[str] = ()) -> list[str]:
    """Set every key of ``cpu_backend.yaml`` that the command line did not set (in place).

    Args:
        config: the composed config.
        user_keys: dotted keys the command line set
            (:func:`~bots_verl.config.overrides.overridden_keys`); those keep their value.

    Returns:
        ``key=value`` strings of the settings that changed.
    """
    profile = OmegaConf.to_container(OmegaConf.load(CPU_PROFILE), resolve=True)
    user = set(user_keys)
    applied = []
    with open_dict(config):
        for key, value in _leaves(profile):
            if key in user or OmegaConf.select(config, key, default=None) == value:
                continue
            OmegaConf.update(config, key, value, force_add=True)
            applied.append(f"{key}={value}")
        extra = {
            **(SEPARATE_ASYNC_SETTINGS if separate_async(config) else {}),
            **(VLLM_SETTINGS if uses_vllm(config) else {}),
        }
        for key, value in extra.items():
            if key in user or OmegaConf.select(config, key, default=None) == value:
                continue
            OmegaConf.update(config, key, value, force_add=True)
            applied.append(f"{key}={value}")
    return applied


def _vllm_problems(config: DictConfig) -> list[str]:
    """What stops verl's vLLM rollout on CPU, found before Ray starts (vLLM's CPU build, its missing sleep mode, the
    ``separate_async`` sync engine that serves only the ``hf`` rollout)."""
    from importlib import metadata

    problems = []
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = None
    if version is None or not version.endswith("+cpu"):
        found = "no vllm" if version is None else f"vllm {version}, not a CPU build"
        problems.append(
            f"actor_rollout_ref.rollout.name=vllm needs vLLM's CPU build in this Python ({found}): make vllm-cpu "
            "builds it into .venv-vllm (bots_verl/verl_cpu/README.md)"
        )
    if config.actor_rollout_ref.rollout.get("enable_sleep_mode", False):
        problems.append("actor_rollout_ref.rollout.enable_sleep_mode=True (vLLM's CPU platform has no sleep mode)")
    if separate_async(config):
        problems.append(
            "trainer.v1.trainer_mode=separate_async with rollout.name=vllm (on CPU the standalone rollout is "
            "synced by the cpu_gloo checkpoint engine, which serves the hf rollout)"
        )
    return problems


def set_ray_init(config: DictConfig, env: dict[str, str]) -> None:
    """Put the logical resources and the environment into ``ray_kwargs.ray_init`` (read by verl's ``run_ppo``).

    When ``RAY_ADDRESS`` names a running cluster (:class:`bots_verl.verl_cpu.cluster.SharedRayCluster`), the run
    attaches to it: ``ray.init`` refuses resource arguments then, so none are set; the cluster was sized by its owner.

    Raises:
        ValueError: if the command line set ``ray_kwargs.ray_init.num_cpus`` while ``RAY_ADDRESS`` is set.
    """
    ranks = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes) + standalone_rollout_gpus(config)
    address = attached_address()
    with open_dict(config):
        ray_init = config.ray_kwargs.ray_init
        if address is None:
            ray_init.num_cpus = max(MIN_RAY_CPUS, int(ray_init.get("num_cpus", None) or 0))
            ray_init.num_gpus = ranks
            # a new cluster of its own: a stale ray_current_cluster file left by a killed `ray start` must not make
            # ray.init try to attach to a cluster that is gone
            if ray_init.get("address", None) is None:
                ray_init.address = "local"
        elif ray_init.get("num_cpus", None) is not None or ray_init.get("num_gpus", None) is not None:
            raise ValueError(
                f"RAY_ADDRESS={address} attaches this run to a running Ray cluster, whose resources are fixed: "
                "leave ray_kwargs.ray_init.num_cpus/num_gpus unset (or unset RAY_ADDRESS to start a cluster)"
            )
        else:
            logger.info("attaching to the Ray cluster at %s (RAY_ADDRESS)", address)
        ray_init.include_dashboard = False
        if ray_init.get("runtime_env", None) is None:
            ray_init.runtime_env = {}
        existing = ray_init.runtime_env.get("env_vars", None)
        existing = OmegaConf.to_container(existing) if existing is not None else {}
        ray_init.runtime_env.env_vars = {**existing, **env}


def prepare(config: DictConfig, user_keys: Iterable[str] = ()) -> list[str]:
    """Apply the CPU settings and Ray start-up to ``config`` (in place) and activate the backend in this process.

    Args:
        config: the composed config with ``trainer.device=cpu``.
        user_keys: dotted keys the command line set
            (:func:`~bots_verl.config.overrides.overridden_keys`); those keep their value.

    Returns:
        ``key=value`` strings of the settings applied.

    Raises:
        ValueError: for settings the CPU backend cannot run with.
    """
    applied = apply_cpu_settings(config, user_keys)
    check_cpu_settings(config)
    env = env_vars()
    if uses_vllm(config):
        env.update({k: os.environ.get(k, v) for k, v in VLLM_KVCACHE_ENV.items()})
    set_ray_init(config, env)
    activate(env)
    if applied:
        logger.info("CPU backend settings: %s", " ".join(applied))
    return applied


def check_cpu_settings(config: DictConfig) -> None:
    """Refuse settings the CPU backend cannot run with.

    Raises:
        ValueError: listing every offending key.
    """
    rollout = config.actor_rollout_ref.rollout
    problems = []
    if rollout.name not in ("hf", "vllm"):
        problems.append(f"actor_rollout_ref.rollout.name={rollout.name} (the CPU backend generates with hf or vllm)")
    if rollout.name == "vllm":
        problems.extend(_vllm_problems(config))
    if rollout.name == "hf":
        from bots_verl.verl_cpu.hf_server import check_dtype

        try:
            check_dtype(rollout.get("dtype", "bfloat16"))
        except ValueError as exc:
            problems.append(str(exc))
    if int(rollout.tensor_model_parallel_size) != 1:
        problems.append(f"actor_rollout_ref.rollout.tensor_model_parallel_size={rollout.tensor_model_parallel_size}")
    if int(config.trainer.nnodes) != 1:
        problems.append(f"trainer.nnodes={config.trainer.nnodes} (the CPU backend runs on one machine)")
    if config.actor_rollout_ref.model.get("use_remove_padding", False):
        problems.append("actor_rollout_ref.model.use_remove_padding=true (needs flash-attn kernels)")
    backend = rollout.get("checkpoint_engine", {}).get("backend", "naive")
    if separate_async(config) and backend != CPU_CHECKPOINT_ENGINE:
        problems.append(
            f"actor_rollout_ref.rollout.checkpoint_engine.backend={backend} (separate_async on CPU syncs the rollout "
            f"with {CPU_CHECKPOINT_ENGINE!r}; verl's other engines need CUDA, an NPU or RDMA)"
        )
    if problems:
        raise ValueError("trainer.device=cpu cannot run with: " + "; ".join(problems))
