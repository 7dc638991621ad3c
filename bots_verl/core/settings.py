"""A run's selector settings, resolved once: :class:`SelectorSettings`.

A trainer states which selector it runs, the hyperparameters it sets and the seed; :class:`SelectorSettings` holds
them, frozen, with every hyperparameter the selector runs with (the set ones over its declared defaults, read from its
registry entry: :meth:`~bots_verl.core.selector_base.Selector.effective_hparams`) and where each value comes from
(:attr:`SelectorSettings.sources`: the selector's default, the config's files, or the command line).
The same object is checked without building the selector (:meth:`SelectorSettings.check`), labelled, recorded,
fingerprinted and handed to whatever builds the selector (:meth:`SelectorSettings.build`), so a hyperparameter is
named only where it is declared (its default), where the user sets it, and in the rule that reads it; a trainer's glue
passes the object on.

Standard library and numpy only, like the rest of :mod:`bots_verl.core`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bots_verl.core.selector_base import SELECTORS, Selector
from bots_verl.core.task_graph import check_graph_fits

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT", "OVERRIDE", "YAML", "SelectorSettings", "effective_hparams"]

#: :attr:`SelectorSettings.sources` of a value the selector's declared defaults give (nothing set it, or the command
#: line deleted it or set it to null)
DEFAULT = "default"
#: :attr:`SelectorSettings.sources` of a value the config's files set (``bots_trainer.yaml`` or a copy of it; for
#: settings built in code, the caller)
YAML = "yaml"
#: :attr:`SelectorSettings.sources` of a value the command line set (a hydra override), over the files' if they set it
OVERRIDE = "override"


def effective_hparams(selector: str, hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Every hyperparameter ``selector`` runs with: ``hparams`` over its declared defaults (and its evidence plug-in's
    and selection rule's), read from its registry entry without building it.

    Raises:
        ValueError: for an unknown selector, or a hyperparameter it does not know (named), retired or refuses.
    """
    return SELECTORS.lookup(selector).effective_hparams(hparams)


@dataclass(frozen=True)
class SelectorSettings:
    """One run's selector: its name, the hyperparameters set for it, its seed; resolved on construction.

    Args:
        name: a registered selector (:data:`~bots_verl.core.selector_base.SELECTORS`).
        hparams: the hyperparameters set for this run (the rest keep the selector's defaults).
        seed: seed of the selector's generator.
        overridden: the hyperparameters the command line set or deleted (hydra's overrides); the others set in
            ``hparams`` come from the config's files. Provenance, not meaning: two settings that differ only here
            compare equal, and a run's fingerprint leaves it out.

    Attributes:
        effective: every hyperparameter the selector runs with (defaults included).

    Raises:
        ValueError: for an unknown selector, or a hyperparameter it does not know, retired or refuses.
        TypeError: ``overridden`` given as one string rather than a collection of names.
    """

    name: str
    hparams: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    overridden: frozenset[str] = field(default=frozenset(), compare=False)
    effective: Mapping[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # read-only views: the object is handed around (driver, run log, Ray actor) and must mean one thing
        object.__setattr__(self, "hparams", MappingProxyType(dict(self.hparams)))
        if isinstance(self.overridden, str):  # frozenset("lam") would be {"l", "a", "m"}
            raise TypeError(f"overridden must be a collection of hyperparameter names, got {self.overridden!r}")
        object.__setattr__(self, "overridden", frozenset(self.overridden))
        object.__setattr__(self, "effective", MappingProxyType(effective_hparams(self.name, self.hparams)))

    def __reduce__(self) -> tuple[Any, ...]:
        # a mapping proxy does not pickle; the settings cross to the selector's Ray actor as plain dicts
        return (SelectorSettings, (self.name, dict(self.hparams), self.seed, self.overridden))

    @property
    def selector_class(self) -> type[Selector]:
        """The registered class of :attr:`name`."""
        return SELECTORS.lookup(self.name)

    @property
    def sources(self) -> dict[str, str]:
        """Per effective hyperparameter, where its value comes from: :data:`DEFAULT` (not set, or deleted: the
        selector's declared default), :data:`OVERRIDE` (set on the command line, over the files' value if they set one
        too) or :data:`YAML` (set by the config's files)."""

        def source(key: str) -> str:
            if key not in self.hparams:  # a deleted or null key is the default again, whoever removed it
                return DEFAULT
            return OVERRIDE if key in self.overridden else YAML

        return {key: source(key) for key in self.effective}

    @property
    def task_graph_k(self) -> Any:
        """The task graph's neighbours per task, as the selector reads it (set, else its default)."""
        return self.selector_class.task_graph_k(self.hparams)

    def check_graph_fits(self, num_tasks: int, dims: int) -> int:
        """Refuse a task graph over ``num_tasks`` tasks of ``dims`` coordinates, with this run's neighbours per task,
        that would not fit in memory here (:func:`~bots_verl.core.task_graph.check_graph_fits`).

        Returns:
            The estimated bytes.
        """
        return check_graph_fits(num_tasks, dims, int(self.task_graph_k))

    def check(self, num_references: int, embeddings: bool) -> None:
        """Every check the selector's constructor makes that needs no pool, before a trainer starts: the seed, value
        ranges, the selection rule's parameters, what needs reference columns or task embeddings
        (:meth:`~bots_verl.core.selector_base.Selector.check_hparams`; nothing is built).

        Args:
            num_references: reference columns the trainer gives the selector (0: none).
            embeddings: whether the trainer gives it task embeddings.

        Raises:
            ValueError: as the selector's constructor raises it.
        """
        self.selector_class.check_hparams(
            self.hparams, num_references=num_references, embeddings=embeddings, seed=self.seed
        )

    def check_for_training(self) -> None:
        """What the selector needs from a trainer beyond its constructor's checks
        (:meth:`~bots_verl.core.selector_base.Selector.check_for_training`).

        Raises:
            ValueError: naming the setting.
        """
        self.selector_class.check_for_training(dict(self.effective))

    def build(self, num_tasks: int, *, reference_pass_rates: Any = None, task_embeddings: Any = None) -> Selector:
        """The selector over a pool of ``num_tasks`` (:func:`bots_verl.core.build_selector`'s arguments)."""
        cls = self.selector_class
        if task_embeddings is None:  # selectors that take no embeddings keep working unchanged
            return cls(num_tasks, reference_pass_rates=reference_pass_rates, seed=self.seed, **self.hparams)
        return cls(
            num_tasks,
            reference_pass_rates=reference_pass_rates,
            task_embeddings=task_embeddings,
            seed=self.seed,
            **self.hparams,
        )
