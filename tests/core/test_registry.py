"""One registry for selectors, evidence plug-ins and selection rules; the command that lists it; presets; renames."""

import subprocess
import sys

import numpy as np
import pytest

from bots_verl.core import EVIDENCE, SELECTION_RULES, SELECTORS, Registry, build_selector
from bots_verl.core.__main__ import listing
from bots_verl.core.paper.bots_selectors import BETA_OPTIONS
from bots_verl.core.paper.selection_rules import top_k
from bots_verl.core.registry import defaults_of
from bots_verl.core.selector_base import Selector

N = 30
REF = np.column_stack([np.linspace(0, 0.5, N), np.linspace(0.4, 1, N)])


def test_one_registry_class_for_everything():
    assert all(isinstance(r, Registry) for r in (SELECTORS, EVIDENCE, SELECTION_RULES))
    reg = Registry("widget")

    @reg.register("a")
    class A:
        pass

    assert reg["a"] is A and A.name == "a"
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a")(A)
    with pytest.raises(ValueError, match=r"unknown widget 'b'; registered: \['a'\]"):
        reg.lookup("b")
    with pytest.raises(ValueError, match="unknown selector"):
        build_selector("botz", N)


def test_a_selector_registers_with_one_decorator():
    @SELECTORS.register("_test_first_k")
    class FirstK(Selector):
        """The first k tasks."""

        def _select(self, batch_size):
            return np.arange(batch_size, dtype=np.int64)

    try:
        assert FirstK.name == "_test_first_k"
        assert build_selector("_test_first_k", N).select(3).tolist() == [0, 1, 2]
        # registered without a group: listed apart from the core's own, last
        assert SELECTORS.group_of("_test_first_k") == "other"
        assert listing().split("selectors (")[1].split("evidence plug-ins")[0].rstrip().endswith("The first k tasks.")
    finally:
        del SELECTORS["_test_first_k"]
    assert "_test_first_k" not in listing()
    with pytest.raises(ValueError, match=r"group must be one of \['paper', 'peers', 'ours'\] or None, got 'mine'"):
        SELECTORS.register("_test_mine", group="mine")


# Issue 50: the groups --list prints, and the four variants that measured null are gone.
PAPER = {"bots", "implicit_only", "random", "offline_easy2hard", "sequential"}
PEERS = {"mopps", "greso", "dps"}
OURS = {"bots_warm", "bots_noref", "bots_partial_ref", "pass_rate_oracle"}
RETIRED = {"bots_plus", "irt", "bots_ref_graph", "ref_neighbours", "expected_distance", "bots_warm_alloc"}


def _sections(text):
    """``--list``'s text as {registry title: {group: [names]}}."""
    out, registry, group = {}, None, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            registry = line.split(" (")[0]
            out[registry] = {}
        elif line.startswith("  ") and not line.startswith("   "):
            group = line.split(":")[0].strip()
            out[registry][group] = []
        elif line.startswith("    ") and line[4] != " ":
            out[registry][group].append(line.split()[0])
    return out


def test_list_groups_the_selectors_as_paper_peers_and_ours():
    sections = _sections(listing())
    assert list(sections) == ["selectors", "evidence plug-ins", "selection rules", "options"]
    selectors = sections["selectors"]
    assert list(selectors) == ["paper", "peers", "ours"]  # the paper first, so a reader meets it before a peer
    assert (set(selectors["paper"]), set(selectors["peers"]), set(selectors["ours"])) == (PAPER, PEERS, OURS)
    assert sections["evidence plug-ins"] == {"paper": ["interpolation", "none"], "ours": ["neighbours"]}
    assert sections["selection rules"] == {"paper": ["greedy", "softmax", "thompson"]}
    assert sections["options"] == {"ours": ["lagged_evidence", "warm_start"]}  # the paper has none
    names = {name for groups in sections.values() for members in groups.values() for name in members}
    assert not names & RETIRED
    assert not set(SELECTORS) & RETIRED and not set(EVIDENCE) & RETIRED and not set(SELECTION_RULES) & RETIRED


def test_every_core_entry_lives_in_the_subpackage_of_its_group():
    for registry in (SELECTORS, EVIDENCE, SELECTION_RULES, BETA_OPTIONS):
        for name, entry in registry.items():
            package = entry.__module__.split(".")
            assert package[:2] == ["bots_verl", "core"], (name, entry.__module__)
            assert package[2] == registry.group_of(name), (name, entry.__module__)


def test_selection_rule_parameters_are_keyword_arguments(monkeypatch):
    def lowest_mean(alpha, beta, k, rng, *, target=0.5, offset=0.0):
        mean = alpha / (alpha + beta) + offset
        picked = top_k(-mean, k)
        return picked, mean[picked]

    monkeypatch.setitem(SELECTION_RULES, "lowest_mean", lowest_mean)
    assert defaults_of(lowest_mean) == {"target": 0.5, "offset": 0.0}
    sel = build_selector("mopps", N, selection="lowest_mean", offset=0.25)
    assert sel.hparams["offset"] == 0.25
    sel.update([4], [0.0], [16.0])
    assert sel.select(1).tolist() == [4]
    # a rule's parameter belongs to that rule only
    with pytest.raises(ValueError, match="unknown hyperparameter 'offset'"):
        build_selector("mopps", N, offset=0.25)
    with pytest.raises(ValueError, match="unknown hyperparameter 'tau'"):
        build_selector("mopps", N, tau=0.1)
    assert build_selector("mopps", N, selection="softmax", tau=0.05).hparams["tau"] == 0.05
    with pytest.raises(ValueError, match="tau > 0"):
        build_selector("mopps", N, selection="softmax", tau=0.0)


def test_list_command_prints_every_registered_name():
    out = subprocess.run(
        [sys.executable, "-m", "bots_verl.core", "--list"], capture_output=True, text=True, check=True
    ).stdout
    for registry in (SELECTORS, EVIDENCE, SELECTION_RULES):
        for name in registry:
            assert f"\n    {name} " in out, name
    assert "rho=0.0 (fixed)" in out and "tau=0.1" in out and "gamma=0.9" in out
    names = subprocess.run(
        [sys.executable, "-m", "bots_verl.core", "--names", "selectors"], capture_output=True, text=True, check=True
    ).stdout
    assert names.split() == sorted(SELECTORS)


@pytest.mark.parametrize(
    ("name", "hparams", "conflict"),
    [
        ("implicit_only", {"rho": 0.1}, "rho"),
        ("mopps", {"rho": 0.2}, "rho"),
        ("mopps", {"evidence": "interpolation"}, "evidence"),
        ("bots_noref", {"evidence": "interpolation"}, "evidence"),
    ],
)
def test_presets_refuse_overrides_of_what_defines_them(name, hparams, conflict):
    with pytest.raises(ValueError, match=rf"selector '{name}' is defined by {conflict}=.*refuses {conflict}="):
        build_selector(name, N, reference_pass_rates=REF, **hparams)


def test_presets_accept_their_own_values_and_bots_accepts_any():
    assert build_selector("implicit_only", N, reference_pass_rates=REF, rho=1).rho == 1.0
    assert build_selector("mopps", N, rho=0.0, evidence="none").rho == 0.0
    assert build_selector("bots", N, reference_pass_rates=REF, rho=0.2, lam=0.05).rho == 0.2


def test_retired_options_say_where_they_went():
    with pytest.raises(ValueError, match="'prior' of selector 'bots' was removed: .*'bots_ablation'"):
        build_selector("bots", N, reference_pass_rates=REF, prior="reference")
