"""Checks of verl's own config keys that BOTS depends on (no Ray, no GPU: the dry run runs them).

``bots:`` itself is :mod:`bots_verl.config.bots_config`; here are the verl settings a BOTS run needs or refuses
(dataloader workers, the V1 trainer and its mode, verl's rollout skip, the training schedule, the weight-sync bucket, a
seeded random subset: :func:`check_verl_settings`), verl's own ``validate_config`` (:func:`validate_verl_config`) and
the small readers of verl's config the driver and the trainer share (``data.train_files``, DAPO on or off). A
backend's checks of its own settings are registered by the backend (:mod:`bots_verl.config.checks`).
"""

from __future__ import annotations

import logging
import os

from omegaconf import DictConfig, ListConfig, OmegaConf

from bots_verl.core.defaults import ROLLOUTS_PER_TASK

logger = logging.getLogger(__name__)

__all__ = [
    "LEGACY_REWARD_SECTIONS",
    "TRAINER_MODES",
    "check_checkpoint_engine",
    "check_data_subset",
    "check_trainer_schedule",
    "check_verl_compat",
    "check_verl_settings",
    "dapo_enabled",
    "local_path_exists",
    "train_files",
    "validate_verl_config",
    "warn_verl_settings",
    "weight_sync_bucket_bytes",
]

#: verl's top-level reward sections before ``reward:`` -> where verl 0.9.1's trainer reads them. Only verl's
#: fully-async entry point migrates them (``migrate_legacy_reward_impl``); the V1 trainer BOTS runs in never reads them.
LEGACY_REWARD_SECTIONS = {
    "custom_reward_function": "reward.custom_reward_function",
    "sandbox_fusion": "reward.sandbox_fusion",
    "reward_model": "reward (reward.reward_manager, reward.reward_model, reward.num_workers)",
}

# verl 0.9.1's V1 trainer modes BOTS runs in: the sync trainer (BOTSTrainer) and the two asynchronous ones, whose
# evidence is weighed by its age and whose in-flight tasks sit out selection
# (bots_verl.integration.hooks.async_trainer).
TRAINER_MODES = ("sync", "colocate_async", "separate_async")


def _check_legacy_reward(config: DictConfig) -> None:
    """Refuse a set top-level reward section of older verl: the trainer would silently score with the default."""
    set_keys = []
    for section, replacement in LEGACY_REWARD_SECTIONS.items():
        node = config.get(section, None)
        leaves = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else {}
        stack = [(section, leaves)]
        while stack:
            prefix, value = stack.pop()
            if isinstance(value, dict):
                stack += [(f"{prefix}.{key}", item) for key, item in value.items() if not str(key).startswith("_")]
            elif value is not None:
                set_keys.append(f"{prefix}={value!r} (set it under {replacement})")
    if set_keys:
        raise ValueError(
            f"{', '.join(sorted(set_keys))}: verl 0.9.1's trainer reads the reward settings under reward.* only, "
            "so these top-level keys of older verl would be ignored and the run scored by verl's default reward"
        )


def check_verl_compat(config: DictConfig) -> None:
    """Check the verl settings BOTS depends on.

    Raises:
        ValueError: if ``data.dataloader_num_workers`` is not 0, the V1 trainer is off, the mode is not one of
            :data:`TRAINER_MODES`, verl's rollout skip for the V1 trainer (``skip.rollout_tq``) is on, or a top-level
            reward section of older verl (:data:`LEGACY_REWARD_SECTIONS`) is set.
    """
    _check_legacy_reward(config)
    workers = config.data.get("dataloader_num_workers", None)
    if workers != 0:
        raise ValueError(
            f"data.dataloader_num_workers={workers!r}: BOTS needs 0. Dataloader workers prefetch batches selected "
            "from a stale posterior, and their prefetched indices are not restored on resume."
        )
    if not config.trainer.get("use_v1", True):
        raise ValueError("trainer.use_v1=false: BOTS runs on verl's V1 (TransferQueue) trainer only")
    mode = config.trainer.v1.get("trainer_mode", "sync")
    if mode not in TRAINER_MODES:
        raise ValueError(f"trainer.v1.trainer_mode={mode!r}: BOTS runs in verl's modes {list(TRAINER_MODES)}")
    if mode == "separate_async":
        _check_separate_async(config)
    rollout_tq = (config.get("skip", None) or {}).get("rollout_tq", None) or {}
    if rollout_tq.get("enable", False):
        # On a cached step verl draws the batch BOTS selected, drops it, and trains on trajectories saved by an
        # earlier run: their prompts are that run's selection, so the posterior would be credited with tasks it
        # did not choose while its own choice went unseen.
        raise ValueError(
            "skip.rollout_tq.enable=true: verl's rollout skip replays trajectories cached by an earlier run instead "
            "of rolling out the tasks BOTS selected for the step, so the posterior would be credited with the wrong "
            "tasks. Set skip.rollout_tq.enable=false (BOTS cannot run with cached rollouts)"
        )


def _check_separate_async(config: DictConfig) -> None:
    """What ``PPOTrainerSeparateAsync.__init__`` asserts (verl 0.9.1), as errors the dry run names before Ray starts.

    Raises:
        ValueError: listing every setting verl would refuse.
    """
    rollout = config.actor_rollout_ref.rollout
    sync_step = config.trainer.v1.separate_async.get("parameter_sync_step", 1)
    mini_batch = config.actor_rollout_ref.actor.ppo_mini_batch_size
    problems = []
    if config.data.train_batch_size != sync_step * mini_batch:
        problems.append(
            f"data.train_batch_size={config.data.train_batch_size} must equal "
            f"trainer.v1.separate_async.parameter_sync_step ({sync_step}) * "
            f"actor_rollout_ref.actor.ppo_mini_batch_size ({mini_batch})"
        )
    for key in ("nnodes", "n_gpus_per_node"):
        if not rollout.get(key, 0) or rollout.get(key, 0) <= 0:
            problems.append(f"actor_rollout_ref.rollout.{key}={rollout.get(key)!r} must be > 0 (the standalone pool)")
    if rollout.checkpoint_engine.get("backend", "naive") == "naive":
        problems.append(
            "actor_rollout_ref.rollout.checkpoint_engine.backend=naive cannot sync weights to a separate rollout "
            "pool; use nccl, nixl or mooncake (on GPUs) or cpu_gloo (trainer.device=cpu, its default there)"
        )
    if problems:
        raise ValueError("trainer.v1.trainer_mode=separate_async: " + "; ".join(problems))


def _whole_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_trainer_schedule(config: DictConfig) -> None:
    """Refuse a training schedule verl would misread: ``trainer.total_training_steps``, ``total_epochs``,
    ``save_freq`` and ``test_freq`` must be whole numbers in the range verl gives them a meaning.

    verl multiplies and compares them without a check: ``total_training_steps=abc`` fails minutes into a run naming
    no key, and ``-1`` trains no step and exits 0.

    Raises:
        ValueError: naming every offending key and what it may be.
    """
    trainer = config.trainer
    problems = []
    steps = trainer.get("total_training_steps", None)
    if steps is not None and not (_whole_number(steps) and steps >= 1):
        problems.append(f"trainer.total_training_steps={steps!r} must be a positive integer or null (from epochs)")
    epochs = trainer.get("total_epochs", None)
    if not (_whole_number(epochs) and epochs >= 1):
        problems.append(f"trainer.total_epochs={epochs!r} must be a positive integer")
    for key in ("save_freq", "test_freq"):
        value = trainer.get(key, -1)
        if not (_whole_number(value) and (value == -1 or value >= 1)):
            problems.append(f"trainer.{key}={value!r} must be a positive number of steps, or -1 for never")
    if problems:
        raise ValueError("; ".join(problems))


def weight_sync_bucket_bytes(config: DictConfig) -> int:
    """``actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes`` in bytes, as every worker
    computes it (verl shifts it by 20 bits; a checkpoint engine gets buckets of that size).

    Raises:
        ValueError: naming the key, for a value that is not a positive integer.
    """
    engine = config.actor_rollout_ref.rollout.get("checkpoint_engine", None) or {}
    megabytes = engine.get("update_weights_bucket_megabytes", 2048)
    if not (_whole_number(megabytes) and megabytes >= 1):
        raise ValueError(
            "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes="
            f"{megabytes!r} must be a positive integer (megabytes per weight-sync bucket)"
        )
    return megabytes << 20


def check_checkpoint_engine(config: DictConfig) -> None:
    """The weight-sync settings every checkpoint engine is built with: ``update_weights_bucket_megabytes`` must be a
    positive integer (:func:`weight_sync_bucket_bytes`).

    An engine's own ``engine_kwargs`` are checked by whoever provides it: the CPU backend registers the check of its
    ``cpu_gloo`` engine (:mod:`bots_verl.config.checks`, :mod:`bots_verl.verl_cpu.config_checks`).

    Raises:
        ValueError: naming the key.
    """
    weight_sync_bucket_bytes(config)


def check_verl_settings(config: DictConfig) -> None:
    """Every check of verl's own keys the driver makes before Ray, in this order: :func:`check_verl_compat`,
    :func:`check_trainer_schedule`, :func:`check_checkpoint_engine`, :func:`check_data_subset`.

    verl's ``validate_config`` is :func:`validate_verl_config` (it builds verl's config dataclasses, so it comes last).

    Raises:
        ValueError: the first refusal, naming the key.
    """
    check_verl_compat(config)
    check_trainer_schedule(config)
    check_checkpoint_engine(config)
    check_data_subset(config)


#: verl's model config, which loads the model's HF config from ``model.path`` when verl builds the critic's config
_HF_MODEL_CONFIG = "HFModelConfig"


def validate_verl_config(config: DictConfig) -> None:
    """verl's own ``validate_config``, its asserts turned into ``ValueError``.

    A model that is not local here (a hub name or a cluster path) cannot be loaded by the critic's ``HFModelConfig``:
    that failure alone is logged and skipped, since the model may exist where the run trains.

    Raises:
        ValueError: ``verl validate_config: <verl's message>``.
    """
    from hydra.errors import InstantiationException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
    except (AssertionError, InstantiationException) as exc:
        model_paths = [config.actor_rollout_ref.model.get("path", None), config.critic.get("model", {}).get("path")]
        if _HF_MODEL_CONFIG in str(exc) and any(p and not local_path_exists(str(p)) for p in model_paths):
            # the critic's model config loads the HF config from the path, which may only exist on the cluster
            logger.warning(
                "validate_config could not load a model that is not local here (%s); skipped: %s", model_paths, exc
            )
        else:
            # verl validates with asserts (some inside its config dataclasses); a config error should read as one
            raise ValueError(f"verl validate_config: {exc}") from exc


def train_files(config: DictConfig) -> list[str]:
    """``data.train_files`` as a list of paths."""
    files = config.data.get("train_files", None)
    if isinstance(files, DictConfig | ListConfig):
        files = OmegaConf.to_container(files, resolve=True)
    if files is None:
        return []
    return [files] if isinstance(files, str) else [str(f) for f in files]


def local_path_exists(path: str) -> bool:
    """True for an existing local path; remote URIs (``hdfs://``, ``s3://``) count as not local."""
    return "://" not in path and os.path.exists(os.path.expanduser(path))


def check_data_subset(config: DictConfig) -> None:
    """Refuse a random ``data.train_max_samples`` subset that each process would draw differently.

    verl draws the subset with ``np.random.default_rng(data.seed)``; with ``data.seed: null`` (verl's default) every
    process, and every restart, draws another subset, so the task pool of a resumed run never matches its checkpoint.

    Raises:
        ValueError: for ``train_max_samples > 0`` with ``shuffle`` on and no ``data.seed``.
    """
    max_samples = config.data.get("train_max_samples", -1)
    if max_samples is not None and max_samples > 0 and config.data.get("shuffle", True):
        if config.data.get("seed", None) is None:
            raise ValueError(
                f"data.train_max_samples={max_samples} with data.shuffle=true and data.seed=null draws a different "
                "random subset in every process and on every restart (a resume would be refused); set data.seed, "
                "e.g. data.seed=42, or data.shuffle=false for the first rows"
            )


def dapo_enabled(config: DictConfig) -> bool:
    """Whether verl's dynamic sampling (DAPO, ``algorithm.filter_groups.enable``) is on: the one place that decides."""
    filter_groups = config.algorithm.get("filter_groups", None)
    return bool(filter_groups is not None and filter_groups.get("enable", False))


def warn_verl_settings(config: DictConfig) -> None:
    """Log the verl settings a BOTS run accepts but that may not be what was meant: DAPO's dynamic sampling, fewer
    than two rollouts per task, and a model path that is not here (fine if the cluster has it)."""
    if dapo_enabled(config):
        logger.warning(
            "algorithm.filter_groups.enable=true with BOTS: groups evicted by DAPO are still fed to the posterior "
            "(BOTSReplayBuffer), but verl then draws prompts one at a time; see bots_verl/integration/README.md"
        )
    if config.actor_rollout_ref.rollout.n < 2:
        logger.warning(
            "actor_rollout_ref.rollout.n=%s: BOTS' evidence needs several rollouts per task (paper: %d)",
            config.actor_rollout_ref.rollout.n,
            ROLLOUTS_PER_TASK,
        )
    model_path = config.actor_rollout_ref.model.get("path", None)
    if model_path and not local_path_exists(str(model_path)):
        logger.warning("actor_rollout_ref.model.path=%s is not a local path (fine if the cluster has it)", model_path)
