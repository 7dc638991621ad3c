"""GRESO (arXiv 2506.02177): zero-variance streaks, the skip probability, its adaptation, checkpoints, validation."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from selector_driver import drive

from bots_verl.core import SELECTORS, build_selector
from bots_verl.core.peers.greso import STREAK_CAP, GRESOSelector

N = 100


def _greso(n=N, seed=0, **hparams):
    return build_selector("greso", n, seed=seed, **hparams)


def test_registered_with_the_official_defaults():
    assert SELECTORS["greso"] is GRESOSelector
    d = GRESOSelector.DEFAULTS
    assert (d["p_easy"], d["p_hard"], d["target_zero_variance"], d["easy_share"]) == (0.5, 0.5, 0.25, 1 / 3)
    assert (d["p_step"], d["p_min"], d["p_max"], d["keep_floor"]) == (0.01, 0.05, 0.95, 0.01)
    assert (d["easy_threshold"], d["hard_threshold"]) == (1.0, 0.0)
    out = subprocess.run(
        [sys.executable, "-m", "bots_verl.core", "--list"], capture_output=True, text=True, check=True
    ).stdout
    assert (
        "\n    greso " in out.split("\n  peers:")[1].split("\n  ours:")[0]
        and "target_zero_variance=0.25" in out
        and "keep_floor=0.01" in out
    )


def test_streaks_count_consecutive_zero_variance_groups_and_reset_on_a_mixed_one():
    sel = _greso(p_step=0.0)
    idx = np.array([0, 1, 2])
    n = np.full(3, 8.0)
    sel.update(idx, [8.0, 0.0, 4.0], n)  # easy, hard, mixed
    assert sel.streak[:3].tolist() == [1, -1, 0]
    sel.update(idx, [8.0, 0.0, 0.0], n)
    assert sel.streak[:3].tolist() == [2, -2, -1]
    sel.update(idx, [0.0, 8.0, 3.0], n)  # a flip starts a new streak of the other kind; mixed ends it
    assert sel.streak[:3].tolist() == [-1, 1, 0]
    assert sel.streak[3:].tolist() == [0] * (N - 3)  # tasks not rolled out keep their history


def test_keep_probability_is_p_to_the_streak_with_a_floor():
    sel = _greso(p_step=0.0, p_easy=0.5, p_hard=0.25)
    for _ in range(3):
        sel.update([0, 1], [8.0, 0.0], [8.0, 8.0])
    for _ in range(7):
        sel.update([2], [8.0], [8.0])
    keep = sel.keep_probability()
    assert keep[0] == 0.5**3 and keep[1] == 0.25**3
    assert keep[2] == 0.01  # 0.5 ** 7 < the floor
    assert np.all(keep[3:] == 1.0)


def test_skipped_tasks_are_rarely_selected_but_stay_explorable():
    sel = _greso(p_step=0.0, keep_floor=0.01)
    hopeless = np.arange(50)
    for _ in range(20):  # keep probability at the floor
        sel.update(hopeless, np.zeros(50), np.full(50, 8.0))
    picks = np.concatenate([sel.select(10) for _ in range(2000)])
    share = np.isin(picks, hopeless).mean()
    # kept tasks: 50 fresh ones always, about 0.5 hopeless ones per step; the batch is 10 of those ~50.5
    assert 0.002 < share < 0.03
    assert np.unique(picks[np.isin(picks, hopeless)]).size > 30  # the floor reaches every hopeless task


def test_with_no_history_it_is_uniform_like_random():
    sel = _greso(n=50)
    counts = np.bincount(np.concatenate([sel.select(10) for _ in range(500)]), minlength=50)
    assert counts.min() > 60 and counts.max() < 140  # 100 expected each
    assert sel.stats()["greso/skipped_frac"] == 0.0


def test_a_pool_of_zero_variance_tasks_still_fills_the_batch():
    sel = _greso(n=20, p_step=0.0, keep_floor=0.0, p_min=0.05, p_easy=0.05)
    for _ in range(30):
        sel.update(np.arange(20), np.full(20, 8.0), np.full(20, 8.0))
    batch = sel.select(15)
    assert np.unique(batch).size == 15
    stats = sel.stats()
    assert stats["greso/skipped_frac"] > 0.9 and stats["greso/filled"] >= 13


def test_p_adapts_toward_the_target_zero_variance_shares():
    sel = _greso(p_easy=0.5, p_hard=0.5)
    assert sel.target_easy == pytest.approx(0.25 / 3) and sel.target_hard == pytest.approx(0.5 / 3)
    idx = np.arange(10)
    n = np.full(10, 8.0)
    # 2 easy (0.2 >= 0.083): skip more easy ones; 1 hard (0.1 < 0.167): skip fewer hard ones
    sel.update(idx, [8, 8, 0, 4, 4, 4, 4, 4, 4, 4], n)
    assert sel.p_easy == pytest.approx(0.49) and sel.p_hard == pytest.approx(0.51)
    assert sel.stats()["greso/easy_ratio"] == pytest.approx(0.2) and sel.stats()["greso/hard_ratio"] == 0.1
    for _ in range(100):  # all hard: p_hard falls to p_min; no easy ones: p_easy rises to p_max
        sel.update(idx, np.zeros(10), n)
    assert sel.p_hard == 0.05 and sel.p_easy == 0.95
    fixed = _greso(p_step=0.0, p_easy=0.3)
    fixed.update(idx, np.zeros(10), n)
    assert fixed.p_easy == 0.3 and fixed.p_hard == 0.5


def test_thresholds_and_fractional_rewards():
    # The official code's thresholds at 16 rollouts: one success in 16 (0.0625 <= 0.11) still counts as hard.
    code = _greso(easy_threshold=0.98, hard_threshold=0.11)
    code.update([0, 1, 2], [1.0, 15.0, 15.9], [16.0, 16.0, 16.0])
    assert code.streak[:3].tolist() == [-1, 0, 1]
    exact = _greso()
    exact.update([0, 1, 2], [1.0, 0.0, 7.5], [16.0, 16.0, 8.0])  # fractional: 7.5 of 8 is not all-correct
    assert exact.streak[:3].tolist() == [0, -1, 0]


def test_streaks_stop_at_the_cap():
    sel = _greso(p_step=0.0)
    sel.streak[0] = STREAK_CAP
    sel.update([0], [8.0], [8.0])
    assert sel.streak[0] == STREAK_CAP


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        ({"p_min": 0.6, "p_max": 0.4}, "p_min <= p_max"),
        ({"p_min": 0.0}, "0 < p_min"),
        ({"p_easy": 0.99}, r"p_easy must lie in \[p_min, p_max\]"),
        ({"p_hard": 0.01}, r"p_hard must lie in \[p_min, p_max\]"),
        ({"p_easy": 1.5}, "p_easy"),
        ({"target_zero_variance": 1.2}, "target_zero_variance"),
        ({"easy_share": -0.1}, "easy_share"),
        ({"p_step": float("nan")}, "p_step"),
        ({"keep_floor": 2.0}, "keep_floor"),
        ({"easy_threshold": 0.5, "hard_threshold": 0.5}, "hard_threshold < easy_threshold"),
        ({"hard_threshold": -0.1}, "hard_threshold"),
        ({"skip": 0.5}, "unknown hyperparameter 'skip'"),
    ],
)
def test_bad_hyperparameters_are_clear_value_errors(hparams, message):
    with pytest.raises(ValueError, match=message):
        _greso(**hparams)


def test_a_rejected_update_changes_nothing():
    sel = _greso()
    drive(sel, 3, batch=10, mult=3)
    before = pickle.dumps(sel.state_dict())
    with pytest.raises(ValueError, match="exceed attempts"):
        sel.update([0, 1], [9.0, 0.0], [8.0, 8.0])
    assert pickle.dumps(sel.state_dict()) == before


def _trained(seed=3):
    sel = _greso(seed=seed)
    # successes (idx * 8 + t) % 17 of 16: a mix of all-0, all-1 and mixed groups, so streaks build up
    drive(sel, 12, batch=20, mult=8)
    return sel


def test_resumed_selector_selects_what_an_uninterrupted_one_would():
    sel = _trained()
    assert np.any(sel.streak > 0) and np.any(sel.streak < 0)  # the checkpoint carries real history
    state = pickle.loads(pickle.dumps(sel.state_dict()))
    expected = drive(sel, 10, batch=20, start=12, mult=8)
    fresh = _greso(seed=999)
    fresh.load_state_dict(state)
    resumed = drive(fresh, 10, batch=20, start=12, mult=8)
    assert all(np.array_equal(a, b) for a, b in zip(expected, resumed, strict=True))
    np.testing.assert_array_equal(sel.streak, fresh.streak)
    assert sel.stats() == fresh.stats()


def test_same_seed_same_selections_and_seeds_differ():
    a = drive(_greso(seed=7), 8, batch=20, mult=8)
    b = drive(_greso(seed=7), 8, batch=20, mult=8)
    c = drive(_greso(seed=8), 8, batch=20, mult=8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("streak", lambda s: s.astype(float), "integers"),
        ("streak", lambda s: s.astype(bool), "integers"),
        ("streak", lambda s: s[:-1], "shape"),
        ("streak", lambda s: s + 2 * STREAK_CAP, "streak must lie"),
        ("streak", "abc", "integers"),
        ("p_easy", 1.5, "p_easy"),
        ("p_hard", "0.5", "p_hard"),
        ("p_hard", True, "p_hard"),
        ("last_select_stats", {"x": "y"}, "last_select_stats"),
        ("last_update_stats", None, "last_update_stats"),
    ],
)
def test_malformed_checkpoint_is_a_value_error_and_changes_nothing(key, value, message):
    bad = _trained().state_dict()
    bad["extra"][key] = value(bad["extra"][key]) if callable(value) else value
    target = _trained(seed=9)
    before = pickle.dumps(target.state_dict())
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(bad)
    assert pickle.dumps(target.state_dict()) == before


@pytest.mark.parametrize("key", ["streak", "p_easy", "last_update_stats"])
def test_missing_checkpoint_key_is_named(key):
    bad = _trained().state_dict()
    del bad["extra"][key]
    with pytest.raises(ValueError, match=key):
        _trained(seed=9).load_state_dict(bad)


def test_checkpoints_of_other_selectors_are_refused():
    with pytest.raises(ValueError, match="selector"):
        _greso().load_state_dict(build_selector("random", N).state_dict())
