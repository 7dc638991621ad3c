"""Evidence weighed by its age (``update(..., lags=...)``): lag 0 is the paper's update bit for bit, older evidence
counts as Eq. 1 would have forgotten it, and bad lags are refused without touching the selector."""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_verl.core import build_selector
from bots_verl.core.ours.ours_rules import OursBOTS, lag_weight

N = 40
_RNG = np.random.default_rng(3)
REF = np.sort(_RNG.integers(0, 17, size=(N, 2)) / 16, axis=1)
BETA_SELECTORS = ["bots", "mopps", "implicit_only", "bots_warm"]


def _build(name, **hparams):
    return build_selector(name, N, reference_pass_rates=None if name == "mopps" else REF, seed=7, **hparams)


def _steps(seed, count=12):
    """Batches with fractional outcomes and random lags, drawn once so every selector sees the same ones."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        batch = rng.choice(N, size=int(rng.integers(1, 9)), replace=False)
        attempts = rng.integers(1, 17, size=batch.size).astype(float)
        out.append((batch, rng.random(batch.size) * attempts, attempts, rng.integers(0, 6, size=batch.size)))
    return out


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", BETA_SELECTORS)
def test_lag_zero_is_the_synchronous_update_bit_for_bit(name):
    plain, zero_api, zero_weighted = _build(name), _build(name), _build(name)
    for batch, s, n, _ in _steps(0):
        for sel in (plain, zero_api, zero_weighted):
            sel.select(4)
        plain.update(batch, s, n)
        zero_api.update(batch, s, n, lags=[0] * batch.size)
        # the weighting itself with weight 1 (the public API routes all-zero lags to the plain update)
        zero_weighted._update_lagged(batch, s, n, np.zeros(batch.size, dtype=np.int64))
        for other in (zero_api, zero_weighted):
            assert _same_bits(plain.alpha, other.alpha) and _same_bits(plain.beta, other.beta)
    assert plain.stats() == pytest.approx(zero_api.stats(), nan_ok=True)


@pytest.mark.parametrize("name", ["bots", "mopps", "implicit_only"])
@pytest.mark.parametrize("lam", [0.1, 0.0, 1.0, 0.37])
def test_lagged_updates_match_the_plain_rule(name, lam):
    lib = _build(name, lam=lam)
    paper = OursBOTS(None if name == "mopps" else REF, num_tasks=N, seed=7, lam=lam, rho=lib.rho)
    for batch, s, n, lags in _steps(1, count=20):
        lib.update(batch, s, n, lags=lags)
        paper.update(batch, s, n, lags=lags)
        np.testing.assert_allclose(lib.alpha, paper.alpha, rtol=1e-12, atol=0)
        np.testing.assert_allclose(lib.beta, paper.beta, rtol=1e-12, atol=0)


def test_lag_weight_is_eq1_forgetting():
    np.testing.assert_array_equal(lag_weight([0, 1, 2], 0.1), [1.0, 0.9, 0.9**2])
    assert lag_weight([0], 1.0)[0] == 1.0 and lag_weight([3], 1.0)[0] == 0.0


def test_lagged_update_by_hand():
    sel = build_selector("mopps", 3)
    sel.update([0, 1], [4, 4], [16, 16], lags=[0, 2])
    # task 0: Eq. 1 as is; task 1: 0.81 of the same counts (two versions old)
    np.testing.assert_allclose(sel.alpha, [5.0, 1 + 0.81 * 4, 1.0])
    np.testing.assert_allclose(sel.beta, [13.0, 1 + 0.81 * 12, 1.0])


@settings(max_examples=60, deadline=None)
@given(
    lag=st.integers(0, 12),
    succ=st.floats(0, 1),
    attempts=st.integers(1, 32),
    lam=st.floats(0.0, 1.0),
    start=st.integers(0, 10),
)
def test_late_evidence_counts_as_in_time_evidence_forgotten_since(lag, succ, attempts, lam, start):
    """Explicit evidence only (mopps): evidence for task 0 reported ``lag`` steps late with its lag equals the same
    evidence reported in time and forgotten for ``lag`` steps (other tasks train meanwhile)."""
    s = succ * attempts
    in_time, late = build_selector("mopps", 3, lam=lam), build_selector("mopps", 3, lam=lam)
    for sel in (in_time, late):  # a common history, so task 0 does not start at the prior
        for i in range(start):
            sel.update([0, 1], [i % 3, 1], [3, 2])
    in_time.update([0], [s], [attempts])
    for _ in range(lag):
        in_time.update([1], [1], [2])
        late.update([1], [1], [2])
    late.update([0], [s], [attempts], lags=[lag])
    # both ran start + 1 + lag steps; only the order of task 0's evidence and the fillers differs
    np.testing.assert_allclose(late.alpha[0], in_time.alpha[0], rtol=1e-10)
    np.testing.assert_allclose(late.beta[0], in_time.beta[0], rtol=1e-10)


@settings(max_examples=60, deadline=None)
@given(
    lags=st.lists(st.integers(0, 20), min_size=2, max_size=2),
    succ=st.floats(0, 1),
    attempts=st.integers(1, 32),
    lam=st.floats(0.01, 1.0),
    name=st.sampled_from(["bots", "mopps", "implicit_only"]),
)
def test_older_evidence_moves_the_posterior_less(lags, succ, attempts, lam, name):
    """Same outcomes, two ages: the older one leaves a posterior with no more pseudo-counts and no further from
    where forgetting alone would put it; both stay finite and positive."""
    young, old = sorted(lags)
    s = succ * attempts
    out = {}
    for lag in (young, old):
        sel = _build(name, lam=lam)
        sel.update([0, 1], [s, 1.0], [attempts, 2.0], lags=[lag, 0])
        out[lag] = (sel.alpha[0], sel.beta[0])
    base = build_selector("mopps", N, lam=lam)
    base.update([1], [1.0], [2.0])  # what forgetting alone leaves of task 0 (the prior, here)
    (a_young, b_young), (a_old, b_old) = out[young], out[old]
    assert a_old <= a_young + 1e-12 and b_old <= b_young + 1e-12
    assert a_old >= base.alpha[0] - 1e-12 and b_old >= base.beta[0] - 1e-12
    assert np.isfinite([a_old, b_old]).all() and min(a_old, b_old) > 0


@pytest.mark.parametrize(
    ("lags", "message"),
    [
        ([0, -1], "lie in"),
        ([0.0, 1.0], "non-negative integers"),
        ([True, False], "non-negative integers"),
        ([1], "differ in length"),
        ([[0, 1]], "1-D"),
        (["0", "1"], "non-negative integers"),
        ([0, 2**40], "lie in"),
    ],
)
@pytest.mark.parametrize("name", ["bots", "random", "greso"])
def test_bad_lags_are_refused_and_change_nothing(name, lags, message):
    sel = build_selector(name, N, reference_pass_rates=REF if name == "bots" else None, seed=1)
    sel.select(4)
    sel.update([0, 1], [1, 2], [4, 4])
    before = copy.deepcopy(sel.state_dict())
    with pytest.raises(ValueError, match=message):
        sel.update([2, 3], [1, 1], [4, 4], lags=lags)
    after = sel.state_dict()
    assert after["steps"] == before["steps"] and after["rng"] == before["rng"]
    for key in ("posterior",):
        if key in before["extra"]:
            np.testing.assert_array_equal(after["extra"][key]["alpha"], before["extra"][key]["alpha"])
            np.testing.assert_array_equal(after["extra"][key]["beta"], before["extra"][key]["beta"])


def test_selectors_without_a_posterior_accept_lags():
    for name in ("random", "sequential", "greso"):
        sel = build_selector(name, N, seed=0)
        sel.update([0, 1], [1, 2], [4, 4], lags=[3, 0])
        assert sel.steps == 1
