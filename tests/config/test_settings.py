"""The run's BOTS settings are resolved once, by the driver, and the glue only passes them on (issue 61, item 1).

A selector hyperparameter is named where it is declared (its default), where the user sets it (the yaml) and in the
rule that reads it; ``bots_verl/config``, ``bots_verl/integration`` and ``bots_verl/main.py`` hand the settings object
on without naming one.
"""

from __future__ import annotations

import ast
import dataclasses
import pickle
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.settings import BOTSSettings, resolve_settings
from bots_verl.core import EVIDENCE, SELECTION_RULES, SELECTORS
from bots_verl.core.registry import defaults_of
from bots_verl.core.selector_base import Selector
from bots_verl.core.settings import DEFAULT, OVERRIDE, SelectorSettings

ROOT = Path(__file__).parents[2]
GLUE = sorted([*(ROOT / "bots_verl/config").glob("*.py"), *(ROOT / "bots_verl/integration").rglob("*.py")]) + [
    ROOT / "bots_verl/main.py"
]
# Hyperparameter names that are also plain words of the glue's prose and code ("the step's evidence", a pin's
# "target"): an identifier or a word in a message may use them; a string that is exactly the name (a key) may not.
PLAIN_WORDS = {"evidence", "selection", "target"}


def _hyperparameter_names() -> set[str]:
    names = set(Selector._BASE_DEFAULTS)
    for name in SELECTORS:
        cls = SELECTORS.lookup(name)
        names |= set(cls.DEFAULTS) | set(cls.effective_hparams({}))
    for name in EVIDENCE:
        names |= set(defaults_of(EVIDENCE.lookup(name)))
    for name in SELECTION_RULES:
        names |= set(defaults_of(SELECTION_RULES.lookup(name)))
    return names


def _named_hyperparameters(path: Path, names: set[str]) -> list[str]:
    """``line: name`` for each identifier or string constant of ``path`` naming one of ``names`` (docstrings, which
    explain rather than use, are left out)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                docstrings.add(id(body[0].value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value)) - PLAIN_WORDS
            hits = (words | {node.value}) & names
        else:
            identifier = {
                ast.Name: "id",
                ast.Attribute: "attr",
                ast.arg: "arg",
                ast.keyword: "arg",
                ast.FunctionDef: "name",
                ast.ClassDef: "name",
            }.get(type(node))
            hits = {getattr(node, identifier)} & (names - PLAIN_WORDS) if identifier else set()
        found += [f"{getattr(node, 'lineno', '?')}: {hit}" for hit in sorted(hits)]
    return found


def _config(*overrides: str):
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=list(overrides))


def test_the_glue_names_no_selector_hyperparameter():
    names = _hyperparameter_names()
    assert {"lam", "rho", "graph_k", "truth_source", "reference_nan"} <= names  # the scan knows what it looks for
    named = {str(p.relative_to(ROOT)): hits for p in GLUE if (hits := _named_hyperparameters(p, names))}
    assert not named, f"hyperparameters named in the glue (pass the settings object on instead): {named}"


def test_the_scan_finds_a_named_hyperparameter(tmp_path):
    glue = tmp_path / "glue.py"
    glue.write_text('"""Mentions lam in prose."""\nk = hparams.get("graph_k", 16)\nprint(settings.rho, "(1 - lam)")\n')
    assert _named_hyperparameters(glue, _hyperparameter_names()) == ["2: graph_k", "3: rho", "3: lam"]


def test_settings_are_resolved_once_with_their_sources():
    overrides = ["bots.selector=mopps", "bots.hparams.lam=0.3"]
    settings = resolve_settings(read_bots_config(_config(*overrides)), overrides)
    selector = settings.selector
    assert selector.name == "mopps" and dict(selector.hparams) == {"lam": 0.3}
    assert selector.effective["lam"] == 0.3 and selector.effective["rho"] == 0.0  # mopps' own rho, never BOTS'
    assert selector.sources["lam"] == OVERRIDE and selector.sources["rho"] == DEFAULT
    assert set(selector.sources) == set(selector.effective)
    assert settings.method == "mopps+lam=0.3" == settings.section.run_log.method


def test_settings_are_frozen_and_cross_a_process_boundary_intact():
    settings = resolve_settings(read_bots_config(_config("bots.reference_columns=[w,s]", "+bots.hparams.gamma=0.8")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.selector.seed = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.selector.hparams["gamma"] = 0.5  # type: ignore[index]
    copy = pickle.loads(pickle.dumps(settings))  # how the driver's settings reach the task runner and the actor
    assert isinstance(copy, BOTSSettings) and copy == settings
    assert (
        dict(copy.selector.effective) == dict(settings.selector.effective) and copy.selector.effective["gamma"] == 0.8
    )
    built = copy.selector.build(3, reference_pass_rates=[[0.2, 0.4]] * 3)
    assert built.hparams == dict(settings.selector.effective) and built.seed == settings.selector.seed


def test_an_unknown_hyperparameter_is_refused_where_the_settings_are_made():
    with pytest.raises(ValueError, match="lamb"):
        SelectorSettings("bots", {"lamb": 0.1})
