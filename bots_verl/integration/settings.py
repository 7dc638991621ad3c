"""The ``bots:`` config section: parsing, validation and the dry-run checks.

Everything here runs without Ray, TransferQueue or a GPU, so ``python -m bots_verl.main ... bots.dry_run=true`` can
check a launch script's config on a laptop. Malformed config is a ``ValueError`` naming the key; paths that only
exist on the cluster (model, parquet files) are a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from omegaconf import DictConfig, ListConfig, OmegaConf

from bots_verl.core import ROLLOUT_ALLOCATIONS, SELECTORS, build_selector
from bots_verl.integration.safety.fingerprint import ACCEPTABLE
from bots_verl.rewards.success import SUCCESS_RULES
from bots_verl.runlog import METHODS, MethodSpec, method_spec

logger = logging.getLogger(__name__)

__all__ = [
    "SUCCESS_RULES",
    "TRAINER_MODES",
    "BOTSSettings",
    "check_data_subset",
    "check_verl_compat",
    "dapo_enabled",
    "effective_hparams",
    "parse_bots_config",
    "replay_poll_interval",
    "resolve_method_label",
    "rollout_allocation",
    "train_files",
]


# verl 0.9.1's V1 trainer modes BOTS runs in: the sync trainer (BOTSTrainer) and the two asynchronous ones, whose
# evidence is weighed by its age and whose in-flight tasks sit out selection
# (bots_verl.integration.hooks.async_trainer).
TRAINER_MODES = ("sync", "colocate_async", "separate_async")


@dataclasses.dataclass(frozen=True)
class BOTSSettings:
    """The validated ``bots:`` section.

    Attributes:
        selector: registered selector name.
        hparams: selector hyperparameters (plain dict).
        seed: seed of the selector's generator.
        reference_columns: reference pass-rate columns of the train parquet, weak -> strong.
        task_id_field: ``extra_info.<key>`` or a top-level column holding a stable unique task id.
        success_rule: one of :data:`SUCCESS_RULES`.
        success_threshold: threshold of the ``auto`` and ``threshold`` rules.
        actor_name: name of the posterior actor.
        actor_namespace: Ray namespace of the posterior actor.
        run_log_dir: run directory, or None.
        run_id: run id for ``meta.json``.
        domain: domain for ``meta.json``.
        method: method for ``meta.json``.
        dry_run: validate and exit.
        accept_changed: what a resume may find changed since the checkpoint
            (:data:`~bots_verl.integration.safety.fingerprint.ACCEPTABLE`).
        dapo: verl's dynamic sampling (``algorithm.filter_groups.enable``) is on (:func:`dapo_enabled`).
        replay_poll_interval: seconds between the replay buffer's TransferQueue polls, or None for verl's own
            (:func:`replay_poll_interval`).
        rollout_allocation: ``(mode, {min_n, max_factor})`` of ``bots.rollout_allocation``
            (:func:`rollout_allocation`); ``uniform`` gives every task ``rollout.n``.
    """

    selector: str
    hparams: dict[str, Any]
    seed: int
    reference_columns: tuple[str, ...]
    task_id_field: str
    success_rule: str
    success_threshold: float
    actor_name: str
    actor_namespace: str
    run_log_dir: str | None
    run_id: str | None
    domain: str | None
    method: str
    dry_run: bool
    accept_changed: tuple[str, ...] = ()
    dapo: bool = False
    replay_poll_interval: float | None = None
    rollout_allocation: tuple[str, dict[str, Any]] = ("uniform", {})

    @property
    def task_id_path(self) -> tuple[str, ...]:
        """``task_id_field`` split on dots, e.g. ``("extra_info", "index")``."""
        return tuple(self.task_id_field.split("."))


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def parse_bots_config(config: DictConfig, *, check_hparams: bool = True) -> BOTSSettings:
    """Validate the ``bots:`` section of a composed config and return it as :class:`BOTSSettings`.

    Args:
        config: the full composed trainer config (needs ``bots``, ``data`` and ``trainer``).
        check_hparams: build the selector on a 2-task dummy pool to check the name and hyperparameters.

    Returns:
        The validated settings.

    Raises:
        ValueError: naming the offending key, for any malformed value.
    """
    bots = config.get("bots", None)
    if bots is None:
        raise ValueError("config has no 'bots' section; launch with --config-name bots_trainer (bots_verl.main)")
    selector = bots.get("selector", None)
    if not isinstance(selector, str) or selector not in SELECTORS:
        raise ValueError(f"bots.selector={selector!r} is not a registered selector; known: {sorted(SELECTORS)}")
    hparams = _plain(bots.get("hparams", None)) or {}
    if not isinstance(hparams, Mapping):
        raise ValueError(f"bots.hparams must be a mapping, got {hparams!r}")
    hparams = dict(hparams)

    seed = bots.get("seed", None)
    if seed is None:
        seed = config.data.get("seed", None)
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"bots.seed (or data.seed) must be a non-negative integer, got {seed!r}")

    refs = _plain(bots.get("reference_columns", None)) or []
    if isinstance(refs, str) or not isinstance(refs, list) or not all(isinstance(c, str) and c for c in refs):
        raise ValueError(f"bots.reference_columns must be a list of column names, got {refs!r}")
    if len(set(refs)) != len(refs):
        raise ValueError(f"bots.reference_columns has duplicates: {refs}")

    task_id_field = bots.get("task_id_field", None)
    if not isinstance(task_id_field, str) or not task_id_field or any(not p for p in task_id_field.split(".")):
        raise ValueError(f"bots.task_id_field must be a column or 'column.key' path, got {task_id_field!r}")

    success = bots.get("success", None) or {}
    rule = success.get("rule", "auto")
    if rule not in SUCCESS_RULES:
        raise ValueError(f"bots.success.rule={rule!r} is not one of {SUCCESS_RULES}")
    threshold = success.get("threshold", 0.0)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
        raise ValueError(f"bots.success.threshold must be a finite number, got {threshold!r}")

    actor = bots.get("actor", None) or {}
    project = config.trainer.get("project_name", "verl")
    experiment = config.trainer.get("experiment_name", "run")
    actor_name = actor.get("name", None) or f"bots_posterior_{project}_{experiment}"
    namespace = actor.get("namespace", None) or "bots"

    run_log = bots.get("run_log", None) or {}
    dry_run = bots.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ValueError(f"bots.dry_run must be true or false, got {dry_run!r}")

    resume = bots.get("resume", None) or {}
    accept = _plain(resume.get("accept_changed", None)) or []
    if isinstance(accept, str) or not isinstance(accept, list) or any(a not in ACCEPTABLE for a in accept):
        known = ", ".join(f"{k} ({v})" for k, v in ACCEPTABLE.items())
        raise ValueError(f"bots.resume.accept_changed must be a list of: {known}; got {accept!r}")

    if check_hparams:
        # A 2-task pool with neutral reference columns checks the name, every hyperparameter and the reference
        # requirements (offline_easy2hard, bots_plus, implicit_only) without the dataset.
        dummy_ref = np.full((2, len(refs)), 0.5) if refs else None
        try:
            build_selector(selector, 2, reference_pass_rates=dummy_ref, seed=seed, **hparams)
        except (TypeError, ValueError) as exc:
            hint = " (set bots.reference_columns)" if not refs and "reference" in str(exc) else ""
            raise ValueError(f"bots.selector={selector!r} with bots.hparams={hparams}: {exc}{hint}") from exc

    return BOTSSettings(
        selector=selector,
        hparams=hparams,
        seed=int(seed),
        reference_columns=tuple(refs),
        task_id_field=task_id_field,
        success_rule=rule,
        success_threshold=float(threshold),
        actor_name=str(actor_name),
        actor_namespace=str(namespace),
        run_log_dir=run_log.get("dir", None),
        run_id=run_log.get("run_id", None) or str(experiment),
        domain=run_log.get("domain", None),
        method=resolve_method_label(run_log.get("method", None), selector, hparams, len(refs), int(seed))
        if check_hparams
        else run_log.get("method", None) or selector,
        dry_run=dry_run,
        accept_changed=tuple(accept),
        dapo=dapo_enabled(config),
        replay_poll_interval=replay_poll_interval(config),
        rollout_allocation=rollout_allocation(config, selector, hparams, len(refs), int(seed)),
    )


def effective_hparams(selector: str, hparams: Mapping[str, Any], num_references: int, seed: int = 0) -> dict[str, Any]:
    """Every hyperparameter ``selector`` runs with: ``hparams`` over its defaults (and its evidence plug-in's).

    Built on a 2-task dummy pool with neutral reference columns, like the check in :func:`parse_bots_config`.

    Raises:
        ValueError: for an unknown selector or hyperparameter.
    """
    dummy_ref = np.full((2, num_references), 0.5) if num_references else None
    return dict(build_selector(selector, 2, reference_pass_rates=dummy_ref, seed=seed, **hparams).hparams)


def _differences(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (expected, actual)}`` for the keys whose values differ (numbers compared with a tolerance)."""

    def same(a: Any, b: Any) -> bool:
        numbers = (int, float)
        if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        return a == b

    keys = sorted(set(expected) | set(actual))
    return {k: (expected.get(k), actual.get(k)) for k in keys if not same(expected.get(k), actual.get(k))}


def resolve_method_label(
    label: str | None, selector: str, hparams: Mapping[str, Any], num_references: int, seed: int = 0
) -> str:
    """The ``method`` for ``meta.json``, checked against the selector and hyperparameters the run actually uses.

    A label with a meaning (:func:`bots_verl.runlog.method_spec`: the paper's methods, ``bots_rho<x>``,
    ``bots_lambda<x>``, ``bots_greedy``; or a registered selector's name, meaning that selector at its defaults) must
    describe the config exactly, so appending ``bots.selector=implicit_only`` to a BOTS recipe cannot run one thing
    and log another. A free-form label (``my_run``) claims nothing and is kept. Without a label the first matching
    known label is used, else ``<selector>`` followed by the hyperparameters that differ from its defaults.

    Args:
        label: ``bots.run_log.method`` (None: derive it).
        selector: ``bots.selector``.
        hparams: ``bots.hparams`` as given.
        num_references: how many reference columns the run has (some selectors need them).
        seed: the selector seed (irrelevant to the hyperparameters; passed for the dummy build).

    Raises:
        ValueError: if a meaningful label disagrees with the config (the message lists the differences).
    """
    actual = effective_hparams(selector, hparams, num_references, seed)

    def matches(spec: MethodSpec) -> dict[str, tuple[Any, Any]] | None:
        """None if ``spec`` describes this run, else its differences (``selector`` included)."""
        diff = {"selector": (spec.selector, selector)} if spec.selector != selector else {}
        if not diff:
            diff = _differences(effective_hparams(spec.selector, spec.hparams, num_references, seed), actual)
        return diff or None

    if label is None:
        candidates = [*METHODS.values(), MethodSpec(selector, selector, selector)]
        for key, prefix in (("rho", "bots_rho"), ("lam", "bots_lambda")):
            if key in actual:
                candidates.append(method_spec(f"{prefix}{actual[key]:g}"))
        for spec in candidates:
            if matches(spec) is None:
                return spec.label
        defaults = effective_hparams(selector, {}, num_references, seed)
        changed = _differences(defaults, actual)
        return selector + "+" + ",".join(f"{k}={v[1]}" for k, v in changed.items())
    spec = method_spec(label)
    if spec is None and label in SELECTORS:
        spec = MethodSpec(label, label, label)
    if spec is None:
        logger.info("bots.run_log.method=%r is a free-form label; meta.json records the selector and hparams", label)
        return label
    diff = matches(spec)
    if diff:
        shown = ", ".join(f"{k}: label means {e!r}, config has {a!r}" for k, (e, a) in diff.items())
        raise ValueError(
            f"bots.run_log.method={label!r} ({spec.display}: selector {spec.selector!r} with {dict(spec.hparams)}) "
            f"does not describe this run ({shown}). Run the recipe made for the config you want, set "
            "bots.run_log.method to a label that matches, or drop it to have it derived."
        )
    return label


def check_verl_compat(config: DictConfig) -> None:
    """Check the verl settings BOTS depends on.

    Raises:
        ValueError: if ``data.dataloader_num_workers`` is not 0, the V1 trainer is off, the mode is not one of
            :data:`TRAINER_MODES`, or verl's rollout skip for the V1 trainer (``skip.rollout_tq``) is on.
    """
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
            "pool; use nccl, nixl or mooncake"
        )
    if problems:
        raise ValueError("trainer.v1.trainer_mode=separate_async: " + "; ".join(problems))


def train_files(config: DictConfig) -> list[str]:
    """``data.train_files`` as a list of paths."""
    files = _plain(config.data.get("train_files", None))
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


def replay_poll_interval(config: DictConfig) -> float | None:
    """``bots.replay_poll_interval``: seconds between the replay buffer's TransferQueue polls.

    ``null`` (``bots_trainer.yaml``) keeps verl's own interval; the CPU backend's settings
    (``bots_verl/config/cpu_backend.yaml``) shorten it, since its steps take seconds and a run waits for the poll.

    Raises:
        ValueError: unless null or a positive finite number.
    """
    value = config.bots.get("replay_poll_interval", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"bots.replay_poll_interval must be a positive number of seconds or null, got {value!r}")
    return float(value)


def rollout_allocation(
    config: DictConfig, selector: str, hparams: Mapping[str, Any], num_references: int, seed: int = 0
) -> tuple[str, dict[str, Any]]:
    """``bots.rollout_allocation``: how the step's ``train_batch_size * rollout.n`` rollouts are split per task.

    ``uniform`` (the default) leaves verl's ``rollout.n`` per task; ``posterior`` splits the budget by the selector's
    Beta posterior (:mod:`bots_verl.core.allocation`), so it needs a Beta selector, and it runs in the sync trainer
    only (the asynchronous trainers' refills are not allocated).

    Returns:
        ``(mode, {"min_n": ..., "max_factor": ...})``.

    Raises:
        ValueError: naming the key, for an unknown mode, a selector without a Beta posterior, an asynchronous trainer
            mode, or parameters the rule refuses for this ``rollout.n``.
    """
    section = config.bots.get("rollout_allocation", None) or {}
    mode = section.get("mode", "uniform")
    if mode not in ROLLOUT_ALLOCATIONS:
        raise ValueError(f"bots.rollout_allocation.mode={mode!r} is not one of {sorted(ROLLOUT_ALLOCATIONS)}")
    params = {"min_n": section.get("min_n", 2), "max_factor": section.get("max_factor", 4.0)}
    if mode == "uniform":
        return mode, params
    dummy_ref = np.full((2, num_references), 0.5) if num_references else None
    built = build_selector(selector, 2, reference_pass_rates=dummy_ref, seed=seed, **hparams)
    if not (hasattr(built, "alpha") and hasattr(built, "beta")):
        raise ValueError(f"bots.rollout_allocation.mode={mode!r} reads a Beta posterior; {selector!r} has none")
    trainer_mode = config.trainer.v1.get("trainer_mode", "sync")
    if trainer_mode != "sync":
        raise ValueError(f"bots.rollout_allocation.mode={mode!r} runs in the sync trainer only, not {trainer_mode!r}")
    n = config.actor_rollout_ref.rollout.get("n", 1)
    try:
        ROLLOUT_ALLOCATIONS[mode](np.ones(2), np.ones(2), 2 * int(n), **params)
    except ValueError as exc:
        raise ValueError(f"bots.rollout_allocation ({mode}, rollout.n={n}): {exc}") from exc
    return mode, params
