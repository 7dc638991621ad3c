"""Selection rules, baselines, determinism and checkpoint round trips."""

import pickle

import numpy as np
import pytest
from selector_driver import drive as _drive

from bots_verl.core import SELECTORS, build_selector

N = 200
RNG = np.random.default_rng(123)
REF = np.sort(RNG.random((N, 2)), axis=1)
# task embeddings for the selectors that read the task graph (bots_noref, ...); the others ignore them
EMB = RNG.normal(size=(N, 8))


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_batches_are_unique_and_in_range(name):
    sel = build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=1)
    for idx in _drive(sel, 20, batch=50):
        assert idx.dtype == np.int64 and idx.size == 50
        assert np.unique(idx).size == 50 and idx.min() >= 0 and idx.max() < N


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_same_seed_same_selections(name):
    a = _drive(build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=7), 10)
    b = _drive(build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=7), 10)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", ["bots", "mopps", "implicit_only", "random"])
def test_different_seeds_differ(name):
    a = _drive(build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=1), 3)
    b = _drive(build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=2), 3)
    assert not all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


# Every selector with its defaults, and the Beta selectors with each selection rule.
ROUND_TRIPS = [(name, {}) for name in sorted(SELECTORS)] + [
    (name, rule)
    for name in ("bots", "mopps", "implicit_only")
    for rule in ({"selection": "greedy"}, {"selection": "softmax", "tau": 0.05})
]


@pytest.mark.parametrize(("name", "hparams"), ROUND_TRIPS)
def test_state_dict_round_trip_continues_identically(name, hparams):
    sel = build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=3, **hparams)
    _drive(sel, 5)
    # the checkpoint goes through pickle, as in verl's torch.save(data.pt)
    state = pickle.loads(pickle.dumps(sel.state_dict()))
    expected = _drive(sel, 5, start=5)
    fresh = build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=999, **hparams)
    fresh.load_state_dict(state)
    resumed = _drive(fresh, 5, start=5)
    assert all(np.array_equal(x, y) for x, y in zip(expected, resumed, strict=True))
    if hasattr(sel, "alpha"):
        np.testing.assert_array_equal(sel.alpha, fresh.alpha)
        assert sel.stats() == pytest.approx(fresh.stats(), nan_ok=True)


def test_state_dict_is_a_snapshot():
    sel = build_selector("bots", N, reference_pass_rates=REF)
    state = sel.state_dict()
    saved = state["extra"]["posterior"]["alpha"].copy()
    _drive(sel, 3)
    np.testing.assert_array_equal(state["extra"]["posterior"]["alpha"], saved)


def test_load_state_dict_rejects_other_pools_and_selectors():
    sel = build_selector("bots", N, reference_pass_rates=REF)
    with pytest.raises(ValueError, match="tasks"):
        build_selector("bots", N - 1, reference_pass_rates=REF[:-1]).load_state_dict(sel.state_dict())
    with pytest.raises(ValueError, match="selector"):
        build_selector("mopps", N).load_state_dict(sel.state_dict())
    bad = sel.state_dict()
    bad["extra"]["posterior"]["alpha"][0] = -1.0
    other = build_selector("bots", N, reference_pass_rates=REF, task_embeddings=EMB, seed=5)
    before = other.state_dict()
    with pytest.raises(ValueError, match="non-positive"):
        other.load_state_dict(bad)
    np.testing.assert_array_equal(other.alpha, before["extra"]["posterior"]["alpha"])
    assert other.rng.bit_generator.state == before["rng"]


def test_thompson_targets_p_star():
    """Tasks whose posterior is sharply at p* are picked over sharply easy or hard ones."""
    sel = build_selector("mopps", 30, seed=0)
    rates = np.repeat([0.0, 0.5, 1.0], 10)
    for _ in range(5):
        sel.update(np.arange(30), rates * 16, np.full(30, 16))
    picked = sel.select(10)
    assert set(picked.tolist()) == set(range(10, 20))
    far = build_selector("mopps", 30, seed=0, target=0.95)
    for _ in range(5):
        far.update(np.arange(30), rates * 16, np.full(30, 16))
    assert set(far.select(10).tolist()) == set(range(20, 30))


def test_greedy_breaks_flat_prior_ties_at_random():
    a = build_selector("bots", N, reference_pass_rates=REF, selection="greedy", seed=0).select(10)
    b = build_selector("bots", N, reference_pass_rates=REF, selection="greedy", seed=1).select(10)
    assert not np.array_equal(a, b)
    assert not np.array_equal(np.sort(a), np.arange(10))


def test_softmax_temperature_interpolates_between_greedy_and_uniform():
    rates = np.where(np.arange(N) < 20, 0.5, 1.0)
    hits = {}
    for tau in (0.01, 100.0):
        sel = build_selector("mopps", N, selection="softmax", tau=tau, seed=0)
        sel.update(np.arange(N), rates * 16, np.full(N, 16))
        hits[tau] = np.mean([np.mean(sel.select(20) < 20) for _ in range(20)])
    assert hits[0.01] > 0.95 and hits[100.0] < 0.3


def test_offline_easy2hard_order_and_wrap():
    ref = np.array([[0.1, 0.9], [0.8, 0.9], [0.8, 1.0], [0.5, 0.5]])
    sel = build_selector("offline_easy2hard", 4, reference_pass_rates=ref)
    assert sel.select(3).tolist() == [2, 1, 3]
    assert sel.select(3).tolist() == [0, 2, 1]


def test_sequential_wraps():
    sel = build_selector("sequential", 5)
    assert sel.select(3).tolist() == [0, 1, 2]
    assert sel.select(3).tolist() == [3, 4, 0]


def test_random_is_uniform_over_time():
    sel = build_selector("random", 50, seed=0)
    counts = np.bincount(np.concatenate([sel.select(10) for _ in range(500)]), minlength=50)
    assert counts.min() > 60 and counts.max() < 140  # 100 expected each


def test_stats_track_selection_and_batch_etr():
    sel = build_selector("bots", N, reference_pass_rates=REF)
    idx = sel.select(4)
    sel.update(idx, [0, 3, 16, 8], [16, 16, 16, 16])
    stats = sel.stats()
    assert stats["tasks_ever_selected"] == 4
    assert stats["batch/effective_task_ratio"] == 0.5
    assert stats["batch/success_rate"] == pytest.approx(27 / 64)
    assert 0 < stats["posterior/ess_min"] <= stats["posterior/ess_avg"] <= stats["posterior/ess_max"]


def test_alpha_is_read_only():
    sel = build_selector("bots", N, reference_pass_rates=REF)
    with pytest.raises(ValueError):
        sel.alpha[0] = 5.0


def test_load_state_dict_checks_the_evidence_before_changing_anything():
    sel = build_selector("bots", N, reference_pass_rates=REF, task_embeddings=EMB, seed=0)
    _drive(sel, 3)
    bad = sel.state_dict()
    del bad["extra"]["evidence"]["mu"]
    other = build_selector("bots", N, reference_pass_rates=REF, task_embeddings=EMB, seed=5)
    before = other.state_dict()
    with pytest.raises(ValueError, match="mu"):
        other.load_state_dict(bad)
    np.testing.assert_array_equal(other.alpha, before["extra"]["posterior"]["alpha"])
    assert other.steps == 0 and other.evidence.mu is None


MALFORMED = [(name, breakage) for name in sorted(SELECTORS) for breakage in ("drop_steps", "bad_rng")] + [
    (name, "bad_cursor") for name in ("offline_easy2hard", "sequential")
]


@pytest.mark.parametrize(("name", "breakage"), MALFORMED)
def test_malformed_checkpoint_changes_nothing(name, breakage):
    donor = build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=3)
    _drive(donor, 4)
    bad = donor.state_dict()
    if breakage == "drop_steps":
        del bad["steps"]
    elif breakage == "bad_rng":
        bad["rng"] = {"bit_generator": "PCG64"}
    else:
        bad["extra"]["cursor"] = N + 5
    target = build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=9)
    _drive(target, 2)
    before = pickle.dumps(target.state_dict())
    with pytest.raises(ValueError):
        target.load_state_dict(bad)
    assert pickle.dumps(target.state_dict()) == before


# issue 36's cost accounting counts reference generations only for runs that read them: reads_reference must say
# whether the reference columns change anything (a selector that refuses to run without them reads them too)
@pytest.mark.parametrize(
    ("name", "hparams"),
    [
        *((n, {}) for n in sorted(SELECTORS)),
        ("bots", {"evidence": "none"}),
        ("bots", {"evidence": "none", "warm_start_weight": 2.0}),
        ("mopps", {"warm_start_weight": 2.0}),
    ],
)
def test_reads_reference_says_whether_the_references_change_anything(name, hparams):
    reads = SELECTORS.lookup(name).reads_reference(hparams)
    given = _drive(build_selector(name, N, reference_pass_rates=REF, task_embeddings=EMB, seed=3, **hparams), 10)
    try:
        without = _drive(build_selector(name, N, task_embeddings=EMB, seed=3, **hparams), 10)
    except ValueError as exc:
        assert reads, f"{name} refuses to run without references ({exc}) but says it reads none"
        return
    assert reads == (not all(np.array_equal(x, y) for x, y in zip(given, without, strict=True)))
