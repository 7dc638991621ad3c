"""DPS (arXiv 2603.10887): the HMM filter on hand-computed cases, the decayed transition counts, top-B selection,
bad input, checkpoints, determinism and a simulator smoke check."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from selector_driver import drive

from bots_verl.core import SELECTORS, build_selector
from bots_verl.core.peers.dps import DPSSelector, observed_states

N = 60


def _dps(n=N, seed=0, **hparams):
    return build_selector("dps", n, seed=seed, **hparams)


def _observe(sel, task, state, n=8.0):
    """Feed one group of ``n`` rollouts whose state is 0 (none right), 1 (some right) or 2 (all right)."""
    sel.update([task], [{0: 0.0, 1: n / 2, 2: n}[state]], [n])


def test_registered_with_the_script_defaults():
    assert SELECTORS["dps"] is DPSSelector
    d = DPSSelector.DEFAULTS
    assert (d["decay"], d["candidate_ratio"], d["prior_alpha"], d["prior_pi"], d["entropy_weight"]) == (
        0.7,
        32.0,
        1.0,
        "uniform",
        0.0,
    )
    out = subprocess.run(
        [sys.executable, "-m", "bots_verl.core", "--list"], capture_output=True, text=True, check=True
    ).stdout
    assert (
        "\n    dps " in out.split("\n  peers:")[1].split("\n  ours:")[0]
        and "decay=0.7" in out
        and "candidate_ratio=32.0" in out
    )


def test_group_states_from_successes():
    s = np.array([0.0, 1.0, 7.0, 8.0, 0.0, 2.5, 4.0])
    n = np.array([8.0, 8.0, 8.0, 8.0, 1.0, 4.0, 4.0])
    assert observed_states(s, n).tolist() == [0, 1, 1, 2, 0, 1, 2]


def test_first_observation_on_the_flat_prior():
    """Hand-computed: flat prior, observe 'partial'. xi = 1/3 on each entry of row 1; pi = column 1 = [.3, .4, .3]."""
    sel = _dps(decay=1.0)
    _observe(sel, 5, 1)
    np.testing.assert_allclose(sel.alpha[5], [[1, 1, 1], [4 / 3, 4 / 3, 4 / 3], [1, 1, 1]], rtol=1e-15)
    np.testing.assert_allclose(sel.pi[5], [0.3, 0.4, 0.3], rtol=1e-14)
    assert sel.pi_prev[5].tolist() == [0.0, 1.0, 0.0]
    # the other tasks were never candidates: they keep the prior exactly
    assert np.all(sel.alpha[np.arange(N) != 5] == 1.0) and np.all(sel.pi[np.arange(N) != 5] == 1 / 3)


@pytest.mark.parametrize(
    ("decay", "row1", "pi"),
    [
        # d = 1: T[1, :] = .4 and pi_prev = e1, so xi = e(1,1); row 1 = 4/3 + e1; pi = [3, 7, 3] / 13
        (1.0, [4 / 3, 7 / 3, 4 / 3], np.array([3, 7, 3]) / 13),
        # d = 0.7: row 1 first decays to 0.7 * 4/3 + 0.3 = 37/30, then +1 at (1, 1); pi = [30, 67, 30] / 127
        (0.7, [37 / 30, 67 / 30, 37 / 30], np.array([30, 67, 30]) / 127),
    ],
)
def test_a_second_observation_counts_the_transition_after_the_decay(decay, row1, pi):
    """partial then partial: the decay pulls old counts to the prior before the new transition is added."""
    sel = _dps(decay=decay)
    _observe(sel, 0, 1)
    _observe(sel, 0, 1)
    np.testing.assert_allclose(sel.alpha[0], [[1, 1, 1], row1, [1, 1, 1]], rtol=1e-14)
    np.testing.assert_allclose(sel.pi[0], pi, rtol=1e-14)


def test_an_unobserved_step_predicts_forward_and_uses_the_prediction_as_the_last_state():
    """unsolved, (not observed), solved, d = 1.

    After 'unsolved': alpha row 0 = 4/3, every column of T = [.4, .3, .3], pi = [.4, .3, .3]. The step without an
    observation keeps alpha and moves pi_prev to that prediction. 'solved' then gives xi row 2 = T[2, :] * pi_prev /
    sum = [.4, .3, .3], and pi = column 2 of the new counts = [4/3, 1, 1.3] / (109/30) = [40, 30, 39] / 109.
    """
    sel = _dps(decay=1.0)
    _observe(sel, 0, 0)
    np.testing.assert_allclose(sel.pi[0], [0.4, 0.3, 0.3], rtol=1e-14)
    _observe(sel, 1, 1)  # a step in which task 0 is not trained
    np.testing.assert_allclose(sel.pi_prev[0], [0.4, 0.3, 0.3], rtol=1e-14)
    np.testing.assert_allclose(sel.pi[0], [0.4, 0.3, 0.3], rtol=1e-14)
    _observe(sel, 0, 2)
    np.testing.assert_allclose(sel.alpha[0], [[4 / 3] * 3, [1, 1, 1], [1.4, 1.3, 1.3]], rtol=1e-14)
    np.testing.assert_allclose(sel.pi[0], np.array([40, 30, 39]) / 109, rtol=1e-14)


def test_unobserved_counts_decay_to_the_prior_and_the_prediction_follows():
    """After one 'partial' (row 1 = 4/3), one unobserved step at d = 0.5: row 1 = 7/6, pi = [6, 7, 6] / 19."""
    sel = _dps(decay=0.5)
    _observe(sel, 0, 1)
    _observe(sel, 1, 0)
    np.testing.assert_allclose(sel.alpha[0], [[1, 1, 1], [7 / 6] * 3, [1, 1, 1]], rtol=1e-14)
    np.testing.assert_allclose(sel.pi[0], np.array([6, 7, 6]) / 19, rtol=1e-14)
    for _ in range(60):  # without evidence the counts return to the prior (0.5 ** 60 of the excess is left)
        _observe(sel, 1, 0)
    np.testing.assert_allclose(sel.alpha[0], np.ones((3, 3)), atol=1e-15)
    np.testing.assert_allclose(sel.pi[0], [1 / 3] * 3, atol=1e-15)


def _plain_filter(prior_alpha, prior_pi, decay, history):
    """The rules of the module docstring, one task at a time, written as plainly as possible (no numpy tricks).

    ``history`` is a list of steps, each ``(candidates, {task: state})``; returns per task (alpha, pi, pi_prev).
    """
    state = {}

    def get(k):
        if k not in state:
            state[k] = ([list(r) for r in prior_alpha], list(prior_pi), list(prior_pi))
        return state[k]

    def trans(a):
        cols = [sum(a[j][i] for j in range(3)) for i in range(3)]
        return [[a[j][i] / cols[i] for i in range(3)] for j in range(3)]

    for candidates, observed in history:
        for k in candidates:
            get(k)
        for k in sorted(set(state) | set(observed)):
            a, pi, prev = get(k)
            t_old = trans(a)
            new = [[decay * a[j][i] + (1 - decay) * prior_alpha[j][i] for i in range(3)] for j in range(3)]
            if k in observed:
                o = observed[k]
                joint = [t_old[o][i] * prev[i] for i in range(3)]
                for i in range(3):
                    new[o][i] += joint[i] / sum(joint)
                last = [1.0 if j == o else 0.0 for j in range(3)]
            else:
                last = pi
            t_new = trans(new)
            nxt = [sum(t_new[j][i] * last[i] for i in range(3)) for j in range(3)]
            state[k] = (new, [x / sum(nxt) for x in nxt], last)
    return state


@pytest.mark.parametrize(
    "hparams",
    [{}, {"decay": 1.0}, {"decay": 0.0}, {"prior_alpha": "progress"}, {"prior_alpha": "stability", "decay": 0.5},
     {"prior_pi": "partial", "prior_alpha": 2.5}, {"prior_pi": "unsolved", "candidate_ratio": 1.0}],
)  # fmt: skip
def test_vectorised_filter_equals_the_plain_rules(hparams):
    sel = _dps(n=40, seed=4, **hparams)
    rng = np.random.default_rng(0)
    history = []
    for _ in range(25):
        before = sel.touched.copy()
        idx = sel.select(6)
        candidates = np.flatnonzero(sel.touched & ~before).tolist() + idx.tolist()
        states = rng.integers(0, 3, size=6)
        sel.update(idx, np.array([0.0, 4.0, 8.0])[states], np.full(6, 8.0))
        history.append((candidates, dict(zip(idx.tolist(), states.tolist(), strict=True))))
    plain = _plain_filter(sel.prior_alpha.tolist(), sel.prior_pi.tolist(), sel.decay, history)
    for k in range(40):
        if k in plain:
            a, pi, prev = plain[k]
            np.testing.assert_allclose(sel.alpha[k], a, rtol=1e-12)
            np.testing.assert_allclose(sel.pi[k], pi, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(sel.pi_prev[k], prev, rtol=1e-12, atol=1e-15)
        else:  # never a candidate: the prior exactly
            assert not sel.touched[k]
            assert np.all(sel.alpha[k] == sel.prior_alpha) and np.all(sel.pi[k] == sel.prior_pi)


def test_select_takes_the_highest_predicted_partial_probability():
    sel = _dps(n=30, candidate_ratio=3.0)  # 30 candidates: the whole pool
    states = np.repeat([0, 1, 2], 10)
    sel.update(np.arange(30), np.array([0.0, 4.0, 8.0])[states], np.full(30, 8.0))
    assert set(sel.select(10).tolist()) == set(range(10, 20))
    assert sel.stats()["dps/selected_p_partial"] == pytest.approx(sel.pi[10, 1])
    # never-seen tasks (P(partial) = 1/3) rank above tasks seen unsolved or solved (0.3), below partial ones (0.4)
    big = _dps(n=40, candidate_ratio=4.0)
    big.update(np.arange(30), np.array([0.0, 4.0, 8.0])[states], np.full(30, 8.0))
    assert set(big.select(20).tolist()) == set(range(10, 20)) | set(range(30, 40))


def test_candidates_limit_the_choice():
    sel = _dps(n=200, candidate_ratio=1.0)  # the candidates are the batch: uniform sampling
    sel.update(np.arange(20), np.full(20, 4.0), np.full(20, 8.0))  # tasks 0..19 look partially solved
    picks = np.concatenate([sel.select(10) for _ in range(50)])
    assert np.mean(picks < 20) < 0.25  # about 0.1 expected; top-B over the whole pool would give 1.0
    assert sel.stats()["dps/candidates"] == 10
    wide = _dps(n=200, candidate_ratio=2.5)
    wide.select(7)
    assert wide.stats()["dps/candidates"] == 18  # ceil(2.5 * 7)
    assert wide.stats()["dps/touched_frac"] == 18 / 200


def test_the_entropy_bonus_prefers_uncertain_tasks():
    # seen partial once: pi = [.3, .4, .3], entropy 1.0889; never seen: P(partial) 1/3, entropy log 3 = 1.0986
    sel = _dps(n=40, candidate_ratio=10.0, entropy_weight=10.0)
    sel.update(np.arange(20), np.full(20, 4.0), np.full(20, 8.0))
    # 0.4 + 10.889 < 1/3 + 10.986: the untouched tasks now outscore the partial ones (weight 0: the reverse)
    assert set(sel.select(20).tolist()) == set(range(20, 40))
    plain = _dps(n=40, candidate_ratio=10.0)
    plain.update(np.arange(20), np.full(20, 4.0), np.full(20, 8.0))
    assert set(plain.select(20).tolist()) == set(range(20))


def test_ties_are_broken_at_random_and_the_seed_decides():
    a, b = _dps(seed=0).select(10), _dps(seed=1).select(10)
    assert not np.array_equal(a, b)
    assert np.array_equal(a, _dps(seed=0).select(10))


def test_the_touched_mask_follows_the_candidates_with_a_non_flat_prior():
    """With the 'progress' prior a candidate that is not trained still runs forward; a task never scored does not."""
    sel = _dps(n=100, prior_alpha="progress", candidate_ratio=2.0)
    idx = sel.select(10)
    cand = np.flatnonzero(sel.touched)
    assert cand.size == 20 and set(idx.tolist()) <= set(cand.tolist())
    sel.update(idx, np.full(10, 4.0), np.full(10, 8.0))
    unselected = np.setdiff1d(cand, idx)
    t0 = np.array([[1.0, 0.5, 0.5], [1.0, 1.0, 0.5], [1.0, 1.0, 1.0]])
    t0 /= t0.sum(axis=0, keepdims=True)
    np.testing.assert_allclose(sel.pi[unselected], np.tile(t0 @ np.full(3, 1 / 3), (10, 1)), rtol=1e-14)
    never = np.setdiff1d(np.arange(100), cand)
    assert np.all(sel.pi[never] == 1 / 3)


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        ({"decay": 1.5}, "decay"),
        ({"decay": -0.1}, "decay"),
        ({"candidate_ratio": 0.5}, "candidate_ratio"),
        ({"candidate_ratio": float("inf")}, "candidate_ratio"),
        ({"candidate_ratio": "32"}, "candidate_ratio"),
        ({"prior_alpha": 0.0}, "prior_alpha"),
        ({"prior_alpha": float("nan")}, "prior_alpha"),
        ({"prior_alpha": True}, "prior_alpha"),
        ({"prior_alpha": "local"}, "local"),
        ({"prior_alpha": "stay"}, "prior_alpha"),
        ({"prior_pi": "1"}, "prior_pi"),
        ({"entropy_weight": -1.0}, "entropy_weight"),
        ({"hmm_transition_decay_ratio": 0.7}, "hmm_transition_decay_ratio"),
    ],
)
def test_bad_hyperparameters_are_refused(hparams, message):
    with pytest.raises(ValueError, match=message):
        _dps(**hparams)


def test_a_rejected_update_changes_nothing():
    sel = _dps()
    drive(sel, 3, batch=8)
    before = pickle.dumps(sel.state_dict())
    for bad in (([0, 1], [9.0, 1.0], [8.0, 8.0]), ([0, 0], [1.0, 1.0], [8.0, 8.0]), ([N], [1.0], [8.0])):
        with pytest.raises(ValueError):
            sel.update(*bad)
        assert pickle.dumps(sel.state_dict()) == before


def _break(state, how):
    extra = state["extra"]
    if how == "missing":
        del extra["pi_prev"]
    elif how == "negative_alpha":
        extra["alpha"][3, 0, 0] = -1.0
    elif how == "nan_pi":
        extra["pi"][2, 1] = np.nan
    elif how == "pi_off_simplex":
        extra["pi"][2] = [0.5, 0.5, 0.5]
    elif how == "touched_dtype":
        extra["touched"] = extra["touched"].astype(np.int8)
    elif how == "touched_shape":
        extra["touched"] = extra["touched"][:-1]
    elif how == "untouched_not_prior":
        k = int(np.flatnonzero(~extra["touched"])[0])
        extra["alpha"][k, 1, 1] = 2.0
    elif how == "alpha_shape":
        extra["alpha"] = extra["alpha"][:, :2]
    elif how == "bad_stats":
        extra["last_update_stats"] = {"dps/partial_ratio": "x"}
    return state


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("missing", "pi_prev"),
        ("negative_alpha", "non-positive"),
        ("nan_pi", "NaN"),
        ("pi_off_simplex", "sum to 1"),
        ("touched_dtype", "touched"),
        ("touched_shape", "touched"),
        ("untouched_not_prior", "prior"),
        ("alpha_shape", "shape"),
        ("bad_stats", "last_update_stats"),
    ],
)
def test_a_malformed_checkpoint_is_refused_and_changes_nothing(how, message):
    donor = _dps(n=200, seed=1, candidate_ratio=2.0)
    drive(donor, 4, batch=8)
    bad = _break(donor.state_dict(), how)
    target = _dps(n=200, seed=2, candidate_ratio=2.0)
    drive(target, 2, batch=8)
    before = pickle.dumps(target.state_dict())
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(bad)
    assert pickle.dumps(target.state_dict()) == before


@pytest.mark.parametrize("cut", ["after_update", "between_select_and_update"])
def test_resume_selects_what_the_uninterrupted_run_selects(cut):
    def run(sel, steps, resume_at=None):
        out = []
        for t in range(steps):
            if t == resume_at and cut == "after_update":
                sel = _restore(sel)
            idx = sel.select(8)
            if t == resume_at and cut == "between_select_and_update":
                sel = _restore(sel)
            out.append(idx)
            sel.update(idx, (idx * 7 + t) % 9, np.full(idx.size, 8))
        return out, sel

    def _restore(sel):
        fresh = _dps(n=120, seed=99, candidate_ratio=4.0, prior_alpha="progress")
        fresh.load_state_dict(pickle.loads(pickle.dumps(sel.state_dict())))
        return fresh

    a, sa = run(_dps(n=120, seed=5, candidate_ratio=4.0, prior_alpha="progress"), 12)
    b, sb = run(_dps(n=120, seed=5, candidate_ratio=4.0, prior_alpha="progress"), 12, resume_at=6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    np.testing.assert_array_equal(sa.alpha, sb.alpha)
    np.testing.assert_array_equal(sa.pi, sb.pi)
    assert sa.stats() == sb.stats()


def test_the_checkpoint_keeps_its_priors():
    sel = _dps(prior_alpha="progress")
    drive(sel, 2, batch=8)
    other = _dps(prior_alpha=1.0)
    other.load_state_dict(sel.state_dict())
    assert other.hparams["prior_alpha"] == "progress"
    np.testing.assert_array_equal(other.prior_alpha, sel.prior_alpha)


def test_it_beats_random_on_an_easy_synthetic_pool():
    """A fixed pool: 70% never solved, 15% always solved, 15% solved half the time. DPS finds and keeps the mixed ones.

    The effective task ratio (share of groups with mixed rewards) is what selection buys; Random's is about 0.15.
    """
    rng = np.random.default_rng(0)
    n_tasks = 1000
    p = np.zeros(n_tasks)
    p[:150] = 1.0
    p[150:300] = 0.5
    p = rng.permutation(p)

    def etr(name, **hparams):
        sel = build_selector(name, n_tasks, seed=1, **hparams)
        mixed = []
        for _ in range(60):
            idx = sel.select(32)
            s = rng.binomial(8, p[idx]).astype(float)
            mixed.append(np.mean((s > 0) & (s < 8)))
            sel.update(idx, s, np.full(idx.size, 8.0))
        return float(np.mean(mixed[20:]))

    random_etr, dps_etr = etr("random"), etr("dps")
    assert random_etr < 0.25
    assert dps_etr > 0.6, (dps_etr, random_etr)
