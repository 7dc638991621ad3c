"""The registry type for everything the core looks up by name: selectors, evidence plug-ins and selection rules.

Each kind of entry has one :class:`Registry`, defined by the module that holds its interface (``SELECTORS`` in
:mod:`bots_verl.core.selector_base`, ``EVIDENCE`` in :mod:`bots_verl.core.evidence`, ``SELECTION_RULES`` in
:mod:`bots_verl.core.selection_rules`), so this module depends on none of them. An entry is a class with a
``DEFAULTS`` dict (selectors, evidence plug-ins) or a function whose keyword-only arguments are its parameters
(selection rules); :func:`defaults_of` reads either. ``python -m bots_verl.core --list`` prints every entry with its
parameters, so no list of names has to be kept by hand.

Adding an entry is one decorator::

    @SELECTION_RULES.register("my_rule")
    def my_rule(alpha, beta, k, rng, *, target=0.5, my_param=1.0): ...
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["Registry", "defaults_of", "summary_of"]

T = TypeVar("T")


class Registry(dict[str, T]):
    """A ``dict`` from name to entry, filled by :meth:`register`, with an error that lists the names.

    Args:
        kind: what the entries are, for messages (``"selector"``, ``"evidence plug-in"``, ...).
    """

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that adds an entry under ``name`` (a class also gets ``name`` as its ``name`` attribute)."""

        def add(entry: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            if isinstance(entry, type):
                entry.name = name  # type: ignore[attr-defined]
            self[name] = entry
            return entry

        return add

    def lookup(self, name: Any) -> T:
        """The entry called ``name``.

        Raises:
            ValueError: for an unknown name, listing the registered ones.
        """
        if not isinstance(name, str) or name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; registered: {sorted(self)}")
        return self[name]


def defaults_of(entry: Any) -> dict[str, Any]:
    """An entry's parameters with their defaults: a class's ``DEFAULTS``, a function's keyword-only arguments."""
    if isinstance(entry, type):
        return dict(getattr(entry, "DEFAULTS", {}))
    params = inspect.signature(entry).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def summary_of(entry: Any) -> str:
    """The first line of an entry's docstring."""
    doc = inspect.getdoc(entry) or ""
    return doc.splitlines()[0] if doc else ""
