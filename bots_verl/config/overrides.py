"""The keys a launch's command line set: hydra's task overrides, parsed with hydra's own override grammar.

``python -m bots_verl.main`` hands :func:`overridden_keys` the overrides hydra composed the config with
(``HydraConfig.get().overrides.task``). Every form counts: ``a.b=1``, ``+a.b=1``, ``++a.b=1``, a deletion ``~a.b``
(the key is gone from the config, so whatever default applies is the command line's doing), and a whole-mapping
value ``a={b:1,c:{d:2}}``, which hydra merges into the node, so each key written in it is set (``a.b``, ``a.c.d``)
and the node's other keys keep the config files' values. Two readers use them: the CPU backend leaves a key the
command line set alone (:mod:`bots_verl.verl_cpu.launch`), and the run's settings say which selector hyperparameters
the command line set rather than the yaml (:func:`overridden_children` of ``bots.hparams``;
:func:`bots_verl.config.settings.resolve_settings`).

A config-group choice (``group=option``, ``group@package=option``) selects a config file rather than setting a value:
the values it brings come from that file. Our configs have no groups of their own, so such an override is kept as the
key it names; with a package it sets nothing here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException

logger = logging.getLogger(__name__)

__all__ = ["overridden_children", "overridden_keys", "parse_overrides"]


def parse_overrides(overrides: Iterable[str]) -> list[Override]:
    """Hydra's parse of command-line overrides (the grammar hydra composed the config with).

    Raises:
        ValueError: naming an override hydra cannot parse.
    """
    parser = OverridesParser.create()
    parsed = []
    for item in overrides:
        try:
            parsed += parser.parse_overrides([item])
        except HydraException as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(f"command-line override {item!r} is not hydra override syntax ({first})") from None
    return parsed


def _leaves(key: str, value: Any) -> Iterable[str]:
    """``key`` itself, or for a non-empty mapping value each dotted key it writes (hydra merges mappings)."""
    if isinstance(value, Mapping) and value:
        for child, inner in value.items():
            yield from _leaves(f"{key}.{child}", inner)
    else:
        yield key


def overridden_keys(overrides: Iterable[str]) -> set[str]:
    """Every dotted config key the command line set or deleted (module docstring).

    Args:
        overrides: hydra's task overrides, as given on the command line.

    Returns:
        The keys; a whole-mapping value gives one key per value it writes (``a={b:1}`` -> ``a.b``).

    Raises:
        ValueError: naming an override hydra cannot parse.
    """
    keys: set[str] = set()
    for override in parse_overrides(overrides):
        if override.package is not None:
            continue  # a config group placed in a package: a file's values, not the command line's
        key = override.key_or_group
        if override.is_delete() or override.is_sweep_override():
            keys.add(key)
        else:
            keys.update(_leaves(key, override.value()))
    return keys


def overridden_children(overrides: Iterable[str], node: str) -> frozenset[str]:
    """The names of ``node``'s children the command line set or deleted.

    ``bots.hparams.lam=0.2``, ``~bots.hparams.lam``, ``bots.hparams={lam:0.2}`` and ``bots={hparams:{lam:0.2}}`` all
    name ``lam`` of ``bots.hparams``; ``~bots.hparams`` (the node deleted) names none: its children are gone, not set.

    Args:
        overrides: hydra's task overrides.
        node: a dotted config key.

    Raises:
        ValueError: naming an override hydra cannot parse.
    """
    prefix = node + "."
    keys = overridden_keys(overrides)
    return frozenset(key[len(prefix) :].split(".", 1)[0] for key in keys if key.startswith(prefix))
