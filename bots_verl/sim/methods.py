"""What to compare: a labelled method = a selector name, its hyperparameters and the sampling mode.

Spec syntax (CLI ``--methods`` entries and ``--variant`` values)::

    bots                               # label "bots", selector bots, its defaults
    bots_rho0.2=bots:rho=0.2           # label "bots_rho0.2", selector bots, rho = 0.2
    random+dapo=random:dapo=true       # label "random+dapo", random selection with DAPO dynamic sampling
    b=bots:lam=0.05,selection=greedy   # several hyperparameters, comma separated

The keys ``dapo``, ``dapo_gen_factor`` and ``dapo_max_rounds`` configure DAPO dynamic sampling in the simulator loop;
``ref_fraction`` and ``ref_labels`` the reference columns the selector is given (a labelled share of the pool,
chosen ``uniform`` or ``spread``, :mod:`bots_verl.sim.pool_embeddings`; 0: none). They are not passed to the selector.
Every other key is a selector hyperparameter::

    ref10=bots_partial_ref:ref_fraction=0.1,ref_labels=spread   # references on 10% of the pool, the rest imputed
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from bots_verl.core.task_graph import LABELLING_METHODS

logger = logging.getLogger(__name__)

__all__ = ["LOOP_KEYS", "SimMethod", "parse_method", "parse_value"]

# Keys of a method spec consumed by the simulator loop, with their defaults (whose types a parsed value takes).
LOOP_KEYS: dict[str, Any] = {
    "dapo": False,
    "dapo_gen_factor": 1.0,
    "dapo_max_rounds": 10,
    "ref_fraction": 1.0,
    "ref_labels": "uniform",
}
_LABEL = re.compile(r"^[A-Za-z0-9_.+\-]+$")


@dataclass(frozen=True)
class SimMethod:
    """One method of a comparison.

    Attributes:
        label: the name in tables, plots and the run directory ``<out>/<label>/seed<k>/``.
        selector: a selector name (core registry or ``oracle``).
        hparams: selector hyperparameters.
        dapo: DAPO dynamic sampling: keep sampling candidate batches of ``dapo_gen_factor * B`` tasks and drop
            all-0 / all-1 groups until B informative groups are collected or ``dapo_max_rounds`` rounds are spent.
        dapo_gen_factor: candidate batch size per round, as a multiple of B.
        dapo_max_rounds: rounds per step before training on what was collected.
        ref_fraction: the share of the pool whose reference pass rates the selector gets (NaN elsewhere), in [0, 1];
            0 gives it no reference columns at all.
        ref_labels: how the labelled tasks are chosen (``uniform`` or ``spread``,
            :func:`bots_verl.core.task_graph.choose_labelled`).
    """

    label: str
    selector: str
    hparams: dict[str, Any] = field(default_factory=dict)
    dapo: bool = False
    dapo_gen_factor: float = 1.0
    dapo_max_rounds: int = 10
    ref_fraction: float = 1.0
    ref_labels: str = "uniform"

    def __post_init__(self) -> None:
        if not _LABEL.match(self.label):
            raise ValueError(f"method label {self.label!r} may use only letters, digits and _ . + -")
        if self.dapo_gen_factor <= 0 or self.dapo_max_rounds < 1:
            raise ValueError("dapo_gen_factor must be > 0 and dapo_max_rounds >= 1")
        if not 0.0 <= self.ref_fraction <= 1.0:
            raise ValueError(f"ref_fraction must lie in [0, 1], got {self.ref_fraction!r}")
        if self.ref_labels not in LABELLING_METHODS:
            raise ValueError(f"ref_labels must be one of {list(LABELLING_METHODS)}, got {self.ref_labels!r}")

    def with_args(self, **args: Any) -> SimMethod:
        """A copy with more hyperparameters (loop keys are routed to their fields)."""
        loop = {k: args.pop(k) for k in list(args) if k in LOOP_KEYS}
        return SimMethod(
            self.label, self.selector, {**self.hparams, **args}, **{**self._loop_fields(), **_coerce_loop(loop)}
        )

    def _loop_fields(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in LOOP_KEYS}

    def describe(self) -> dict[str, Any]:
        """Plain dict for ``meta.json``."""
        return {"selector": self.selector, "hparams": dict(self.hparams), **self._loop_fields()}


def parse_value(text: str) -> Any:
    """Parse a CLI value: JSON literals (numbers, true/false, null) and ``None``; anything else stays a string.

    Lower-case ``none`` stays the string ``"none"``: it is a value in its own right (``evidence=none``, the
    no-reference evidence plug-in), so only ``None`` and ``null`` mean Python's None.
    """
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_args_list(text: str) -> dict[str, Any]:
    """``k=v,k=v`` -> dict (values through :func:`parse_value`)."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {part!r}")
        out[key.strip()] = parse_value(value.strip())
    return out


def _coerce_loop(loop: dict[str, Any]) -> dict[str, Any]:
    """Each loop setting as the type of its default in :data:`LOOP_KEYS` (``dapo``: ``1``/``true`` mean True)."""
    out = {}
    for key, value in loop.items():
        default = LOOP_KEYS[key]
        if isinstance(default, bool):
            out[key] = value if isinstance(value, bool) else str(value).lower() in ("1", "true")
        else:
            out[key] = type(default)(value)
    return out


def parse_method(text: str) -> SimMethod:
    """Parse ``[label=]selector[:k=v,...]`` (see the module docstring).

    Raises:
        ValueError: on a malformed spec.
    """
    text = text.strip()
    head, _, args = text.partition(":")
    label, sep, selector = head.partition("=")
    if not sep:
        label, selector = head, head
    label, selector = label.strip(), selector.strip()
    if not selector:
        raise ValueError(f"method spec {text!r} names no selector")
    return SimMethod(label, selector).with_args(**parse_args_list(args))
