"""Per-update diagnostics of the Beta selectors: estimator quality and the bias of the sampled p."""

import pickle

import numpy as np
import pytest

from bots_verl.core import build_selector
from bots_verl.core.selection_metrics import pearson, roc_auc

N = 400
RNG = np.random.default_rng(2)
TRUE_P = RNG.uniform(0.05, 0.95, N)
# weak and strong references bracketing the truth: the interpolation can recover it almost exactly
REF = np.column_stack([np.clip(TRUE_P - 0.2, 0, 1), np.clip(TRUE_P + 0.2, 0, 1)])
KEYS = (
    "estimator/pearson",
    "estimator/auc",
    "selection/sampled_p_mean",
    "selection/observed_p_mean",
    "selection/sampled_p_bias",
)


def _step(sel, rng, batch=64, rollouts=64):
    idx = sel.select(batch)
    s = rng.binomial(rollouts, TRUE_P[idx]).astype(float)
    sel.update(idx, s, np.full(batch, float(rollouts)))
    return idx, s / rollouts


def test_estimator_quality_is_the_prediction_made_before_the_update():
    sel = build_selector("bots", N, reference_pass_rates=REF, seed=0)
    rng = np.random.default_rng(0)
    _step(sel, rng)
    stats = sel.stats()
    assert set(KEYS) <= set(stats)
    # no prediction existed before the first update
    assert np.isnan(stats["estimator/pearson"]) and np.isnan(stats["estimator/auc"])
    idx = sel.select(64)
    predicted = sel.evidence.predict(idx)  # what the previous step assumed for these tasks
    s = rng.binomial(64, TRUE_P[idx]).astype(float)
    sel.update(idx, s, np.full(64, 64.0))
    stats = sel.stats()
    assert stats["estimator/pearson"] == pytest.approx(pearson(predicted, s / 64))
    assert stats["estimator/auc"] == pytest.approx(roc_auc(predicted, s / 64 >= 0.5))
    # the references bracket the truth, so the prediction ranks the batch well
    assert stats["estimator/pearson"] > 0.8 and stats["estimator/auc"] > 0.85


def test_uninformative_references_give_a_low_correlation():
    shuffled = REF[np.random.default_rng(9).permutation(N)]
    sel = build_selector("bots", N, reference_pass_rates=shuffled, seed=0)
    rng = np.random.default_rng(1)
    values = []
    for _ in range(8):
        _step(sel, rng)
        values.append(sel.stats()["estimator/pearson"])
    assert abs(np.nanmean(values)) < 0.3


def test_sampled_p_is_the_rules_draw_over_the_selected_tasks_in_the_update():
    sel = build_selector("bots", N, reference_pass_rates=REF, seed=4)
    rng = np.random.default_rng(4)
    for _ in range(3):
        _step(sel, rng)
    state = sel.rng.bit_generator.state
    draws = np.random.Generator(np.random.PCG64())
    draws.bit_generator.state = state
    p_hat = draws.beta(sel.alpha, sel.beta)  # the same Thompson draws the next select makes
    idx = sel.select(32)
    # only half of the selected tasks come back in this update, with some tasks that were not selected
    back = idx[:16]
    extra = np.setdiff1d(np.arange(N), idx)[:5]
    batch = np.concatenate([back, extra])
    s = rng.binomial(16, TRUE_P[batch]).astype(float)
    sel.update(batch, s, np.full(batch.size, 16.0))
    stats = sel.stats()
    assert stats["selection/sampled_p_mean"] == pytest.approx(p_hat[back].mean())
    assert stats["selection/observed_p_mean"] == pytest.approx((s[:16] / 16).mean())
    assert stats["selection/sampled_p_bias"] == pytest.approx(p_hat[back].mean() - (s[:16] / 16).mean())


def test_thompson_draws_of_the_selected_tasks_sit_near_the_target():
    """Selection picks draws close to p* = 0.5, so the sampled p of the batch is ~0.5 whatever the truth."""
    sel = build_selector("mopps", N, seed=0)
    rng = np.random.default_rng(3)
    sampled = []
    for _ in range(20):
        _step(sel, rng)
        sampled.append(sel.stats()["selection/sampled_p_mean"])
    assert abs(np.mean(sampled) - 0.5) < 0.05
    # mopps has no plug-in, so no estimator quality
    assert np.isnan(sel.stats()["estimator/pearson"])


def test_no_selection_before_the_update_gives_nan_selection_stats():
    sel = build_selector("bots", N, reference_pass_rates=REF, seed=0)
    sel.update(np.arange(10), np.full(10, 8.0), np.full(10, 16.0))
    stats = sel.stats()
    assert np.isnan(stats["selection/sampled_p_mean"]) and np.isnan(stats["selection/sampled_p_bias"])


@pytest.mark.parametrize("cut", ["after_update", "between_select_and_update"])
def test_a_resumed_run_logs_the_same_diagnostics(cut):
    def run(resume_at=None):
        sel = build_selector("bots", N, reference_pass_rates=REF, seed=7)
        rng = np.random.default_rng(7)
        logged = []
        for t in range(6):
            idx = sel.select(32)
            if t == resume_at and cut == "between_select_and_update":
                fresh = build_selector("bots", N, reference_pass_rates=REF, seed=0)
                fresh.load_state_dict(pickle.loads(pickle.dumps(sel.state_dict())))
                sel = fresh
            s = rng.binomial(16, TRUE_P[idx]).astype(float)
            sel.update(idx, s, np.full(32, 16.0))
            if t == resume_at and cut == "after_update":
                fresh = build_selector("bots", N, reference_pass_rates=REF, seed=0)
                fresh.load_state_dict(pickle.loads(pickle.dumps(sel.state_dict())))
                assert fresh.stats() == pytest.approx(sel.stats(), nan_ok=True)
                sel = fresh
            logged.append({k: sel.stats()[k] for k in KEYS})
        return logged

    straight, resumed = run(), run(resume_at=3)
    for a, b in zip(straight, resumed, strict=True):
        assert a == pytest.approx(b, nan_ok=True)


def test_batch_composition_splits_degenerate_groups_by_first_visit_and_revisit():
    """Issue 38's gap logging: all-wrong / all-right shares, and degenerate shares among first visits and revisits."""
    from bots_verl.core.selection_metrics import batch_composition

    s = np.array([0.0, 8.0, 3.0, 0.0, 5.0])
    n = np.full(5, 8.0)
    times = np.array([1, 1, 1, 3, 2])  # three first visits (one all-wrong, one all-right), two revisits
    out = batch_composition(s, n, times)
    assert out["batch/all_wrong_frac"] == pytest.approx(2 / 5)
    assert out["batch/all_right_frac"] == pytest.approx(1 / 5)
    assert out["batch/first_visit_frac"] == pytest.approx(3 / 5)
    assert out["batch/degenerate_first_frac"] == pytest.approx(2 / 3)
    assert out["batch/degenerate_revisit_frac"] == pytest.approx(1 / 2)
    # a batch of first visits only has no revisit share (left out, not NaN: checkpoints compare equal)
    assert "batch/degenerate_revisit_frac" not in batch_composition(s, n, np.ones(5))
    assert batch_composition(np.empty(0), np.empty(0), np.empty(0)) == {}


def test_selector_logs_batch_composition_and_posterior_gap_without_changing_selection():
    """The base selector logs the composition; BOTS the pre-update posterior's gap to the observed rates."""
    rng = np.random.default_rng(0)
    sel = build_selector("bots", N, reference_pass_rates=REF, seed=3)
    idx, rates = _step(sel, rng)
    st = sel.stats()
    assert st["batch/first_visit_frac"] == 1.0 and "batch/degenerate_revisit_frac" not in st
    # before the first update every posterior mean is the flat prior's 0.5
    assert st["selection/posterior_mean_mae"] == pytest.approx(np.abs(0.5 - rates).mean())
    assert st["selection/posterior_ess"] == pytest.approx(2.0)
    a, b = sel.alpha.copy(), sel.beta.copy()
    idx, rates = _step(sel, rng)
    assert sel.stats()["selection/posterior_mean_mae"] == pytest.approx(np.abs(a[idx] / (a + b)[idx] - rates).mean())
    assert sel.stats()["selection/posterior_ess"] == pytest.approx((a + b)[idx].mean())
