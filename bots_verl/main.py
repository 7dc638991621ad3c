"""Entry point: verl's PPO/GRPO trainer with BOTS task selection.

Usage::

    python -m bots_verl.main data.train_files=train.parquet data.val_files=val.parquet \\
        actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct bots.selector=bots \\
        'bots.reference_columns=[qwen2.5_7b_pass_rate,qwen3_30b_pass_rate]'

    # check a launch script's config without Ray or GPUs:
    python -m bots_verl.main <overrides...> bots.dry_run=true

The config (``bots_verl/config/bots_trainer.yaml``) extends verl's ``ppo_trainer`` with the ``bots:`` section, so any
verl override works unchanged. The launch mirrors ``verl.trainer.main_ppo.main`` but hands ``run_ppo`` our task
runner (:mod:`bots_verl.integration.hooks.task_runner`), which builds
:class:`bots_verl.integration.hooks.trainer.BOTSTrainer`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import hydra
from omegaconf import DictConfig, OmegaConf

# registers the CPU backend's config checks, which check_config runs (bots_verl.config.checks)
import bots_verl.verl_cpu.config_checks  # noqa: F401
from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.checks import run_config_checks
from bots_verl.config.gpu_memory import check_gpu_memory
from bots_verl.config.overrides import overridden_keys
from bots_verl.config.settings import BOTSSettings, resolve_settings
from bots_verl.config.verl_checks import check_verl_settings, train_files, validate_verl_config, warn_verl_settings
from bots_verl.core.settings import DEFAULT, OVERRIDE, YAML
from bots_verl.integration.evidence.pool_checks import check_pool_inputs, check_train_files
from bots_verl.integration.safety.fingerprint import run_fingerprint
from bots_verl.integration.safety.refill_cap import RefillCap, read_refill_cap, refill_sources
from bots_verl.integration.safety.resume import check_resume, resume_folder
from bots_verl.integration.safety.run_lock import check_run_folders_free, hold_run_folders
from bots_verl.integration.safety.training_record import experiment_settings, record_experiment
from bots_verl.integration.safety.verl_pins import check_verl_drift
from bots_verl.verl_cpu import launch

logger = logging.getLogger(__name__)

__all__ = ["check_config", "main", "run"]


def _log_refills(config: DictConfig, cap: RefillCap) -> None:
    """When the run refills a step, what a pool whose groups keep being discarded does to it (the dry run's summary
    says it too): a warning without a cap."""
    if refill_sources(config):
        (logger.info if cap.max_prompts is not None else logger.warning)(
            "refills (%s): %s", ", ".join(refill_sources(config)), cap.describe()
        )


def _driver_fingerprint(settings: BOTSSettings) -> dict:
    """The parts of the run's fingerprint known without the dataset: selector, hyperparameters, success rule,
    reference names.

    ``BOTSTrainer`` compares the whole fingerprint (the pool and the reference values too) once verl built the train
    dataset.
    """
    return run_fingerprint(
        task_ids=None,
        prompts_sha256=None,
        reference_columns=settings.reference_columns,
        reference=None,
        selector=settings.selector.name,
        hparams=dict(settings.selector.effective),
        success_rule=settings.section.success.rule,
        success_threshold=settings.section.success.threshold,
    )


def _check_resume(config: DictConfig, settings: BOTSSettings) -> None:
    """The resume checks the driver can make: BOTS' fingerprint as far as it is known here, the training settings."""
    check_resume(
        config,
        fingerprint=_driver_fingerprint(settings),
        accept=settings.section.resume.accept_changed,
        require_data_pt=False,
        experiment=experiment_settings(config),
    )


def check_config(config: DictConfig, overrides: Sequence[str] = ()) -> BOTSSettings:
    """Every check that needs no Ray and no GPU, each from the layer that owns it: the ``bots:`` section
    (:mod:`bots_verl.config.bots_config`), verl's keys and verl's ``validate_config``
    (:mod:`bots_verl.config.verl_checks`), the refill cap (:mod:`bots_verl.integration.safety.refill_cap`), the
    backends' registered checks (:mod:`bots_verl.config.checks`: the CPU backend's checkpoint engine and known-answer
    script, :mod:`bots_verl.verl_cpu.config_checks`), the GPU memory (:mod:`bots_verl.config.gpu_memory`), the resume
    (:mod:`bots_verl.integration.safety.resume`) and the pool's inputs
    (:mod:`bots_verl.integration.evidence.pool_checks`).

    Paths that may only exist on the cluster (model, data files) give warnings; a local train parquet is checked for
    the task-id and reference columns.

    Args:
        config: the composed config (mutated only by verl's ``auto_set_device``).
        overrides: hydra's task overrides ``config`` was composed with: they tell which hyperparameters the command
            line set and which the yaml (:func:`~bots_verl.config.settings.resolve_settings`).

    Returns:
        The run's BOTS settings, resolved and checked once here (:mod:`bots_verl.config.settings`).

    Raises:
        ValueError: for malformed config (the message names the key), a fresh run in a ``bots.run_log.dir`` that
            holds an earlier run's metrics, or a resume whose ``data.pt`` holds no BOTS posterior or one built for
            another selector, hyperparameters, success rule or reference columns, or whose run folder recorded other
            training settings (:mod:`bots_verl.integration.safety.training_record`; ``bots.resume.accept_changed``
            aside), or a missing or malformed known-answers file (``actor_rollout_ref.rollout.custom.known_answers``),
            or one of the recipes' models on GPUs its actor cannot fit (:mod:`bots_verl.config.gpu_memory`).
    """
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    settings = resolve_settings(read_bots_config(config), overrides)
    bots = settings.section
    check_verl_settings(config)
    _log_refills(config, read_refill_cap(config))  # the cap BOTSTrainer enforces: an integer or refused here
    run_config_checks(config)  # the backends' own (registered when bots_verl.main imports them)
    # a layout whose actor cannot fit its GPUs would load the model and then run out of memory
    check_gpu_memory(config, bots.gpu_memory.card_gib, bots.gpu_memory.check)
    # before meta.json is written or any worker starts; a checkpoint that is not here is left to the trainer
    _check_resume(config, settings)
    validate_verl_config(config)
    warn_verl_settings(config)
    check_train_files(config, settings)
    return settings


def _absolute_run_log_dir(config: DictConfig) -> None:
    """Resolve a relative ``bots.run_log.dir`` once, here: Ray processes may run in another working directory."""
    run_dir = config.bots.run_log.get("dir", None)
    if run_dir and not os.path.isabs(run_dir):
        config.bots.run_log.dir = os.path.abspath(os.path.expanduser(run_dir))


def _summary(config: DictConfig, settings: BOTSSettings) -> str:
    bots = settings.section
    lines = [
        "BOTS dry run: config OK",
        f"  bots.selector={bots.selector} seed={bots.seed}",
        _hparams_line(settings),
        f"  bots.reference_columns={list(bots.reference_columns)} task_id_field={bots.task_id_field}",
        f"  bots.success.rule={bots.success.rule} threshold={bots.success.threshold}",
        f"  bots.actor={bots.actor.namespace}/{bots.actor.name} run_log.dir={bots.run_log.dir}",
        f"  bots.resume.accept_changed={list(bots.resume.accept_changed)}",
        f"  model={config.actor_rollout_ref.model.get('path')} train_files={train_files(config)}",
        f"  train_batch_size={config.data.train_batch_size} rollout.n={config.actor_rollout_ref.rollout.n} "
        f"adv_estimator={config.algorithm.adv_estimator} total_epochs={config.trainer.total_epochs} "
        f"total_training_steps={config.trainer.get('total_training_steps')}",
        f"  trainer.logger={_plain_list(config.trainer.logger)} n_gpus_per_node={config.trainer.n_gpus_per_node} "
        f"nnodes={config.trainer.nnodes}",
        f"  trainer.v1.trainer_mode={config.trainer.v1.trainer_mode}",
    ]
    if refill_sources(config):
        # what a pool whose groups keep being discarded does to a step (bots_verl/integration/safety/refill_cap.py)
        lines.append(f"  refills ({', '.join(refill_sources(config))}): {read_refill_cap(config).describe()}")
    if config.trainer.v1.trainer_mode != "sync":
        # async: evidence weighed by its age, in-flight tasks sit out (bots_verl/integration/hooks/async_trainer.py)
        sampler = config.trainer.v1.sampler
        lines.append(
            f"  async: max_off_policy_threshold={sampler.max_off_policy_threshold} "
            f"({sampler.max_off_policy_strategy}) evidence weighed by its age (the selector's lag weight)"
        )
    return "\n".join(lines)


def _hparams_line(settings: BOTSSettings) -> str:
    """Every hyperparameter the selector runs with, grouped by where its value comes from (the command line's first)."""
    selector = settings.selector
    groups = {OVERRIDE: [], YAML: [], DEFAULT: []}
    for key, source in selector.sources.items():
        groups[source].append(f"{key}={selector.effective[key]}")
    return "  hparams: " + "; ".join(f"{source} {' '.join(items)}" for source, items in groups.items() if items)


def _plain_list(value) -> list:
    value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    return [value] if isinstance(value, str) else list(value or [])


def _prepare_run_log(config: DictConfig, settings: BOTSSettings, resume: dict | None) -> None:
    """Write meta.json and turn on verl's file logger (the task runner points it at the run directory).

    Args:
        config: the checked config.
        settings: its BOTS settings.
        resume: for a resumed run, what :func:`~bots_verl.integration.safety.training_record.record_experiment` recorded
            (the training settings it accepted as changed): added to an existing meta.json's ``extra.resumes``,
            which otherwise stays as the run's start wrote it. None: a fresh start writes meta.json.
    """
    bots = settings.section
    if not bots.run_log.dir:
        return
    from bots_verl.fileio import write_json_atomic
    from bots_verl.runlog import META_FILE, read_meta, write_meta

    loggers = _plain_list(config.trainer.logger)
    if "file" not in loggers:
        # metrics.jsonl of the run log is written by verl's own file backend
        config.trainer.logger = [*loggers, "file"]
    if resume is not None and os.path.isfile(os.path.join(bots.run_log.dir, META_FILE)):
        # meta.json says how the run started; a resume adds what it changed, never rewrites the start
        meta = read_meta(bots.run_log.dir)
        extra = meta.get("extra") if isinstance(meta.get("extra"), dict) else {}
        meta["extra"] = {**extra, "resumes": [*extra.get("resumes", []), resume]}
        write_json_atomic(os.path.join(bots.run_log.dir, META_FILE), meta, sort_keys=True, default=str)
        return
    write_meta(
        bots.run_log.dir,
        run_id=bots.run_log.run_id,
        source="verl",
        domain=bots.run_log.domain,
        model=config.actor_rollout_ref.model.get("path"),
        method=bots.run_log.method,
        seed=settings.selector.seed,
        hparams=dict(settings.selector.hparams),
        total_steps=config.trainer.get("total_training_steps"),
        extra={
            "selector": settings.selector.name,
            # every hyperparameter the selector runs with (defaults included), so a run log says what ran
            "effective_hparams": dict(settings.selector.effective),
            # where each of them comes from: the selector's default, the yaml, or an override on the command line
            "hparam_sources": settings.selector.sources,
            "reference_columns": list(bots.reference_columns),
            # issue 36: tasks with reference values (a labelled subset costs labelled x n x models generations)
            "reference_coverage": check_pool_inputs(train_files(config), settings),
            "task_embeddings": bots.task_embeddings or None,
            "train_batch_size": config.data.train_batch_size,
            "rollout_n": config.actor_rollout_ref.rollout.n,
            "experiment_name": config.trainer.experiment_name,
            # the training settings the run started with (issue 47; the record a resume is checked against)
            "experiment": experiment_settings(config),
        },
    )


def run(config: DictConfig, overrides: Sequence[str] = ()) -> None:
    """Validate ``config`` and the installed verl; on ``bots.dry_run`` print a summary and return, else train.

    Args:
        config: the composed config.
        overrides: the command line's hydra overrides: the run records which hyperparameters they set
            (:func:`check_config`), and with ``trainer.device=cpu`` the keys they set keep their values and the CPU
            backend's settings fill in the rest (:mod:`bots_verl.verl_cpu.launch`).

    Raises:
        VerlDriftError: for a verl other than 0.9.1, a changed pinned verl source or a dependency outside its tested
            range (:func:`~bots_verl.integration.safety.verl_pins.check_verl_drift`), before Ray starts.
        ValueError: for malformed config (:func:`check_config`).
        RunFolderInUse: another live run holds ``trainer.default_local_dir`` or ``bots.run_log.dir``
            (:mod:`bots_verl.integration.safety.run_lock`), before Ray starts.
    """
    cpu_settings = None
    if launch.uses_cpu_backend(config):
        # the CPU backend must be active before anything imports verl's platform-dependent modules
        cpu_settings = launch.prepare(config, overridden_keys(overrides))
    # Then, before any check and before Ray: on another verl the checks below, and the run, would rest on code that
    # is no longer there (the drift check imports the pinned verl modules).
    check_verl_drift()
    _absolute_run_log_dir(config)
    settings = check_config(config, overrides)
    if settings.section.dry_run:
        check_run_folders_free(config)
        print(_summary(config, settings))
        if cpu_settings is not None:
            print(f"  CPU backend (bots_verl.verl_cpu) set: {' '.join(cpu_settings) or 'nothing (all given)'}")
        return

    from verl.trainer.main_ppo import run_ppo

    from bots_verl.integration.hooks.task_runner import task_runner_with

    locks = hold_run_folders(config)
    try:
        # checked again under the lock: a run that held the folder until now may have saved a checkpoint since
        _check_resume(config, settings)
        resumed_from = resume_folder(config)
        entry = record_experiment(config, experiment_settings(config), resumed_from)
        _prepare_run_log(config, settings, entry if resumed_from else None)
        run_ppo(config, task_runner_class=task_runner_with(settings))
    finally:
        for lock in locks:
            lock.release()


@hydra.main(config_path="config", config_name="bots_trainer", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point (``python -m bots_verl.main``)."""
    from hydra.core.hydra_config import HydraConfig

    run(config, overrides=list(HydraConfig.get().overrides.task))


if __name__ == "__main__":
    main()
