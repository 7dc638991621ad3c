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

from bots_verl.core import SELECTORS, build_selector
from bots_verl.rewards.success import SUCCESS_RULES

logger = logging.getLogger(__name__)

__all__ = [
    "SUCCESS_RULES",
    "BOTSSettings",
    "check_data_subset",
    "check_verl_compat",
    "parse_bots_config",
    "replay_poll_interval",
    "train_files",
]


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

    if check_hparams:
        # A 2-task pool with neutral reference columns checks the name, every hyperparameter and the reference
        # requirements (offline_easy2hard, prior=reference, prior_column) without the dataset.
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
        method=run_log.get("method", None) or selector,
        dry_run=dry_run,
    )


def check_verl_compat(config: DictConfig) -> None:
    """Check the verl settings BOTS depends on.

    Raises:
        ValueError: if ``data.dataloader_num_workers`` is not 0, the V1 trainer is off, or the mode is not ``sync``.
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
    if mode != "sync":
        raise ValueError(f"trainer.v1.trainer_mode={mode!r}: BOTS supports the 'sync' mode only")


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


def replay_poll_interval(config: DictConfig) -> float:
    """``bots.replay_poll_interval``: seconds between the replay buffer's TransferQueue polls.

    Raises:
        ValueError: unless a positive finite number.
    """
    value = config.bots.get("replay_poll_interval", 2.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"bots.replay_poll_interval must be a positive number of seconds, got {value!r}")
    return float(value)
