"""The paper's update rule, checked against hand-computed numbers on a 3-task pool."""

import numpy as np
import pytest

from bots_verl.core import build_selector

# weak, strong reference pass rates
REF = np.array([[0.2, 0.6], [0.5, 0.9], [0.0, 0.4]])


def test_interpolation_update_by_hand():
    sel = build_selector("bots", 3, reference_pass_rates=REF)
    sel.update([0], [4], [16])
    # mu = (0.25 - 0.2) / (0.6 - 0.2) = 0.125; p_tilde = w + 0.125 (s - w) = [., 0.55, 0.05]; rho * m = 1.6
    np.testing.assert_allclose(sel.alpha, [5.0, 1.88, 1.08])
    np.testing.assert_allclose(sel.beta, [13.0, 1.72, 2.52])
    assert sel.stats()["implicit/capability_mu"] == pytest.approx(0.125)

    sel.update([1, 2], [8, 0], [16, 16])
    # mu_raw = (0.25 - 0.25) / 0.4 = 0; mu = 0.9 * 0.125 = 0.1125; p_tilde_0 = 0.2 + 0.1125 * 0.4 = 0.245
    np.testing.assert_allclose(sel.alpha, [4.992, 9.792, 1.072])
    np.testing.assert_allclose(sel.beta, [13.008, 9.648, 18.368])
    assert sel.stats()["implicit/capability_mu"] == pytest.approx(0.1125)


def test_explicit_only_update_by_hand():
    sel = build_selector("mopps", 3)
    sel.update([0], [4], [16])
    np.testing.assert_allclose(sel.alpha, [5.0, 1.0, 1.0])
    np.testing.assert_allclose(sel.beta, [13.0, 1.0, 1.0])
    sel.update([1, 2], [8, 0], [16, 16])
    # task 0 decays toward the Beta(1, 1) prior: 0.9 * 5 + 0.1 = 4.6, 0.9 * 13 + 0.1 = 11.8
    np.testing.assert_allclose(sel.alpha, [4.6, 9.0, 1.0])
    np.testing.assert_allclose(sel.beta, [11.8, 9.0, 17.0])


def test_fractional_successes_and_explicit_scale():
    sel = build_selector("bots", 3, reference_pass_rates=REF, implicit_scale=8)
    sel.update([0], [2.5], [10])
    # r = 0.25 as above, so mu = 0.125; rho * m = 0.8 with the explicit scale
    np.testing.assert_allclose(sel.alpha, [1 + 2.5, 1 + 0.8 * 0.55, 1 + 0.8 * 0.05])
    np.testing.assert_allclose(sel.beta, [1 + 7.5, 1 + 0.8 * 0.45, 1 + 0.8 * 0.95])


def test_implicit_only_gives_unselected_tasks_full_weight():
    sel = build_selector("implicit_only", 3, reference_pass_rates=REF)
    sel.update([0], [4], [16])
    np.testing.assert_allclose(sel.alpha, [5.0, 1 + 16 * 0.55, 1 + 16 * 0.05])


@pytest.mark.parametrize("name", ["bots", "mopps", "implicit_only"])
def test_proposition_2_steady_state_ess(name):
    """Paper Prop. 2: never-selected ESS -> a0 + b0 + rho m / lam, always-selected -> a0 + b0 + m / lam."""
    lam, m = 0.1, 16
    sel = build_selector(name, 2, reference_pass_rates=REF[:2])
    rho = sel.rho
    for _ in range(400):
        sel.update([0], [8], [m])
    ess = sel.alpha + sel.beta
    assert ess[0] == pytest.approx(2 + m / lam, rel=1e-6)
    assert ess[1] == pytest.approx(2 + rho * m / lam, rel=1e-6)


def test_degenerate_reference_batch_keeps_previous_mu():
    ref = np.array([[0.3, 0.3], [0.2, 0.8], [0.1, 0.1], [0.0, 1.0]])
    sel = build_selector("bots", 4, reference_pass_rates=ref)
    before = (sel.alpha.copy(), sel.beta.copy())
    sel.update([0, 2], [16, 0], [16, 16])  # references equal on this batch: mu is undefined
    stats = sel.stats()
    assert np.isnan(stats["implicit/capability_mu"]) and stats["implicit/degenerate_batches"] == 1
    # no implicit evidence before the first informative batch: unselected tasks only decay (to the same prior)
    np.testing.assert_allclose(sel.alpha[[1, 3]], before[0][[1, 3]])
    sel.update([1], [8], [16])  # mu_raw = (0.5 - 0.2) / 0.6 = 0.5
    assert sel.stats()["implicit/capability_mu"] == pytest.approx(0.5)
    sel.update([0, 2], [0, 16], [16, 16])  # degenerate again, and wildly off: mu must not move or blow up
    assert sel.stats()["implicit/capability_mu"] == pytest.approx(0.5)
    assert np.all(np.isfinite(sel.alpha)) and np.all(sel.alpha > 0)


def test_mu_extrapolates_unclipped_but_prediction_is_clipped():
    sel = build_selector("bots", 3, reference_pass_rates=REF)
    sel.update([2], [16], [16])  # r = 1 on a task with w=0, s=0.4: mu = 2.5, beyond the strong reference
    assert sel.stats()["implicit/capability_mu"] == pytest.approx(2.5)
    # p_tilde_1 = 0.5 + 2.5 * 0.4 = 1.5 -> clipped to 1: alpha gains rho m = 1.6, beta gains nothing
    assert sel.alpha[1] == pytest.approx(1 + 1.6)
    assert sel.beta[1] == pytest.approx(1.0)
