"""A malformed checkpoint is a ValueError naming the problem and changes nothing (issue 13, core checkpoints)."""

import pickle

import numpy as np
import pytest
from selector_driver import drive

from bots_verl.core import EVIDENCE, ImplicitEvidence, build_selector

N = 40
REF = np.column_stack([np.linspace(0, 0.5, N), np.linspace(0.4, 1, N)])


def _trained(name="bots", seed=3, **hparams):
    sel = build_selector(name, N, reference_pass_rates=REF, seed=seed, **hparams)
    drive(sel, 4, batch=8)
    return sel


def _set(state, path, value):
    """Set ``state[a][b]...`` for ``path = "a/b/..."`` (``value`` may be a function of the old value)."""
    *parents, key = path.split("/")
    node = state
    for part in parents:
        node = node[part]
    node[key] = value(node[key]) if callable(value) else value


def _delete(state, path):
    *parents, key = path.split("/")
    node = state
    for part in parents:
        node = node[part]
    del node[key]


BAD_VALUES = [
    # the prior: NaN, negative, wrong shape (each used to load, and break the next update or select)
    ("extra/posterior/alpha0", float("nan"), "alpha0"),
    ("extra/posterior/beta0", -1.0, "beta0"),
    ("extra/posterior/alpha0", np.ones(N - 1), "alpha0"),
    ("extra/posterior/alpha0", np.full(N, np.inf), "alpha0"),
    ("extra/posterior/beta0", "1.0", "beta0"),
    ("extra/posterior/alpha", lambda a: a.astype(complex), "alpha"),
    ("extra/posterior/beta", lambda b: -b, "beta"),
    # counters: negative, fractional, huge (a huge one used to raise OverflowError)
    ("steps", -1, "steps"),
    ("selections", 2.5, "selections"),
    ("steps", 10**30, "steps"),
    ("times_selected", lambda t: t - 5, "times_selected"),
    ("times_selected", [10**20] * N, "times_selected"),
    ("times_selected", lambda t: np.full(N, 2**40, dtype=np.int64), "times_selected"),
    ("times_selected", lambda t: t.astype(float), "times_selected"),
    # evidence and diagnostics
    ("extra/evidence/mu", "abc", "mu"),
    ("extra/evidence/mu_raw", float("inf"), "mu_raw"),
    ("extra/evidence/degenerate_batches", -2, "degenerate_batches"),
    ("extra/last_update_stats", {"x": "y"}, "last_update_stats"),
    ("extra/last_selection/indices", lambda i: i + N, "last_selection"),
    ("last_batch_stats", ["not", "a", "dict"], "last_batch_stats"),
    ("hparams", None, "hparams"),
    ("rng", {"bit_generator": "PCG64", "state": {"state": "x", "inc": 1}}, "rng"),
    ("version", 99, "version"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD_VALUES)
def test_bad_value_is_a_value_error_and_changes_nothing(path, value, message):
    bad = _trained().state_dict()
    _set(bad, path, value)
    target = _trained(seed=9)
    before = pickle.dumps(target.state_dict())
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(bad)
    assert pickle.dumps(target.state_dict()) == before


@pytest.mark.parametrize(
    "path",
    [
        "steps",
        "rng",
        "extra",
        "extra/posterior",
        "extra/posterior/alpha",
        "extra/posterior/beta0",
        "extra/evidence/mu",
        "extra/evidence/degenerate_batches",
        "extra/last_selection/p",
    ],
)
def test_missing_key_is_a_value_error_naming_it(path):
    bad = _trained().state_dict()
    _delete(bad, path)
    target = _trained(seed=9)
    before = pickle.dumps(target.state_dict())
    with pytest.raises(ValueError, match=path.rsplit("/", 1)[-1]):
        target.load_state_dict(bad)
    assert pickle.dumps(target.state_dict()) == before


def test_not_a_dict():
    with pytest.raises(ValueError, match="dict"):
        _trained().load_state_dict([1, 2, 3])


def test_a_valid_checkpoint_still_loads_with_per_task_priors_and_from_version_1():
    sel = _trained()
    state = sel.state_dict()
    state["extra"]["posterior"]["alpha0"] = np.full(N, 2.0)
    fresh = build_selector("bots", N, reference_pass_rates=REF, seed=0)
    fresh.load_state_dict(state)
    assert fresh.posterior.alpha0.shape == (N,)
    # A version-1 checkpoint (written before the update diagnostics) loads; its stats come back under the new name.
    old = sel.state_dict()
    old["version"] = 1
    old["extra"]["last_implicit_stats"] = old["extra"].pop("last_update_stats")
    del old["extra"]["last_selection"]
    fresh = build_selector("bots", N, reference_pass_rates=REF, seed=0)
    fresh.load_state_dict(old)
    assert fresh.stats()["implicit/batch_mae"] == sel.stats()["implicit/batch_mae"]
    np.testing.assert_array_equal(fresh.alpha, sel.alpha)


class _BrokenEvidence(ImplicitEvidence):
    """A plug-in whose prediction turns NaN at its third batch (a bug in third-party code)."""

    def __init__(self, num_tasks, reference, **params):
        super().__init__(num_tasks, reference, **params)
        self.batches = 0

    def propose(self, indices, rates, attempts):
        batches = self.batches + 1
        p = np.full(self.num_tasks, np.nan if batches >= 3 else 0.5)
        return p, {"batches": batches}

    def commit(self, state):
        self.batches = state["batches"]

    def state_dict(self):
        return {"batches": self.batches}


def test_an_update_that_would_break_the_posterior_is_all_or_nothing(monkeypatch):
    monkeypatch.setitem(EVIDENCE, "broken", _BrokenEvidence)
    sel = build_selector("bots", N, evidence="broken", seed=0)
    drive(sel, 2, batch=8)
    before = pickle.dumps(sel.state_dict())
    with pytest.raises(ValueError, match="non-finite"):
        sel.update(np.arange(8), np.full(8, 4.0), np.full(8, 16.0))
    # neither the posterior nor the plug-in nor any counter moved
    assert pickle.dumps(sel.state_dict()) == before
    assert sel.evidence.batches == 2


def test_huge_attempts_are_rejected_before_they_reach_the_posterior():
    sel = _trained()
    before = pickle.dumps(sel.state_dict())
    with pytest.raises(ValueError, match="attempts above"):
        sel.update(np.arange(8), np.zeros(8), np.full(8, 1e308))
    assert pickle.dumps(sel.state_dict()) == before
    assert np.all(np.isfinite(sel.alpha)) and np.all(np.isfinite(sel.beta))


def test_changed_hyperparameters_on_resume_are_reported_as_applied_or_not(caplog):
    """``lam`` comes from the selector being built and applies; the prior ``alpha0`` lives in the posterior's state,
    so the checkpoint's value stays and the warning says so (it used to list it as if it were applied)."""
    state = _trained().state_dict()
    resumed = build_selector("bots", N, reference_pass_rates=REF, seed=0, lam=0.3, alpha0=2.0)
    with caplog.at_level("WARNING", logger="bots_verl.core.selector_base"):
        resumed.load_state_dict(state)
    applied, kept = (r.getMessage() for r in caplog.records)
    assert "applied from now on" in applied and "'lam': (0.1, 0.3)" in applied and "alpha0" not in applied
    assert "NOT applied" in kept and "'alpha0': (1.0, 2.0)" in kept
    assert resumed.posterior.alpha0 == 1.0 and resumed.hparams["alpha0"] == 1.0 and resumed.lam == 0.3
