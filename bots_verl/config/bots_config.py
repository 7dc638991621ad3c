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
:mod:`bots_verl.core.defaults`): :func:`effective_hparams` builds nothing.

The rules that tie fields to each other, or to the selector registry and the rest of verl's config, are checked by
hand, once, by the driver (:func:`check_bots_config`, called by ``bots_verl.main.check_config``): the selector knows
every hyperparameter name and accepts the values, reference columns and embeddings, and ``bots.run_log.method``
describes the selector it labels. The trainer, in its Ray process, only reads the section (:func:`read_bots_config`).

Everything here runs without Ray, TransferQueue or a GPU (the dry run, ``bots.dry_run=true``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from verl.base_config import BaseConfig
from verl.utils.config import omega_conf_to_dataclass

from bots_verl.core import SELECTORS, build_selector, defaults
from bots_verl.core.ours.pass_rate_oracle import PassRateOracleSelector, load_truth_factory
from bots_verl.rewards.success import SUCCESS_RULES
from bots_verl.runlog import METHODS, MethodSpec, method_spec

logger = logging.getLogger(__name__)

__all__ = [
    "ACCEPTABLE",
    "ActorConfig",
    "BOTSConfig",
    "GpuMemoryConfig",
    "ResumeConfig",
    "RunLogConfig",
    "SuccessConfig",
    "check_bots_config",
    "effective_hparams",
    "read_bots_config",
    "resolve_method_label",
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
            None: derived by :func:`check_bots_config`.
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


def check_bots_config(config: DictConfig, bots: BOTSConfig) -> BOTSConfig:
    """The rules that tie ``bots:`` fields to each other and to verl's config; run once, by the driver.

    - the selector knows every name in ``hparams`` (its declared tables, :func:`effective_hparams`), and accepts
      their values, the seed and as many reference columns as given (:func:`_check_values`);
    - ``pass_rate_oracle`` has a ``truth_source`` that loads (nothing else gives it the truth in a verl run);
    - ``run_log.method``, when it names a method, describes exactly this selector and these hyperparameters
      (:func:`resolve_method_label`); when null it is derived.

    Args:
        config: the full composed trainer config.
        bots: :func:`read_bots_config` of it.

    Returns:
        ``bots`` with ``run_log.method`` resolved.

    Raises:
        ValueError: naming the keys involved.
    """
    refs = len(bots.reference_columns)
    try:
        effective = effective_hparams(bots.selector, bots.hparams)
        _check_values(bots.selector, bots.hparams, refs, bots.selector_seed, bool(bots.task_embeddings))
    except (TypeError, ValueError) as exc:
        hint = " (set bots.reference_columns)" if not refs and "reference" in str(exc) else ""
        if not bots.task_embeddings and "embedding" in str(exc):
            hint = " (set bots.task_embeddings to the pool's embedding file: python -m reference_eval embed)"
        raise ValueError(f"bots.selector={bots.selector!r} with bots.hparams={bots.hparams}: {exc}{hint}") from exc
    if issubclass(SELECTORS.lookup(bots.selector), PassRateOracleSelector):
        _check_truth_source(effective["truth_source"])
    method = resolve_method_label(bots.run_log.method, bots.selector, bots.hparams)
    return dataclasses.replace(bots, run_log=dataclasses.replace(bots.run_log, method=method))


def _check_truth_source(spec: str) -> None:
    """The oracle reads the true pass rates from ``truth_source`` in a verl run: nothing calls its ``observe_truth``.

    Raises:
        ValueError: when it is not set or does not load
            (:func:`~bots_verl.core.ours.pass_rate_oracle.load_truth_factory`).
    """
    need = (
        "pass_rate_oracle in a verl run reads the true pass rates from a truth source, "
        "+bots.hparams.truth_source='package.module:factory' (a factory(num_tasks, **truth_args) returning a callable "
        "that gives the pass rates; the toy's is bots_verl.toy.rollout_truth:RolloutServerTruth)"
    )
    if not spec:
        raise ValueError(f"bots.hparams.truth_source is not set: {need}")
    try:
        load_truth_factory(spec)
    except ValueError as exc:
        raise ValueError(f"bots.hparams.{exc}: {need}") from exc


def _check_values(selector: str, hparams: Mapping[str, Any], num_references: int, seed: int, embeddings: bool) -> None:
    """``selector`` built once on a stand-in pool with neutral reference columns, so that every check its constructor
    makes (value ranges, the selection rule's parameters, what needs reference columns or task embeddings) runs
    before Ray starts; the values themselves are checked where they are used, not restated here.

    With ``embeddings`` the pool has task embeddings too (``bots.task_embeddings``; one more task than ``graph_k``
    neighbours).
    """
    size = 2
    extra: dict[str, Any] = {}
    if embeddings:
        k = hparams.get("graph_k", 16)
        size = max(size, k + 1) if isinstance(k, int) and not isinstance(k, bool) and 0 < k < 4096 else 17
        extra["task_embeddings"] = np.eye(size, dtype=np.float32) + 0.5
    dummy_ref = np.full((size, num_references), 0.5) if num_references else None
    build_selector(selector, size, reference_pass_rates=dummy_ref, seed=seed, **extra, **hparams)


def effective_hparams(selector: str, hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Every hyperparameter ``selector`` runs with: ``hparams`` over its declared defaults (and its evidence plug-in's
    and selection rule's), read from its registry entry without building it.

    Raises:
        ValueError: for an unknown selector, or a hyperparameter it does not know (named), retired or refuses.
    """
    return SELECTORS.lookup(selector).effective_hparams(hparams)


def _differences(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (expected, actual)}`` for the keys whose values differ (numbers compared with a tolerance)."""

    def same(a: Any, b: Any) -> bool:
        numbers = (int, float)
        if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        return a == b

    keys = sorted(set(expected) | set(actual))
    return {k: (expected.get(k), actual.get(k)) for k in keys if not same(expected.get(k), actual.get(k))}


def resolve_method_label(label: str | None, selector: str, hparams: Mapping[str, Any]) -> str:
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

    Raises:
        ValueError: if a meaningful label disagrees with the config (the message lists the differences).
    """
    actual = effective_hparams(selector, hparams)

    def matches(spec: MethodSpec) -> dict[str, tuple[Any, Any]] | None:
        """None if ``spec`` describes this run, else its differences (``selector`` included)."""
        diff = {"selector": (spec.selector, selector)} if spec.selector != selector else {}
        if not diff:
            diff = _differences(effective_hparams(spec.selector, spec.hparams), actual)
        return diff or None

    if label is None:
        candidates = [*METHODS.values(), MethodSpec(selector, selector, selector)]
        for key, prefix in (("rho", "bots_rho"), ("lam", "bots_lambda")):
            if key in actual:
                candidates.append(method_spec(f"{prefix}{actual[key]:g}"))
        for spec in candidates:
            if matches(spec) is None:
                return spec.label
        own_defaults = effective_hparams(selector, {})
        changed = _differences(own_defaults, actual)
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
