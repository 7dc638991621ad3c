"""The keys a command line set, from hydra's override grammar (bots_verl/config/overrides.py; issue 61, item 1)."""

from __future__ import annotations

import pytest

from bots_verl.config.overrides import overridden_children, overridden_keys

HPARAMS = "bots.hparams"


@pytest.mark.parametrize(
    "override",
    [
        "bots.hparams.lam=0.2",
        "+bots.hparams.lam=0.2",
        "++bots.hparams.lam=0.2",
        "bots.hparams={lam:0.2}",
        "bots={hparams:{lam:0.2}}",
        "~bots.hparams.lam",
        "~bots.hparams.lam=0.2",
        "bots.hparams.lam=null",
        "bots.hparams.lam=${oc.env:LAM}",
    ],
)
def test_every_form_of_an_override_names_the_hyperparameter(override):
    assert overridden_children([override], HPARAMS) == {"lam"}


def test_a_whole_mapping_names_each_key_it_writes_and_nothing_else():
    # hydra merges a mapping into the node: the node's other keys keep the files' values
    assert overridden_children(["bots.hparams={lam:0.2,rho:0.05}"], HPARAMS) == {"lam", "rho"}
    assert overridden_keys(["a={b:1,c:{d:2},e:{}}", "f=[1,2]"]) == {"a.b", "a.c.d", "a.e", "f"}
    assert overridden_children(["bots.hparams={}"], HPARAMS) == set()


def test_a_deleted_node_names_none_of_its_children():
    assert overridden_children(["~bots.hparams"], HPARAMS) == set()
    assert overridden_children(["~bots.hparams", "+bots.hparams.lam=0.2"], HPARAMS) == {"lam"}


def test_overrides_of_other_keys_are_not_the_hyperparameters():
    overrides = [
        "trainer.total_training_steps=3",
        "bots.selector=mopps",
        "bots.hparams_extra.lam=1",  # a sibling whose name starts like the node
        "bots=null",
        "data.hparams.lam=0.2",
        "grp@bots.hparams=option",  # a config group placed in the node: a file's values
    ]
    assert overridden_children(overrides, HPARAMS) == set()
    assert overridden_keys(overrides) == {
        "trainer.total_training_steps",
        "bots.selector",
        "bots.hparams_extra.lam",
        "bots",
        "data.hparams.lam",
    }


def test_the_key_of_every_plain_form():
    keys = overridden_keys(["a.b=1", "+c.d=x", "++e=2", "~f.g", "h=[1,2]", "i='x=y'"])
    assert keys == {"a.b", "c.d", "e", "f.g", "h", "i"}


def test_an_override_hydra_cannot_parse_is_named():
    with pytest.raises(ValueError, match=r"command-line override 'bots.hparams.lam' is not hydra override syntax"):
        overridden_keys(["trainer.x=1", "bots.hparams.lam"])
