"""The optimised selectors compute exactly the paper's rules, as written plainly in
``bots_verl.core.paper.paper_rules``."""

import numpy as np
import pytest

from bots_verl.core import build_selector
from bots_verl.core.paper.paper_rules import PaperBOTS

N = 60
RNG = np.random.default_rng(5)
REF = np.sort(RNG.integers(0, 17, size=(N, 2)) / 16, axis=1)
# Tasks 0..9 have equal references: a batch of them alone is degenerate (mu stays where it was).
REF[:10, 1] = REF[:10, 0]

PRESETS = {"bots": {}, "mopps": {"rho": 0.0}, "implicit_only": {"rho": 1.0}}


def _twins(name, **hparams):
    """A library selector and the paper's plain version with the same settings and seed."""
    lib = build_selector(name, N, reference_pass_rates=REF, seed=11, **hparams)
    paper = PaperBOTS(
        None if name == "mopps" else REF,
        num_tasks=N,
        seed=11,
        lam=lib.lam,
        rho=lib.rho,
        target=lib.target,
        implicit_scale=lib.implicit_scale,
    )
    return lib, paper


def _outcomes(rng, size):
    """Fractional successes out of varying attempts (the library's general case)."""
    attempts = rng.integers(1, 33, size=size).astype(float)
    return rng.random(size) * attempts, attempts


def _assert_same_posterior(lib, paper):
    np.testing.assert_allclose(lib.alpha, paper.alpha, rtol=1e-12, atol=0)
    np.testing.assert_allclose(lib.beta, paper.beta, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("hparams", [{}, {"lam": 0.0}, {"lam": 1.0}, {"implicit_scale": 8.0}])
def test_every_update_matches_the_paper(name, hparams):
    lib, paper = _twins(name, **hparams)
    rng = np.random.default_rng(0)
    degenerate = np.arange(4)  # equal references
    for step in range(25):
        # Step 0 is degenerate: no mu, so no implicit evidence (first-update behaviour); step 1 is the first
        # informative batch (mu = mu_raw); later degenerate batches keep mu.
        batch = degenerate if step in (0, 7, 8) else lib.select(int(rng.integers(1, 12)))
        s, n = _outcomes(rng, batch.size)
        lib.update(batch, s, n)
        paper.update(batch, s, n)
        _assert_same_posterior(lib, paper)
        if name != "mopps":
            mu = lib.evidence.mu
            assert (mu is None and paper.mu is None) or mu == pytest.approx(paper.mu, rel=1e-12)
    if name != "mopps":
        assert lib.stats()["implicit/degenerate_batches"] >= 3  # ours, and any selected batch of tasks 0..9


def test_first_update_has_no_implicit_evidence_then_mu_equals_mu_raw():
    lib, paper = _twins("bots")
    lib.update([0, 1], [3.0, 5.0], [16.0, 16.0])  # degenerate: references equal
    paper.update(np.array([0, 1]), [3.0, 5.0], [16.0, 16.0])
    untouched = np.setdiff1d(np.arange(N), [0, 1])
    np.testing.assert_allclose(lib.alpha[untouched], 1.0)  # forgetting toward Beta(1, 1) leaves them at 1
    _assert_same_posterior(lib, paper)
    batch = np.array([20, 30, 40])
    lib.update(batch, [8.0, 0.0, 16.0], [16.0, 16.0, 16.0])
    paper.update(batch, [8.0, 0.0, 16.0], [16.0, 16.0, 16.0])
    expected_mu = (8 / 16 - REF[batch, 0].mean()) / (REF[batch, 1].mean() - REF[batch, 0].mean())
    assert lib.evidence.mu == pytest.approx(expected_mu, rel=1e-12)
    assert paper.mu == pytest.approx(expected_mu, rel=1e-12)
    _assert_same_posterior(lib, paper)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_thompson_selection_matches_the_paper(name):
    """Given the same posterior and generator state, both pick the same tasks in the same order."""
    lib, paper = _twins(name)
    rng = np.random.default_rng(1)
    for _ in range(10):
        paper.alpha, paper.beta = lib.alpha.copy(), lib.beta.copy()
        paper.rng.bit_generator.state = lib.rng.bit_generator.state
        batch = lib.select(8)
        np.testing.assert_array_equal(batch, paper.select(8))
        s, n = _outcomes(rng, batch.size)
        lib.update(batch, s, n)
