"""The registry type for everything the core looks up by name: selectors, evidence plug-ins and selection rules.

Each kind of entry has one :class:`Registry`, defined by the module that holds its interface (``SELECTORS`` in
:mod:`bots_verl.core.selector_base`, ``EVIDENCE`` in :mod:`bots_verl.core.paper.implicit_evidence`, ``SELECTION_RULES``
in
:mod:`bots_verl.core.paper.selection_rules`), so this module depends on none of them. An entry is a class with a
``DEFAULTS`` dict (selectors, evidence plug-ins) or a function whose keyword-only arguments are its parameters
(selection rules); :func:`defaults_of` reads either. Each core entry is registered with its group, ``paper``,
``peers`` or ``ours`` (:data:`GROUPS`, the subpackage it lives in). ``python -m bots_verl.core --list`` prints every
entry with its parameters, by group, so no list of names has to be kept by hand.

Adding an entry is one decorator::

    @SELECTION_RULES.register("my_rule")  # group: None, or "ours" for a rule of this package
    def my_rule(alpha, beta, k, rng, *, target=0.5, my_param=1.0): ...
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["GROUPS", "OTHER_GROUP", "Registry", "defaults_of", "summary_of"]

T = TypeVar("T")

#: Where a core entry comes from, in the order ``--list`` prints them; each is a subpackage of ``bots_verl.core``.
GROUPS: dict[str, str] = {
    "paper": "BOTS (arXiv 2510.26374) and the baselines it is measured against",
    "peers": "other published selectors, on the same API",
    "ours": "beyond the paper, measured on the toy testbed",
}
#: The group of an entry registered without one (e.g. a user's own selector).
OTHER_GROUP = "other"


class Registry(dict[str, T]):
    """A ``dict`` from name to entry, filled by :meth:`register`, with an error that lists the names.

    Args:
        kind: what the entries are, for messages (``"selector"``, ``"evidence plug-in"``, ...).
    """

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self._groups: dict[str, str] = {}

    def register(self, name: str, group: str | None = None) -> Callable[[T], T]:
        """Decorator that adds an entry under ``name`` (a class also gets ``name`` as its ``name`` attribute).

        Args:
            name: the entry's name.
            group: one of :data:`GROUPS` (the core's own entries: the subpackage they live in); None files the entry
                under :data:`OTHER_GROUP`.

        Raises:
            ValueError: for a name already registered or an unknown group.
        """
        if group is not None and group not in GROUPS:
            raise ValueError(f"{self.kind} {name!r}: group must be one of {list(GROUPS)} or None, got {group!r}")

        def add(entry: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            if isinstance(entry, type):
                entry.name = name  # type: ignore[attr-defined]
            self[name] = entry
            self._groups[name] = group or OTHER_GROUP
            return entry

        return add

    def __delitem__(self, name: str) -> None:
        super().__delitem__(name)
        self._groups.pop(name, None)

    def group_of(self, name: str) -> str:
        """The group ``name`` was registered with (:data:`GROUPS`, or :data:`OTHER_GROUP`)."""
        self.lookup(name)
        return self._groups.get(name, OTHER_GROUP)

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
