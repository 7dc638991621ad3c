"""Where each hyperparameter's value comes from: the selector's default, the yaml, or the command line (issue 61,
item 1). Real hydra composition of a copy of ``bots_trainer.yaml`` (the ``yaml_config`` fixture) with overrides, as
``python -m bots_verl.main`` composes it and hands its task overrides to the driver."""

from __future__ import annotations

import pickle

import pytest
from hydra import compose, initialize_config_module

from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.settings import resolve_settings
from bots_verl.core.settings import DEFAULT, OVERRIDE, YAML, SelectorSettings
from bots_verl.main import _summary

IN_YAML = {"lam": 0.3, "rho": 0.2}
#: BOTS' interpolation evidence reads two reference columns
REFS = "bots.reference_columns=[weak,strong]"


def _settings(compose_config, overrides=(), hparams=IN_YAML):
    overrides = [REFS, *overrides]
    return resolve_settings(read_bots_config(compose_config(hparams, overrides)), overrides).selector


def test_default_yaml_and_override_side_by_side(yaml_config):
    """lam: in the yaml and overridden; rho: in the yaml only; target: neither."""
    selector = _settings(yaml_config, ["bots.hparams.lam=0.5"])
    assert (selector.effective["lam"], selector.effective["rho"], selector.effective["target"]) == (0.5, 0.2, 0.5)
    sources = selector.sources
    assert (sources["lam"], sources["rho"], sources["target"]) == (OVERRIDE, YAML, DEFAULT)
    assert set(sources) == set(selector.effective)
    assert {k for k, v in sources.items() if v != DEFAULT} == {"lam", "rho"}
    assert _settings(yaml_config).sources["lam"] == YAML  # the same file without the override


@pytest.mark.parametrize(
    ("override", "key", "value", "source"),
    [
        # hydra refuses + on a key the yaml set (rightly: ++ or none); on a null one it adds
        ("+bots.hparams.target=0.4", "target", 0.4, OVERRIDE),
        ("++bots.hparams.lam=0.5", "lam", 0.5, OVERRIDE),
        ("bots.hparams={lam:0.5}", "lam", 0.5, OVERRIDE),  # merged: rho keeps the yaml's value and source
        ("bots={hparams:{lam:0.5}}", "lam", 0.5, OVERRIDE),
        ("~bots.hparams.lam", "lam", 0.1, DEFAULT),  # deleted: the selector's default again
        ("bots.hparams.lam=null", "lam", 0.1, DEFAULT),
        ("trainer.total_training_steps=3", "lam", 0.3, YAML),  # another key: lam stays the yaml's
    ],
)
def test_each_form_of_override_with_a_yaml_beside_it(yaml_config, override, key, value, source):
    selector = _settings(yaml_config, [override])
    assert (selector.effective[key], selector.sources[key]) == (value, source)
    assert (selector.effective["rho"], selector.sources["rho"]) == (0.2, YAML)


def test_a_whole_mapping_override_makes_each_of_its_keys_an_override(yaml_config):
    selector = _settings(yaml_config, ["bots.hparams={lam:0.5,target:0.4}"])
    sources = {k: selector.sources[k] for k in ("lam", "rho", "target")}
    assert sources == {"lam": OVERRIDE, "rho": YAML, "target": OVERRIDE} and selector.effective["target"] == 0.4


def test_the_entry_points_config_sets_nothing_in_its_yaml():
    """``bots_trainer.yaml`` declares the paper's hyperparameters null: a run from it has only defaults and
    overrides; an undeclared one added with ``+`` is an override too."""
    overrides = [REFS, "bots.hparams.lam=0.3", "+bots.hparams.gamma=0.8"]
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        config = compose(config_name="bots_trainer", overrides=overrides)
    sources = resolve_settings(read_bots_config(config), overrides).selector.sources
    assert {k for k, v in sources.items() if v != DEFAULT} == {"lam", "gamma"}
    assert sources["lam"] == sources["gamma"] == OVERRIDE


def test_the_dry_run_prints_each_value_with_its_source(yaml_config):
    """(``tests/integration/test_main_on_cpu.py`` reads the line from ``python -m bots_verl.main``'s dry run.)"""
    overrides = [REFS, "bots.hparams.lam=0.5"]
    config = yaml_config(IN_YAML, overrides)
    settings = resolve_settings(read_bots_config(config), overrides)
    line = next(x for x in _summary(config, settings).splitlines() if "hparams:" in x)
    assert line.startswith("  hparams: override lam=0.5; yaml rho=0.2; default target=0.5 "), line


def test_the_source_is_provenance_it_crosses_processes_and_leaves_equality_alone():
    by_override = SelectorSettings("bots", {"lam": 0.2}, 1, overridden={"lam"})
    by_yaml = SelectorSettings("bots", {"lam": 0.2}, 1)
    assert by_override == by_yaml and dict(by_override.effective) == dict(by_yaml.effective)
    assert (by_override.sources["lam"], by_yaml.sources["lam"]) == (OVERRIDE, YAML)
    copy = pickle.loads(pickle.dumps(by_override))  # how the settings reach the task runner and the actor
    assert copy.overridden == {"lam"} and copy.sources == by_override.sources
    with pytest.raises(TypeError, match="collection of hyperparameter names"):
        SelectorSettings("bots", {"lam": 0.2}, overridden="lam")  # type: ignore[arg-type]
