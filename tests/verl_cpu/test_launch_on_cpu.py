"""Driver-side set-up of a CPU run: the CPU settings, Ray's resources and environment, and the dry run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from bots_verl.config.overrides import overridden_keys
from bots_verl.verl_cpu import launch

ROOT = Path(__file__).resolve().parents[2]


def _compose(*overrides: str):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=["trainer.device=cpu", *overrides])


def test_a_key_the_command_line_set_inside_a_whole_mapping_keeps_its_value():
    """``reward={num_workers:3}`` sets ``reward.num_workers`` as ``reward.num_workers=3`` does (hydra merges the
    mapping); the CPU backend's 1 used to replace it, the mapping's key read as ``reward`` alone."""
    user = ["reward={num_workers:3}"]
    config = _compose(*user)
    applied = launch.apply_cpu_settings(config, overridden_keys(user))
    assert config.reward.num_workers == 3 and not any(a.startswith("reward.num_workers") for a in applied)
    assert "actor_rollout_ref.rollout.name=hf" in applied  # the keys the mapping does not write are filled in


def test_cpu_settings_fill_in_what_the_command_line_did_not_set():
    user = ["actor_rollout_ref.rollout.agent.num_workers=2", "reward.num_workers=3"]
    config = _compose(*user)
    applied = launch.apply_cpu_settings(config, overridden_keys(user))
    assert config.actor_rollout_ref.rollout.name == "hf"
    actor = config.actor_rollout_ref.actor
    assert actor.strategy == "fsdp2" and actor.fsdp_config.dtype == "float32" and not actor.use_torch_compile
    # verl's FSDP engine computes in mixed_precision.param_dtype (bfloat16 when unset), not in fsdp_config.dtype
    for role in ("actor", "ref"):
        assert config.actor_rollout_ref[role].fsdp_config.mixed_precision.param_dtype == "fp32"
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "eager"
    # old log-probs are the float32 rollout's (verl's bypass mode), which the rollout computes by default
    assert config.algorithm.rollout_correction.bypass_mode and config.actor_rollout_ref.rollout.calculate_log_probs
    assert config.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1
    assert config.trainer.n_gpus_per_node == 1
    # the command line wins
    assert config.actor_rollout_ref.rollout.agent.num_workers == 2 and config.reward.num_workers == 3
    assert "actor_rollout_ref.rollout.name=hf" in applied
    assert not any(a.startswith("reward.num_workers") for a in applied)
    launch.check_cpu_settings(config)


def test_settings_the_cpu_backend_cannot_run_with_are_refused():
    user = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"]
    config = _compose(*user)
    launch.apply_cpu_settings(config, overridden_keys(user))
    with pytest.raises(ValueError, match="rollout.name=vllm.*tensor_model_parallel_size=2"):
        launch.check_cpu_settings(config)


def test_vllm_on_cpu_gets_its_settings_and_is_refused_without_vllms_cpu_build(monkeypatch):
    """Issue 49: verl's vLLM rollout on vLLM's CPU build; what stops it is said before Ray starts."""
    from importlib import metadata

    user = ["actor_rollout_ref.rollout.name=vllm"]
    config = _compose(*user)
    applied = launch.apply_cpu_settings(config, overridden_keys(user))
    rollout = config.actor_rollout_ref.rollout
    assert rollout.name == "vllm" and rollout.enable_sleep_mode is False and rollout.enforce_eager is True
    assert "actor_rollout_ref.rollout.enable_sleep_mode=False" in applied
    real_version = metadata.version

    def version(name: str) -> str:
        return {"vllm": installed}[name] if name == "vllm" else real_version(name)

    monkeypatch.setattr(metadata, "version", version)
    for installed in ("0.24.0", "0.24.0+cu129"):
        found = rf"needs vLLM's CPU build in this Python \(vllm {re.escape(installed)}, not a CPU build\)"
        with pytest.raises(ValueError, match=found):
            launch.check_cpu_settings(config)
    installed = "0.24.0+cpu"
    launch.check_cpu_settings(config)
    # the hf rollout gets none of them
    hf = _compose()
    assert not any("sleep_mode" in a or "enforce_eager" in a for a in launch.apply_cpu_settings(hf))
    # a setting vLLM's CPU platform cannot run with, typed by the user, is refused, not replaced
    for bad in (["+actor_rollout_ref.rollout.enable_sleep_mode=True"], SEPARATE):
        user = ["actor_rollout_ref.rollout.name=vllm", *bad]
        config = _compose(*user)
        launch.apply_cpu_settings(config, overridden_keys(user))
        with pytest.raises(ValueError, match="sleep mode|separate_async with rollout.name=vllm"):
            launch.check_cpu_settings(config)


def test_without_vllm_the_vllm_rollout_is_refused_with_the_command_that_builds_it():
    pytest.importorskip("verl")
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    user = ["actor_rollout_ref.rollout.name=vllm"]
    config = _compose(*user)
    launch.apply_cpu_settings(config, overridden_keys(user))
    with pytest.raises(ValueError, match=r"\(no vllm\): make vllm-cpu"):
        launch.check_cpu_settings(config)


def test_a_rollout_dtype_the_hf_server_would_refuse_is_refused_before_ray():
    """Issue 47, item 5's sibling: the server checked it only once its Ray actor was built; one check, one message."""
    from bots_verl.verl_cpu.hf_server import check_dtype

    user = ["actor_rollout_ref.rollout.dtype=float16"]
    config = _compose(*user)
    launch.apply_cpu_settings(config, overridden_keys(user))
    with pytest.raises(ValueError) as refused:
        launch.check_cpu_settings(config)
    with pytest.raises(ValueError) as server:
        check_dtype("float16")
    assert str(server.value) in str(refused.value)
    assert "actor_rollout_ref.rollout.dtype='float16': the hf rollout supports" in str(server.value)


def test_ray_gets_logical_gpus_cpus_and_the_backend_environment(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    config = _compose("trainer.n_gpus_per_node=2", "+ray_kwargs.ray_init.runtime_env.env_vars.MY_VAR=1")
    env = launch.env_vars()
    launch.set_ray_init(config, env)
    ray_init = OmegaConf.to_container(config.ray_kwargs.ray_init)
    assert ray_init["num_gpus"] == 2 and ray_init["num_cpus"] >= launch.MIN_RAY_CPUS
    assert ray_init["address"] == "local"  # a new cluster, never one named by a stale ray_current_cluster file
    env_vars = ray_init["runtime_env"]["env_vars"]
    assert env_vars["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"  # a one-machine cluster listens on loopback only
    assert env_vars["MY_VAR"] == 1 and env_vars["VERL_PLATFORM"] == "cpu"
    assert "bots_verl.verl_cpu.register" in env_vars["VERL_USE_EXTERNAL_MODULES"].split(",")


SEPARATE = ["trainer.v1.trainer_mode=separate_async", "trainer.v1.separate_async.parameter_sync_step=1"]


def test_separate_async_gets_a_rollout_gpu_of_its_own_and_the_cpu_checkpoint_engine(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    config = _compose(*SEPARATE)
    applied = launch.apply_cpu_settings(config, overridden_keys(SEPARATE))
    rollout = config.actor_rollout_ref.rollout
    assert rollout.checkpoint_engine.backend == "cpu_gloo" and "rollout.checkpoint_engine.backend=cpu_gloo" in " ".join(
        applied
    )
    assert rollout.nnodes == 1 and rollout.n_gpus_per_node == 1 and launch.standalone_rollout_gpus(config) == 1
    launch.check_cpu_settings(config)
    launch.set_ray_init(config, launch.env_vars())
    assert config.ray_kwargs.ray_init.num_gpus == 2  # the actor's logical GPU and the standalone rollout's
    # the other modes keep verl's naive sync and no standalone pool
    sync = _compose()
    launch.apply_cpu_settings(sync)
    assert sync.actor_rollout_ref.rollout.checkpoint_engine.backend == "naive"
    assert launch.standalone_rollout_gpus(sync) == 0


def test_separate_async_on_cpu_refuses_a_gpu_checkpoint_engine():
    user = [*SEPARATE, "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"]
    config = _compose(*user)
    launch.apply_cpu_settings(config, overridden_keys(user))
    assert config.actor_rollout_ref.rollout.checkpoint_engine.backend == "nccl"  # the command line wins ...
    with pytest.raises(ValueError, match="checkpoint_engine.backend=nccl.*'cpu_gloo'"):
        launch.check_cpu_settings(config)  # ... and is refused before Ray starts


def test_a_run_attaches_to_the_cluster_in_ray_address_without_resource_arguments(monkeypatch):
    # ray.init refuses num_cpus/num_gpus when it attaches (bots_verl.verl_cpu.cluster shares one cluster)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    config = _compose("trainer.n_gpus_per_node=2")
    launch.set_ray_init(config, launch.env_vars())
    ray_init = OmegaConf.to_container(config.ray_kwargs.ray_init)
    assert ray_init.get("num_cpus") is None and ray_init.get("num_gpus") is None
    assert ray_init["runtime_env"]["env_vars"]["VERL_PLATFORM"] == "cpu"
    pinned = _compose("ray_kwargs.ray_init.num_cpus=8")
    with pytest.raises(ValueError, match="RAY_ADDRESS=10.0.0.1:6379 attaches.*num_cpus"):
        launch.set_ray_init(pinned, launch.env_vars())


def test_dry_run_of_the_two_key_command_line(tmp_path):
    from bots_verl.verl_cpu.addition_task import build_toy

    paths = build_toy(tmp_path / "toy", num_tasks=12, num_val=2)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bots_verl.main",
            "trainer.device=cpu",
            "actor_rollout_ref.rollout.name=hf",
            f"data.train_files={paths['train']}",
            f"data.val_files={paths['val']}",
            f"actor_rollout_ref.model.path={paths['model']}",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
            "trainer.logger=[console]",
            "bots.reference_columns=[weak_pass_rate,strong_pass_rate]",
            "bots.dry_run=true",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BOTS dry run: config OK" in proc.stdout
    assert "CPU backend (bots_verl.verl_cpu) set:" in proc.stdout and "actor.strategy=fsdp2" in proc.stdout


def test_training_threads_come_from_the_environment(monkeypatch):
    from bots_verl.verl_cpu import verl_registrations

    monkeypatch.delenv(verl_registrations.TRAIN_THREADS_ENV, raising=False)
    assert verl_registrations.training_threads() is None
    assert int(launch.env_vars()[verl_registrations.TRAIN_THREADS_ENV]) == len(os.sched_getaffinity(0))
    monkeypatch.setenv(verl_registrations.TRAIN_THREADS_ENV, "1")
    assert verl_registrations.training_threads() == 1 and launch.env_vars()[verl_registrations.TRAIN_THREADS_ENV] == "1"
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(verl_registrations.TRAIN_THREADS_ENV, bad)
        with pytest.raises(ValueError, match="BOTS_TRAIN_THREADS"):
            verl_registrations.training_threads()


def test_a_cluster_started_after_ray_was_imported_still_uses_the_loopback_address(monkeypatch):
    """hydra's composition of verl's config imports ray before the entry point runs; Ray reads its one-machine switch
    at import, so use_loopback must also update the value Ray already read."""
    import ray._private.ray_constants as constants
    from ray._private import services

    from bots_verl.verl_cpu.cluster import use_loopback

    monkeypatch.setattr(constants, "ENABLE_RAY_CLUSTER", True)  # as if imported without the switch
    # no switch in the environment (a process told =1 asks for a multi-node cluster: use_loopback leaves it alone)
    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    use_loopback()
    assert constants.ENABLE_RAY_CLUSTER is False
    assert services.resolve_ip_for_localhost("127.0.0.1") == "127.0.0.1"
