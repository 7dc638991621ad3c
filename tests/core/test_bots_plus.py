"""The ``irt`` evidence plug-in, the ``bots_plus`` selector and non-binary rewards."""

import pickle

import numpy as np
import pytest
from selector_driver import drive

from bots_verl.core import EVIDENCE, SELECTORS, build_selector
from bots_verl.core.bots_plus import rewards_to_successes
from bots_verl.core.irt_evidence import IRTEvidence
from bots_verl.core.logistic import logit

N = 300
RNG = np.random.default_rng(8)
REF3 = np.sort(RNG.random((N, 3)), axis=1)


def test_registered_and_bots_untouched():
    assert "bots_plus" in SELECTORS and "irt" in EVIDENCE
    # bots_plus must not change the paper-exact selector.
    bots = SELECTORS["bots"].DEFAULTS
    assert (bots["evidence"], bots["lam"], bots["rho"], bots["selection"]) == ("interpolation", 0.1, 0.1, "thompson")


def test_irt_first_update_by_hand():
    """One batch, one reference column: the weighted ridge fit, residuals and prediction, computed by hand."""
    ref = np.array([[0.2], [0.5], [0.8], [0.5]])
    ev = IRTEvidence(4, ref, forget=0.0, ridge=1.0, residual_forget=0.0, tau2_init=1.0)
    assert ev.predict() is None
    idx, rates, n = np.array([0, 1, 2]), np.array([0.25, 0.5, 1.0]), np.full(3, 16.0)
    pred = ev.observe(idx, rates, n)
    q = (rates * n + 0.5) / (n + 1)
    y = np.log(q / (1 - q))
    w = n * q * (1 - q)
    x = np.column_stack([np.ones(3), logit(np.clip(ref[:3, 0], 0.02, 0.98))])
    reg = 4.0 * np.eye(2)
    coef = np.linalg.solve(x.T @ (w[:, None] * x) + reg, x.T @ (w * y) + reg @ np.array([0.0, 1.0]))
    np.testing.assert_allclose(ev.coef, coef)
    res = y - x @ coef
    tau2 = float(np.clip(0.9 * 1.0 + 0.1 * np.mean(res**2 - 1 / w), 0.05, 25.0))
    assert ev.tau2 == pytest.approx(tau2)
    np.testing.assert_allclose(ev.res_mean[:3], res)
    np.testing.assert_allclose(ev.res_prec[:3], w)
    assert ev.res_prec[3] == 0.0
    z = np.column_stack([np.ones(4), logit(np.clip(ref[:, 0], 0.02, 0.98))]) @ coef
    z[:3] += res * w / (w + 1 / tau2)
    np.testing.assert_allclose(pred, 1 / (1 + np.exp(-z)))
    # The unobserved task 3 is predicted from the regression alone.
    assert pred[3] == pytest.approx(1 / (1 + np.exp(-z[3])))


def test_irt_recovers_a_logit_linear_policy():
    """With noise-free rates that are exactly logit-linear in two references, the fit finds the coefficients."""
    rng = np.random.default_rng(0)
    ref = rng.uniform(0.05, 0.95, size=(2000, 2))
    true = np.array([-0.7, 0.3, 0.6])
    z = true[0] + logit(ref) @ true[1:]
    ev = IRTEvidence(2000, ref, residual=False, ridge=1e-6)
    for _ in range(30):
        idx = rng.choice(2000, 64, replace=False)
        p = 1 / (1 + np.exp(-z[idx]))
        # 1e6 attempts: the empirical logit equals the true one up to ~1e-3
        ev.observe(idx, p, np.full(64, 1e6))
    np.testing.assert_allclose(ev.coef, true, atol=1e-2)


def test_irt_residual_decays_and_needs_reference():
    ev = IRTEvidence(3, np.array([[0.5], [0.5], [0.5]]), residual_forget=0.5)
    ev.observe(np.array([0]), np.array([1.0]), np.array([16.0]))
    prec = ev.res_prec[0]
    ev.observe(np.array([1]), np.array([0.5]), np.array([16.0]))
    assert ev.res_prec[0] == pytest.approx(0.5 * prec)
    with pytest.raises(ValueError, match="reference"):
        IRTEvidence(3, None)
    with pytest.raises(ValueError, match="forget"):
        IRTEvidence(3, np.ones((3, 1)) * 0.5, forget=1.0)


def test_bots_plus_posterior_learns_a_logit_linear_policy_from_three_columns():
    """Behaviour: trained tasks get their explicit counts, every other task rho * m pseudo-observations of a
    prediction that tracks the truth, so after a few batches the posterior means of never-trained tasks rank them."""
    rng = np.random.default_rng(3)
    true_p = 1 / (1 + np.exp(-(0.4 + logit(np.clip(REF3, 0.02, 0.98)) @ np.array([0.2, 0.3, 0.5]))))
    sel = build_selector("bots_plus", N, reference_pass_rates=REF3, seed=0)
    trained = set()
    for _ in range(6):
        before = sel.alpha + sel.beta
        idx = sel.select(32)
        s = rng.binomial(16, true_p[idx]).astype(float)
        sel.update(idx, s, np.full(32, 16.0))
        ess = sel.alpha + sel.beta
        rest = np.setdiff1d(np.arange(N), idx)
        # forgetting toward Beta(1, 1), then 16 explicit or rho * m = 1.6 implicit pseudo-observations
        np.testing.assert_allclose(ess[idx], 0.9 * before[idx] + 0.2 + 16)
        np.testing.assert_allclose(ess[rest], 0.9 * before[rest] + 0.2 + 1.6)
        trained.update(idx.tolist())
    never = np.setdiff1d(np.arange(N), sorted(trained))
    assert never.size > 50
    mean = sel.alpha / (sel.alpha + sel.beta)
    assert np.corrcoef(mean[never], true_p[never])[0, 1] > 0.9
    # the paper's bots cannot use three columns
    with pytest.raises(ValueError, match="exactly two"):
        build_selector("bots", N, reference_pass_rates=REF3)


@pytest.mark.parametrize("hparams", [{}, {"selection": "greedy"}, {"residual": False}])
def test_round_trip_and_determinism(hparams):
    sel = build_selector("bots_plus", N, reference_pass_rates=REF3, seed=4, **hparams)
    drive(sel, 6, mult=5)
    state = pickle.loads(pickle.dumps(sel.state_dict()))
    expected = drive(sel, 6, start=6, mult=5)
    fresh = build_selector("bots_plus", N, reference_pass_rates=REF3, seed=123, **hparams)
    fresh.load_state_dict(state)
    assert all(np.array_equal(a, b) for a, b in zip(expected, drive(fresh, 6, start=6, mult=5), strict=True))
    np.testing.assert_array_equal(sel.alpha, fresh.alpha)
    # Same seed, same outcomes: same selections.
    twins = [build_selector("bots_plus", N, reference_pass_rates=REF3, seed=4, **hparams) for _ in range(2)]
    first, second = (drive(t, 12, mult=5) for t in twins)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_rejected_update_leaves_state_unchanged():
    sel = build_selector("bots_plus", N, reference_pass_rates=REF3, seed=0)
    drive(sel, 3, mult=5)
    before = pickle.dumps(sel.state_dict())
    for bad in [
        ([1, 1], [1, 1], [16, 16]),
        ([1, 2], [17, 1], [16, 16]),
        ([1, N], [1, 1], [16, 16]),
        ([1, 2], [np.nan, 1], [16, 16]),
    ]:
        with pytest.raises(ValueError):
            sel.update(*map(np.asarray, bad))
    assert pickle.dumps(sel.state_dict()) == before


def test_bad_checkpoint_is_rejected_before_any_change():
    sel = build_selector("bots_plus", N, reference_pass_rates=REF3, seed=0)
    drive(sel, 2, mult=5)
    other = build_selector("bots_plus", N, reference_pass_rates=REF3, seed=1)
    before = pickle.dumps(other.state_dict())
    for key, value, message in [
        ("res_prec", np.zeros(N - 1), "res_prec"),
        ("tau2", -1.0, "tau2"),
        ("fitted", "yes", "fitted"),
        ("coef", np.array([1.0, np.nan, 0.0, 0.0]), "coef"),
    ]:
        bad = sel.state_dict()
        bad["extra"]["evidence"][key] = value
        with pytest.raises(ValueError, match=message):
            other.load_state_dict(bad)
        assert pickle.dumps(other.state_dict()) == before


def test_hparam_validation():
    with pytest.raises(ValueError, match="needs reference_pass_rates"):
        build_selector("bots_plus", N)  # the irt evidence needs references
    with pytest.raises(ValueError, match="unknown hyperparameter 'gamma'"):
        build_selector("bots_plus", N, reference_pass_rates=REF3, gamma=0.9)
    with pytest.raises(ValueError, match="'bots_plus' is defined by evidence='irt'"):
        build_selector("bots_plus", N, reference_pass_rates=REF3[:, :2], evidence="interpolation")
    # options measured and not adopted moved to the simulator, with a message that says where
    for option in ({"adaptive_rho": True}, {"prior": "reference"}):
        with pytest.raises(ValueError, match="simulator's ablation keeps it as selector 'bots_plus_ablation'"):
            build_selector("bots_plus", N, reference_pass_rates=REF3, **option)
    build_selector("bots_plus", 2, reference_pass_rates=REF3[:2])  # the verl settings check builds a 2-task pool


def test_rewards_to_successes():
    s, n = rewards_to_successes([[1.0, 0.0, 0.5, np.nan], [0.2, 0.2, 0.2, 0.2]])
    np.testing.assert_allclose(s, [1.5, 0.8])
    np.testing.assert_allclose(n, [3, 4])
    s, n = rewards_to_successes([[-1.0, 1.0, 0.0, -1.5]], lo=-1.0, hi=1.0)
    np.testing.assert_allclose(s, [0 + 1 + 0.5 + 0])
    with pytest.raises(ValueError):
        rewards_to_successes([[np.nan, np.nan]])
    with pytest.raises(ValueError):
        rewards_to_successes([[0.5]], lo=1.0, hi=0.0)
    # Fractional successes flow into the selector unchanged.
    sel = build_selector("bots_plus", N, reference_pass_rates=REF3)
    s, n = rewards_to_successes(RNG.random((4, 16)))
    sel.update(np.arange(4), s, n)
    np.testing.assert_allclose(sel.alpha[:4], 1 + s)
