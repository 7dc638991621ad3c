"""The directions measured for bots and not adopted: still runnable in the simulator's ablation."""

import pickle

import numpy as np
import pytest

from bots_verl.core import SELECTION_RULES, SELECTORS
from bots_verl.sim import SIM_SELECTORS, make_selector

N = 200
RNG = np.random.default_rng(8)
REF2 = np.sort(RNG.random((N, 2)), axis=1)
REF = np.array([[0.2, 0.6], [0.5, 0.9], [0.0, 0.4]])


def _drive(sel, steps, start=0, batch=16):
    out = []
    for t in range(start, start + steps):
        idx = sel.select(batch)
        out.append(idx.copy())
        sel.update(idx, (idx * 5 + t) % 17, np.full(idx.size, 16))
    return out


def test_registered_in_the_simulator_not_the_core():
    for name in ("oracle", "bots_ablation"):
        assert name in SIM_SELECTORS and name not in SELECTORS
    assert "learnability" not in SELECTION_RULES  # the core's rule registry is untouched
    with pytest.raises(ValueError, match="unknown selection rule 'learnability'"):
        make_selector("bots", N, reference_pass_rates=REF2, seed=0, selection="learnability")


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
        make_selector("bots_ablation", N, reference_pass_rates=REF2, seed=0, prior="reference", prior_column=2)
    with pytest.raises(ValueError, match="prior must be"):
        make_selector("bots_ablation", N, reference_pass_rates=REF2, seed=0, prior="magic")


@pytest.mark.parametrize(
    ("name", "hparams"),
    [
        ("bots_ablation", {"prior": "reference"}),
        ("bots_ablation", {"selection": "learnability"}),
    ],
)
def test_round_trip_and_determinism(name, hparams):
    sel = make_selector(name, N, reference_pass_rates=REF2, seed=4, **hparams)
    _drive(sel, 6)
    state = pickle.loads(pickle.dumps(sel.state_dict()))
    expected = _drive(sel, 6, start=6)
    fresh = make_selector(name, N, reference_pass_rates=REF2, seed=123, **hparams)
    fresh.load_state_dict(state)
    assert all(np.array_equal(a, b) for a, b in zip(expected, _drive(fresh, 6, start=6), strict=True))
    np.testing.assert_array_equal(sel.alpha, fresh.alpha)


def test_learnability_prefers_sharp_mid_tasks():
    sel = make_selector(
        "bots_ablation", 30, reference_pass_rates=np.full((30, 2), 0.5), seed=0, rho=0.0, selection="learnability"
    )
    rates = np.repeat([0.05, 0.5, 0.95], 10)
    for _ in range(5):
        sel.update(np.arange(30), rates * 16, np.full(30, 16))
    assert set(sel.select(10).tolist()) == set(range(10, 20))
