"""The directions measured for bots_plus and not adopted: still runnable in the simulator's ablation."""

import pickle

import numpy as np
import pytest

from bots_verl.core import SELECTION_RULES, SELECTORS
from bots_verl.sim import SIM_SELECTORS, make_selector
from bots_verl.sim.bots_plus_ablation import main as ablation_main

N = 200
RNG = np.random.default_rng(8)
REF3 = np.sort(RNG.random((N, 3)), axis=1)
REF = np.array([[0.2, 0.6], [0.5, 0.9], [0.0, 0.4]])


def _drive(sel, steps, start=0, batch=16):
    out = []
    for t in range(start, start + steps):
        idx = sel.select(batch)
        out.append(idx.copy())
        sel.update(idx, (idx * 5 + t) % 17, np.full(idx.size, 16))
    return out


def test_registered_in_the_simulator_not_the_core():
    for name in ("oracle", "bots_ablation", "bots_plus_ablation"):
        assert name in SIM_SELECTORS and name not in SELECTORS
    assert "learnability" not in SELECTION_RULES  # the core's rule registry is untouched
    with pytest.raises(ValueError, match="unknown selection rule 'learnability'"):
        make_selector("bots_plus", N, reference_pass_rates=REF3, seed=0, selection="learnability")


def test_reference_prior():
    ref_prior = {"prior": "reference", "prior_strength": 4}
    sel = make_selector("bots_ablation", 3, reference_pass_rates=REF, seed=0, **ref_prior)
    np.testing.assert_allclose(sel.alpha, 1 + 4 * REF[:, 0])
    np.testing.assert_allclose(sel.beta, 1 + 4 * (1 - REF[:, 0]))
    strong = make_selector(
        "bots_ablation", 3, reference_pass_rates=REF, seed=0, prior="reference", prior_column=1, prior_strength=2
    )
    np.testing.assert_allclose(strong.alpha, 1 + 2 * REF[:, 1])
    np.testing.assert_allclose(make_selector("bots_ablation", 3, reference_pass_rates=REF, seed=0).alpha, 1.0)
    # forgetting pulls toward the per-task prior, not toward Beta(1, 1)
    sel = make_selector("bots_ablation", 3, reference_pass_rates=REF, seed=0, rho=0.0, **ref_prior)
    sel.update([0], [16], [16])
    for _ in range(300):
        sel.update([1], [8], [16])
    np.testing.assert_allclose(sel.alpha[[0, 2]], 1 + 4 * REF[[0, 2], 0])
    with pytest.raises(ValueError, match="prior_column"):
        make_selector("bots_plus_ablation", N, reference_pass_rates=REF3, seed=0, prior="reference", prior_column=3)
    with pytest.raises(ValueError, match="prior must be"):
        make_selector("bots_plus_ablation", N, reference_pass_rates=REF3, seed=0, prior="magic")


def test_adaptive_rho_follows_the_predictors_measured_accuracy():
    """The measured error sets rho: it rises for references that predict the policy, and stays low for shuffled ones.

    Over seeds 0-3 of this setup: 0.36-0.66 with the true references, 0.12-0.15 with shuffled ones.
    """
    true_p = REF3.mean(axis=1)
    rhos = {}
    for label, ref in (("good", REF3), ("shuffled", REF3[np.random.default_rng(0).permutation(N)])):
        sel = make_selector("bots_plus_ablation", N, reference_pass_rates=ref, seed=0, adaptive_rho=True)
        rng = np.random.default_rng(1)
        assert sel.rho == 0.1
        for _ in range(15):
            idx = sel.select(32)
            sel.update(idx, rng.binomial(16, true_p[idx]).astype(float), np.full(32, 16.0))
        rhos[label] = sel.stats()["adaptive/rho"]
    assert rhos["shuffled"] < 0.2 < 0.3 < rhos["good"]


def test_adaptive_lam_stays_in_range_and_a_rejected_update_restores_it():
    sel = make_selector("bots_plus_ablation", N, reference_pass_rates=REF3, seed=0, adaptive_lam=True)
    _drive(sel, 10)
    assert 0.02 <= sel.lam <= 0.5 and sel.post_err2 is not None
    before = pickle.dumps(sel.state_dict())
    with pytest.raises(ValueError):
        sel.update([1, 2], [17, 1], [16, 16])
    assert pickle.dumps(sel.state_dict()) == before


@pytest.mark.parametrize(
    ("name", "hparams"),
    [
        ("bots_plus_ablation", {"adaptive_rho": True, "adaptive_lam": True}),
        ("bots_plus_ablation", {"prior": "reference"}),
        ("bots_ablation", {"prior": "reference"}),
        ("bots_plus_ablation", {"selection": "learnability"}),
    ],
)
def test_round_trip_and_determinism(name, hparams):
    ref = REF3[:, [0, 2]] if name == "bots_ablation" else REF3
    sel = make_selector(name, N, reference_pass_rates=ref, seed=4, **hparams)
    _drive(sel, 6)
    state = pickle.loads(pickle.dumps(sel.state_dict()))
    expected = _drive(sel, 6, start=6)
    fresh = make_selector(name, N, reference_pass_rates=ref, seed=123, **hparams)
    fresh.load_state_dict(state)
    assert all(np.array_equal(a, b) for a, b in zip(expected, _drive(fresh, 6, start=6), strict=True))
    np.testing.assert_array_equal(sel.alpha, fresh.alpha)
    assert (sel.rho, sel.lam) == (fresh.rho, fresh.lam)


def test_learnability_prefers_sharp_mid_tasks():
    sel = make_selector(
        "bots_ablation", 30, reference_pass_rates=np.full((30, 2), 0.5), seed=0, rho=0.0, selection="learnability"
    )
    rates = np.repeat([0.05, 0.5, 0.95], 10)
    for _ in range(5):
        sel.update(np.arange(30), rates * 16, np.full(30, 16))
    assert set(sel.select(10).tolist()) == set(range(10, 20))


def test_the_ablation_script_runs(tmp_path):
    out = tmp_path / "results.md"
    ablation_main(["--seeds", "2", "--steps", "4", "--presets", "logic", "--sweep-presets", "logic", "--out", str(out)])
    text = out.read_text()
    for label in ("bots_refprior", "plus_refprior", "plus_adarho", "plus_adalam", "plus_greedy", "plus_learn"):
        assert f"| {label} |" in text
    assert text.count("### `logic`") == 7  # the preset and six sweep cells
