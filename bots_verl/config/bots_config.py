"""The ``bots:`` config section as a structured dataclass, in verl's convention (``BaseConfig``).

``bots_verl/config/bots_trainer.yaml`` holds the section with a comment above each field; :class:`BOTSConfig` is the
same section as types. :func:`read_bots_config` converts ``config.bots`` with verl's ``omega_conf_to_dataclass``, so
OmegaConf checks the types and refuses unknown keys (``+bots.sed=1``), and each dataclass's ``__post_init__`` checks
the values a field may take. Both name the offending key (``bots.seed: ...``). Defaults that another section supplies
are filled in first: ``seed`` from ``data.seed`` (else 0), ``actor.name`` from the trainer's project and experiment
names, ``run_log.run_id`` from the experiment name.

Hyperparameters: the yaml declares the paper's (``lam``, ``rho``, ``target``, ``evidence``, ``selection``, ``alpha0``,
``beta0``; :data:`bots_verl.core.defaults.PAPER_BOTS`) under ``bots.hparams``, each ``null`` with the paper's value in
its comment. ``null`` means "the selector's own default": :class:`BOTSConfig` drops a declared key left ``null``, so
``bots.hparams`` holds only what the user set, and every selector runs with its own defaults for the rest
(``bots.selector=mopps`` keeps ``rho = 0``; BOTS' values are never applied to another selector). Declared values rather
than ``null`` could not tell "not set" from "set to the paper's value" (``mopps`` with an explicit ``rho=0.1`` would
run silently with ``rho = 0``), and hydra's ``+bots.hparams.lam=...`` would stop working. A set key overrides
(``bots.hparams.lam=0.3``, or with ``+`` as before); undeclared ones are added with ``+`` (``+bots.hparams.gamma=0.8``).
The defaults a selector fills in are read from its registry entry's declared tables
(:meth:`~bots_verl.core.selector_base.Selector.effective_hparams`; the paper's values come from
:mod:`bots_verl.core.defaults`).

The rules that tie fields to each other, or to the selector registry, are checked once, by the driver, which resolves
the section into the run's settings (:func:`bots_verl.config.settings.resolve_settings`, called by
``bots_verl.main.check_config``); the trainer, in its Ray process, gets those settings from the driver and reads no
yaml.

Everything here runs without Ray, TransferQueue or a GPU (the dry run, ``bots.dry_run=true``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from verl.base_config import BaseConfig
from verl.utils.config import omega_conf_to_dataclass

from bots_verl.core import SELECTORS, defaults
from bots_verl.rewards.success import SUCCESS_RULES

logger = logging.getLogger(__name__)

__all__ = [
    "ACCEPTABLE",
    "ActorConfig",
    "BOTSConfig",
    "GpuMemoryConfig",
    "ResumeConfig",
    "RunLogConfig",
    "SuccessConfig",
    "read_bots_config",
]

#: ``bots.resume.accept_changed`` values -> what each accepts (:mod:`bots_verl.integration.safety.fingerprint`).
ACCEPTABLE: dict[str, str] = {
    "pool": "the same task ids in the same order with other prompts (regenerated data)",
    "reference_columns": "other reference column names or values",
    "hparams": "other selector hyperparameters (they apply from the resumed step on)",
    "task_embeddings": "another bots.task_embeddings file (another similarity graph from the resumed step on)",
    "missing_fingerprint": "a checkpoint written before fingerprints, whose meaning cannot be checked",
    "success": "another bots.success rule or threshold (rollouts count as successes by it from the resumed step on)",
    # verl's settings, recorded in the run folder (bots_verl.integration.safety.training_record); training.<key>: one
    "training": "other training settings (data, model, actor, rollout sampling, reward, algorithm), or "
    "training.<verl key> for one of them (they apply from the resumed step on)",
}


@dataclass
class SuccessConfig(BaseConfig):
    """``bots.success``: how a rollout's reward becomes a success in [0, 1].

    Attributes:
        rule: one of :data:`~bots_verl.rewards.success.SUCCESS_RULES`.
        threshold: the score threshold of the ``auto`` and ``threshold`` rules.
    """

    rule: str = "auto"
    threshold: float = 0.0

    def __post_init__(self) -> None:
        if self.rule not in SUCCESS_RULES:
            raise ValueError(f"bots.success.rule={self.rule!r} is not one of {SUCCESS_RULES}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"bots.success.threshold must be a finite number, got {self.threshold!r}")


#: Ray's own resources, which ``bots.actor.node_resource`` must not name (the actor reserves no CPU or GPU)
RESERVED_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def check_node_resource(node_resource: str | None) -> None:
    """Refuse a ``bots.actor.node_resource`` that cannot name a custom node resource (no Ray needed).

    Raises:
        ValueError: an empty name, or one of Ray's own resources (:data:`RESERVED_RESOURCES`).
    """
    if node_resource is None:
        return
    if not isinstance(node_resource, str) or not node_resource.strip():
        raise ValueError(f"bots.actor.node_resource must be null or a resource name, got {node_resource!r}")
    if node_resource in RESERVED_RESOURCES:
        raise ValueError(
            f"bots.actor.node_resource={node_resource!r} is one of Ray's own resources {RESERVED_RESOURCES}; name a "
            "custom resource declared on one node (ray start --resources '{\"bots_posterior\": 1}'), "
            "node:__internal_head__ for the head node, or null for the task runner's node"
        )


@dataclass
class ActorConfig(BaseConfig):
    """``bots.actor``: the named Ray actor that serves the selector.

    Attributes:
        name: actor name; None until :func:`read_bots_config` derives it from the trainer's names.
        namespace: Ray namespace, so that any process can ``ray.get_actor(name, namespace=...)``.
        node_resource: where the actor runs: None on verl's task runner's node, else on the node that declares this
            custom Ray resource (:mod:`bots_verl.integration.transport.placement`).
    """

    name: str | None = None
    namespace: str = "bots"
    node_resource: str | None = None

    def __post_init__(self) -> None:
        check_node_resource(self.node_resource)


@dataclass
class RunLogConfig(BaseConfig):
    """``bots.run_log``: the run directory (``meta.json`` by the driver, ``metrics.jsonl`` by verl's file logger).

    Attributes:
        dir: run directory; None disables the run log.
        run_id: run id in ``meta.json``; None until :func:`read_bots_config` takes the experiment name.
        domain: task domain in ``meta.json``.
        method: method label in ``meta.json`` (:data:`bots_verl.runlog.METHODS`, a selector name, or free text);
            None: derived by :func:`~bots_verl.config.settings.resolve_settings`.
    """

    dir: str | None = None
    run_id: str | None = None
    domain: str | None = None
    method: str | None = None


@dataclass
class GpuMemoryConfig(BaseConfig):
    """``bots.gpu_memory``: the check that refuses a layout whose actor cannot fit its GPUs
    (:mod:`bots_verl.config.gpu_memory`).

    Attributes:
        check: refuse such a layout before Ray; False: warn and start anyway.
        card_gib: memory of one GPU in GiB; None: nvidia-smi's where a GPU is visible, else 80.
    """

    check: bool = True
    card_gib: float | None = None

    def __post_init__(self) -> None:
        if self.card_gib is not None and not (math.isfinite(self.card_gib) and self.card_gib > 0):
            raise ValueError(f"bots.gpu_memory.card_gib must be a positive number (GiB) or null, got {self.card_gib!r}")


@dataclass
class ResumeConfig(BaseConfig):
    """``bots.resume``: what a resume may find changed since its checkpoint.

    Attributes:
        accept_changed: values of :data:`ACCEPTABLE`.
    """

    accept_changed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if any(a not in ACCEPTABLE and not (a.startswith("training.") and len(a) > 9) for a in self.accept_changed):
            known = ", ".join(f"{k} ({v})" for k, v in ACCEPTABLE.items())
            raise ValueError(f"bots.resume.accept_changed must be a list of: {known}; got {self.accept_changed!r}")


@dataclass
class BOTSConfig(BaseConfig):
    """The ``bots:`` section (one field per key of ``bots_trainer.yaml``, documented there).

    Attributes:
        selector: registered selector name (``bots_verl.core.SELECTORS``).
        hparams: selector hyperparameters over the selector's defaults; a declared key (the yaml's, those of
            :data:`~bots_verl.core.defaults.PAPER_BOTS`) left None is dropped: the selector's default applies.
        seed: seed of the selector's generator; None until :func:`read_bots_config` fills in ``data.seed``.
        reference_columns: reference pass-rate columns of the train parquet, weak -> strong.
        task_id_field: ``extra_info.<key>`` or a top-level column holding a stable unique task id.
        task_embeddings: an embedding file of the pool (``python -m reference_eval embed``) for the task-similarity
            graph; "" (or null): none.
        success: :class:`SuccessConfig`.
        actor: :class:`ActorConfig`.
        run_log: :class:`RunLogConfig`.
        resume: :class:`ResumeConfig`.
        gpu_memory: :class:`GpuMemoryConfig`.
        replay_poll_interval: seconds between the replay buffer's TransferQueue polls; None keeps verl's.
        dry_run: validate the composed config, print a summary and exit.
    """

    selector: str = defaults.SELECTOR
    hparams: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(defaults.PAPER_BOTS))
    seed: int | None = None
    reference_columns: list[str] = field(default_factory=list)
    task_id_field: str = "extra_info.index"
    task_embeddings: str | None = ""
    success: SuccessConfig = field(default_factory=SuccessConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    run_log: RunLogConfig = field(default_factory=RunLogConfig)
    resume: ResumeConfig = field(default_factory=ResumeConfig)
    gpu_memory: GpuMemoryConfig = field(default_factory=GpuMemoryConfig)
    replay_poll_interval: float | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.selector not in SELECTORS:
            raise ValueError(
                f"bots.selector={self.selector!r} is not a registered selector; known: {sorted(SELECTORS)}"
            )
        # null in the yaml: the selector's own default (emptied in place: BaseConfig fields cannot be reassigned)
        for key in [k for k in defaults.PAPER_BOTS if k in self.hparams and self.hparams[k] is None]:
            del self.hparams[key]
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"bots.seed (or data.seed) must be a non-negative integer, got {self.seed!r}")
        if not all(self.reference_columns):
            raise ValueError(f"bots.reference_columns must be a list of column names, got {self.reference_columns!r}")
        if len(set(self.reference_columns)) != len(self.reference_columns):
            raise ValueError(f"bots.reference_columns has duplicates: {self.reference_columns}")
        if not self.task_id_field or any(not part for part in self.task_id_field.split(".")):
            raise ValueError(f"bots.task_id_field must be a column or 'column.key' path, got {self.task_id_field!r}")
        interval = self.replay_poll_interval
        if interval is not None and not (math.isfinite(interval) and interval > 0):
            raise ValueError(
                f"bots.replay_poll_interval must be a positive number of seconds or null, got {interval!r}"
            )

    @property
    def task_id_path(self) -> tuple[str, ...]:
        """``task_id_field`` split on dots, e.g. ``("extra_info", "index")``."""
        return tuple(self.task_id_field.split("."))

    @property
    def selector_seed(self) -> int:
        """The seed the selector runs with (``seed`` as :func:`read_bots_config` resolved it)."""
        return 0 if self.seed is None else self.seed


def read_bots_config(config: DictConfig) -> BOTSConfig:
    """``config.bots`` as a :class:`BOTSConfig`: types, unknown keys and field values checked, derived defaults filled.

    Args:
        config: the full composed trainer config (reads ``bots``, ``data.seed`` and the trainer's names).

    Returns:
        The section; ``seed``, ``actor.name`` and ``run_log.run_id`` are set.

    Raises:
        ValueError: naming the offending key (``bots.<key>``).
    """
    bots = config.get("bots", None)
    if bots is None:
        raise ValueError("config has no 'bots' section; launch with --config-name bots_trainer (bots_verl.main)")
    section = OmegaConf.to_container(bots, resolve=True)
    if not isinstance(section, dict):
        raise ValueError(f"bots must be a mapping, got {section!r}")
    trainer = config.get("trainer", None) or {}
    experiment = trainer.get("experiment_name", "run")
    if section.get("seed", None) is None:
        seed = (config.get("data", None) or {}).get("seed", None)
        section["seed"] = 0 if seed is None else seed
    actor = section.get("actor", None) or {}
    if actor.get("name", None) is None:
        section["actor"] = {**actor, "name": f"bots_posterior_{trainer.get('project_name', 'verl')}_{experiment}"}
    run_log = section.get("run_log", None) or {}
    if run_log.get("run_id", None) is None:
        section["run_log"] = {**run_log, "run_id": str(experiment)}
    try:
        return omega_conf_to_dataclass(section, BOTSConfig)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ValueError(f"bots.{key}: {str(exc).splitlines()[0]}") from None
