"""The ``bots:`` section as a structured dataclass: the yaml and the dataclass agree, the structure checks types and
unknown keys naming them, derived defaults come from the rest of the config, and the paper defaults have one home."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from bots_verl.config import bots_config
from bots_verl.config.bots_config import BOTSConfig, read_bots_config
from bots_verl.config.settings import resolve_settings
from bots_verl.core import SELECTORS, defaults
from bots_verl.core.paper.paper_rules import PaperBOTS
from bots_verl.core.settings import effective_hparams


def _config(*overrides: str):
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=list(overrides))


def test_the_yaml_section_holds_the_dataclass_defaults():
    yaml_section = OmegaConf.to_container(_config().bots)
    structured = OmegaConf.to_container(OmegaConf.structured(BOTSConfig))
    structured.pop("_target_")
    for section in structured.values():
        if isinstance(section, dict):
            section.pop("_target_", None)
    assert yaml_section == structured


@pytest.mark.parametrize(
    "override, message",
    [
        ("+bots.sed=1", "bots.sed: Key 'sed' not in 'BOTSConfig'"),
        ("+bots.success.cutoff=1", "bots.success.cutoff: Key 'cutoff' not in 'SuccessConfig'"),
        ("bots.seed=abc", "bots.seed: Value 'abc' of type 'str' could not be converted to Integer"),
        ("bots.dry_run=maybe", "bots.dry_run: Value 'maybe'"),
        ("bots.selector=bogus", "bots.selector='bogus' is not a registered selector"),
        ("bots.replay_poll_interval=0", "bots.replay_poll_interval must be a positive number"),
        ("bots.reference_columns=[a,a]", "bots.reference_columns has duplicates"),
    ],
)
def test_the_structure_refuses_bad_types_and_unknown_keys_naming_the_key(override, message):
    with pytest.raises(ValueError) as refused:
        read_bots_config(_config(override))
    assert message in str(refused.value)


def test_defaults_other_sections_supply_are_filled_in():
    bots = read_bots_config(_config("data.seed=7", "trainer.project_name=p", "trainer.experiment_name=e"))
    assert (bots.seed, bots.actor.name, bots.run_log.run_id) == (7, "bots_posterior_p_e", "e")
    assert read_bots_config(_config("bots.seed=3", "data.seed=7")).seed == 3
    assert read_bots_config(_config("data.seed=null")).selector_seed == 0


def test_cross_field_rules_are_checked_once_by_the_driver():
    bots = read_bots_config(_config("+bots.hparams.lamb=0.1"))  # reading the section does not build the selector
    with pytest.raises(ValueError, match="lamb"):
        resolve_settings(bots)
    checked = resolve_settings(read_bots_config(_config("bots.reference_columns=[w,s]")))
    assert checked.method == "bots"  # derived: the paper's BOTS at its defaults


def test_the_paper_defaults_have_one_home():
    assert BOTSConfig().selector == defaults.SELECTOR
    assert {k: SELECTORS["bots"].DEFAULTS[k] for k in defaults.PAPER_BOTS} == dict(defaults.PAPER_BOTS)
    params = {f.name: f.default for f in dataclasses.fields(BOTSConfig)}
    assert params["selector"] == "bots"
    plain = PaperBOTS(num_tasks=1)
    assert (plain.lam, plain.rho, plain.target, plain.gamma) == (
        defaults.LAM,
        defaults.RHO,
        defaults.TARGET,
        defaults.GAMMA,
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ((), "bots.hparams.truth_source is not set"),
        (("+bots.hparams.truth_source=no_such_module:Factory",), "cannot be loaded: No module named 'no_such_module'"),
        (("+bots.hparams.truth_source=bots_verl.toy.rollout_truth:NoSuchFactory",), "cannot be loaded: module"),
        (("+bots.hparams.truth_source=bots_verl.toy.rollout_truth:VERSION_KEY_THAT_IS_NOT",), "cannot be loaded"),
        (("+bots.hparams.truth_source=bots_verl.toy.rollout_truth:__name__",), "not a factory"),
    ],
)
def test_the_oracle_without_a_usable_truth_source_is_refused_by_the_driver(extra, message):
    """Issue 47, item 6: nothing in a verl run calls observe_truth, so the first select raised after start-up."""
    config = _config("bots.selector=pass_rate_oracle", *extra)
    with pytest.raises(ValueError) as refused:
        resolve_settings(read_bots_config(config))
    assert message in str(refused.value)
    assert "reads the true pass rates from a truth source" in str(refused.value)


def test_the_oracle_with_the_toy_truth_source_passes():
    config = _config(
        "bots.selector=pass_rate_oracle", "+bots.hparams.truth_source=bots_verl.toy.rollout_truth:RolloutServerTruth"
    )
    assert resolve_settings(read_bots_config(config)).selector.name == "pass_rate_oracle"


@pytest.mark.parametrize(
    "override, message",
    [
        ("+bots.hparams.lam=true", "hyperparameter 'lam' is a number (default 0.1), got the boolean True"),
        ("+bots.hparams.rho=on", "hyperparameter 'rho' is a number (default 0.1), got the string 'on'"),
        ("+bots.hparams.lam='0.1'", "got the string '0.1': write it unquoted, e.g. +bots.hparams.lam=0.1"),
    ],
)
def test_a_boolean_or_a_quoted_rate_is_refused_before_ray_naming_the_key(override, message):
    """Issue 47, items 8 and 9, through hydra's parsing of the override as the launch scripts write it."""
    config = _config("bots.reference_columns=[w,s]", override)
    with pytest.raises(ValueError) as refused:
        resolve_settings(read_bots_config(config))
    assert message in str(refused.value)


def test_the_yaml_declares_the_paper_hyperparameters_with_the_values_of_core_defaults():
    """Each declared key is null (the selector's default) and its comment ends with the paper's value, which must be
    :data:`defaults.PAPER_BOTS`'s: the yaml and core/defaults.py cannot drift apart."""
    yaml_path = Path(bots_config.__file__).with_name("bots_trainer.yaml")
    lines = yaml_path.read_text().splitlines()
    start = lines.index("  hparams:")
    declared: dict[str, object] = {}
    for i, line in enumerate(lines[start + 1 :], start + 1):
        if line and not line.startswith("    "):
            break
        if line.startswith("    ") and not line.lstrip().startswith("#"):
            key, value = line.strip().split(":", 1)
            assert value.strip() == "null", line
            comment = lines[i - 1].strip()
            assert comment.startswith("#") and "; paper: " in comment, comment
            declared[key] = yaml.safe_load(comment.rsplit("; paper: ", 1)[1])
    assert list(declared) == list(defaults.PAPER_BOTS)
    assert declared == dict(defaults.PAPER_BOTS)
    assert OmegaConf.to_container(_config().bots.hparams) == dict.fromkeys(defaults.PAPER_BOTS)


def test_null_means_each_selectors_own_default():
    assert read_bots_config(_config()).hparams == {}  # nothing set: meta.json records hparams {} as before
    for selector in ("bots", "mopps", "bots_warm", "random", "implicit_only"):
        bots = read_bots_config(_config(f"bots.selector={selector}", "bots.reference_columns=[w,s]"))
        assert bots.hparams == {}
        assert resolve_settings(bots).method == selector
    mopps = read_bots_config(_config("bots.selector=mopps"))
    assert effective_hparams(mopps.selector, mopps.hparams)["rho"] == 0.0  # never BOTS' rho = 0.1


@pytest.mark.parametrize("override", ["bots.hparams.lam=0.3", "+bots.hparams.lam=0.3", "++bots.hparams.lam=0.3"])
def test_a_declared_key_is_set_with_or_without_plus(override):
    bots = read_bots_config(_config("bots.selector=mopps", override))
    assert bots.hparams == {"lam": 0.3}
    assert effective_hparams(bots.selector, bots.hparams)["lam"] == 0.3
    assert resolve_settings(bots).method == "mopps+lam=0.3"


def test_undeclared_keys_are_added_and_unknown_ones_refused_naming_the_key():
    added = read_bots_config(_config("+bots.hparams.gamma=0.8", "bots.reference_columns=[w,s]"))
    assert added.hparams == {"gamma": 0.8}
    assert resolve_settings(added).method == "bots+gamma=0.8"
    for overrides, key in (
        (("bots.selector=random", "bots.hparams.lam=0.3"), "lam"),
        (("+bots.hparams.lamb=1",), "lamb"),
    ):
        with pytest.raises(ValueError, match=f"unknown hyperparameter '{key}'"):
            resolve_settings(read_bots_config(_config(*overrides)))


@pytest.mark.parametrize(
    ("selector", "key"),
    [("bots", "gamma"), ("bots", "degenerate_tol"), ("bots", "warm_start_mu"), ("bots", "reference_nan")]
    + [("bots", "graph_k"), ("dps", "decay"), ("greso", "p_easy"), ("bots_noref", "forget")],
)
def test_a_null_undeclared_hyperparameter_is_refused_naming_it(selector, key):
    """Issue 59, item 8a: +bots.hparams.gamma=null stopped with float()'s bare message (the declared keys' null is
    their default, by design: test_null_means_each_selectors_own_default)."""
    config = _config(
        f"bots.selector={selector}",
        "bots.reference_columns=[w,s]",
        "bots.task_embeddings=/e",
        f"+bots.hparams.{key}=null",
    )
    with pytest.raises(ValueError) as refused:
        resolve_settings(read_bots_config(config))
    assert f"hyperparameter '{key}' is null, but it takes a value (default" in str(refused.value)
    assert "leave it out to run with the default" in str(refused.value)


@pytest.mark.parametrize("value", ["neighbours", "error"])
def test_reference_nan_is_labelled_and_recorded(value):
    """Issue 59, item 8b: reference_nan changes how missing reference values are filled (or refused); it ran
    under the label 'bots' and was missing from meta.json's hparams (effective_hparams)."""
    overrides = ["bots.selector=bots", "bots.reference_columns=[w,s]", f"+bots.hparams.reference_nan={value}"]
    config = _config(*overrides)
    bots = read_bots_config(config)
    assert effective_hparams(bots.selector, bots.hparams)["reference_nan"] == value
    assert resolve_settings(bots).method == f"bots+reference_nan={value}"
    # the BOTS recipe's label describes paper BOTS, which fills missing values with column means
    labelled = _config(*overrides, "bots.run_log.method=bots")
    with pytest.raises(ValueError, match=r"reference_nan: label means None, config has '" + value):
        resolve_settings(read_bots_config(labelled))
    # at its default it changes nothing, and the record stays as before
    same = _config("bots.selector=bots", "bots.reference_columns=[w,s]", "+bots.hparams.reference_nan=impute")
    assert "reference_nan" not in effective_hparams("bots", read_bots_config(same).hparams)
    assert resolve_settings(read_bots_config(same)).method == "bots"


def test_graph_k_is_labelled_where_a_task_graph_reads_it_and_refused_where_none_does():
    config = _config(
        "bots.selector=bots_noref", "bots.reference_columns=[]", "bots.task_embeddings=/e", "+bots.hparams.graph_k=8"
    )
    bots = read_bots_config(config)
    assert effective_hparams(bots.selector, bots.hparams)["graph_k"] == 8
    assert resolve_settings(bots).method == "bots_noref+graph_k=8"
    for selector in ("bots", "random", "mopps"):
        unused = _config(f"bots.selector={selector}", "bots.reference_columns=[w,s]", "+bots.hparams.graph_k=8")
        with pytest.raises(ValueError, match=f"graph_k=8 has no effect on selector '{selector}'"):
            resolve_settings(read_bots_config(unused))
