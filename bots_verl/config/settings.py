"""The run's BOTS settings, resolved once by the driver: :class:`BOTSSettings`.

``bots_verl.main.check_config`` reads the ``bots:`` section (:func:`~bots_verl.config.bots_config.read_bots_config`)
and resolves it here, once, into one frozen object: the section as checked, with ``run_log.method`` resolved, and the
selector's settings (:class:`~bots_verl.core.settings.SelectorSettings`: the selector, the hyperparameters set, every
one it runs with and where each comes from, the seed). That object is what is checked, labelled, written to
``meta.json``, fingerprinted for a resume and handed to the trainer's Ray process and to the selector's actor, which
builds the selector from it: nothing after the driver reads the yaml again, and no file of this package names a
hyperparameter (the selector's rules check their own; tests/config/test_settings.py holds that).

Where each value comes from: the selector's default, the yaml, or an override on the command line. The driver passes
hydra's task overrides; the hyperparameters they set (:func:`~bots_verl.config.overrides.overridden_children` of
``bots.hparams``: ``bots.hparams.lam=0.2`` with or without ``+``/``++``, ``bots.hparams={lam:0.2}``) are the command
line's, over the yaml's if it set them too; the other set ones are the yaml's; a deleted one (``~bots.hparams.lam``) is
the default again. That is provenance, recorded in ``meta.json`` and printed by the dry run, not meaning: the
fingerprint holds the values only, so a resume that gives by override what the yaml gave before is the same run.

The checks (:func:`resolve_settings`): the selector knows every name set under ``bots.hparams`` and accepts the
values, the seed and as many reference columns as given (and the task embeddings); a selector that reads something
only a trainer provides has it (``pass_rate_oracle``'s truth source); ``bots.run_log.method``, when it names a method,
describes exactly this selector and these hyperparameters (:func:`resolve_method_label`); when null it is derived.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bots_verl.config.bots_config import BOTSConfig
from bots_verl.config.overrides import overridden_children
from bots_verl.core import SELECTORS
from bots_verl.core.settings import SelectorSettings, effective_hparams
from bots_verl.runlog import METHODS, MethodSpec, method_spec, sweep_labels

logger = logging.getLogger(__name__)

__all__ = ["BOTSSettings", "resolve_method_label", "resolve_settings"]

#: the config node of the selector's hyperparameters
_HPARAMS_NODE = "bots.hparams"


@dataclass(frozen=True)
class BOTSSettings:
    """The run's BOTS settings, resolved once by the driver (:func:`resolve_settings`).

    Attributes:
        section: the ``bots:`` section as read and checked, ``run_log.method`` resolved.
        selector: the selector's settings (name, hyperparameters set and effective with their sources, seed).
    """

    section: BOTSConfig
    selector: SelectorSettings

    @property
    def method(self) -> str:
        """The run's method label (``bots.run_log.method``, checked or derived)."""
        return str(self.section.run_log.method)

    @property
    def reference_columns(self) -> list[str]:
        """``bots.reference_columns``: the evidence the selector gets from the train files, weak -> strong."""
        return list(self.section.reference_columns)


def resolve_settings(bots: BOTSConfig, overrides: Sequence[str] = ()) -> BOTSSettings:
    """The run's settings from its ``bots:`` section, checked (module docstring); run once, by the driver.

    Args:
        bots: :func:`~bots_verl.config.bots_config.read_bots_config` of the composed config.
        overrides: hydra's task overrides the config was composed with (``HydraConfig.get().overrides.task``); they
            tell the hyperparameters the command line set from those the yaml set (without them, every set value is
            counted as the yaml's).

    Raises:
        ValueError: naming the keys involved, or an override hydra cannot parse.
    """
    refs = len(bots.reference_columns)
    overridden = overridden_children(overrides, _HPARAMS_NODE)
    try:
        selector = SelectorSettings(bots.selector, bots.hparams, bots.selector_seed, overridden)
        selector.check(refs, bool(bots.task_embeddings))
    except (TypeError, ValueError) as exc:
        hint = " (set bots.reference_columns)" if not refs and "reference" in str(exc) else ""
        if not bots.task_embeddings and "embedding" in str(exc):
            hint = " (set bots.task_embeddings to the pool's embedding file: python -m reference_eval embed)"
        raise ValueError(f"bots.selector={bots.selector!r} with bots.hparams={bots.hparams}: {exc}{hint}") from exc
    selector.check_for_training()
    method = resolve_method_label(bots.run_log.method, selector)
    section = dataclasses.replace(bots, run_log=dataclasses.replace(bots.run_log, method=method))
    return BOTSSettings(section=section, selector=selector)


def _differences(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (expected, actual)}`` for the keys whose values differ (numbers compared with a tolerance)."""

    def same(a: Any, b: Any) -> bool:
        numbers = (int, float)
        if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        return a == b

    keys = sorted(set(expected) | set(actual))
    return {k: (expected.get(k), actual.get(k)) for k in keys if not same(expected.get(k), actual.get(k))}


def resolve_method_label(label: str | None, settings: SelectorSettings) -> str:
    """The ``method`` for ``meta.json``, checked against the selector and hyperparameters the run actually uses.

    A label with a meaning (:func:`bots_verl.runlog.method_spec`: the paper's methods, ``bots_rho<x>``,
    ``bots_lambda<x>``, ``bots_greedy``; or a registered selector's name, meaning that selector at its defaults) must
    describe the config exactly, so appending ``bots.selector=implicit_only`` to a BOTS recipe cannot run one thing
    and log another. A free-form label (``my_run``) claims nothing and is kept. Without a label the first matching
    known label is used, else ``<selector>`` followed by the hyperparameters that differ from its defaults.

    Args:
        label: ``bots.run_log.method`` (None: derive it).
        settings: the run's selector settings (the selector and every hyperparameter it runs with).

    Raises:
        ValueError: if a meaningful label disagrees with the config (the message lists the differences).
    """
    selector, actual = settings.name, dict(settings.effective)

    def matches(spec: MethodSpec) -> dict[str, tuple[Any, Any]] | None:
        """None if ``spec`` describes this run, else its differences (``selector`` included)."""
        diff = {"selector": (spec.selector, selector)} if spec.selector != selector else {}
        if not diff:
            diff = _differences(effective_hparams(spec.selector, spec.hparams), actual)
        return diff or None

    if label is None:
        candidates = [*METHODS.values(), MethodSpec(selector, selector, selector)]
        candidates.extend(sweep_labels(actual))
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
