"""``pass_rate_oracle`` (issue 38, item 1): the B tasks nearest the target of the true pass rates, a fresh truth for
every selection, ties broken by its own generator, and truth sources loaded by name."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from bots_verl.core import SELECTORS, build_selector

N = 50


def _truth(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(N)


class StepTruth:
    """A truth source for the tests: pass rates that move with each call, reported with the call's number."""

    def __init__(self, num_tasks: int, *, scale: float = 1.0) -> None:
        self.num_tasks, self.scale, self.calls = num_tasks, scale, 0

    def __call__(self) -> tuple[np.ndarray, int]:
        self.calls += 1
        return (np.arange(self.num_tasks) * 7 + self.calls) % 11 / 10 * self.scale, self.calls


def test_registered_and_selects_the_tasks_nearest_the_target():
    assert "pass_rate_oracle" in SELECTORS
    sel = build_selector("pass_rate_oracle", N, seed=0)
    p = _truth()
    sel.observe_truth(p, version=3)
    picked = sel.select(8)
    gap = np.abs(p - 0.5)
    assert picked.dtype == np.int64 and np.unique(picked).size == 8
    # the selection is the 8 smallest gaps, nearest first
    assert set(picked) == set(np.argsort(gap)[:8])
    assert np.all(np.diff(gap[picked]) >= 0)
    stats = sel.stats()
    assert stats["oracle/truth_version"] == 3
    assert stats["oracle/selected_gap_max"] == pytest.approx(np.sort(gap)[7])
    assert stats["oracle/selected_pass_rate"] == pytest.approx(p[picked].mean())
    assert stats["oracle/pool_pass_rate"] == pytest.approx(p.mean())
    other = build_selector("pass_rate_oracle", N, seed=0, target=0.9)
    other.observe_truth(p)
    assert set(other.select(8)) == set(np.argsort(np.abs(p - 0.9))[:8])


def test_ties_are_broken_by_the_seeded_generator():
    p = np.full(N, 0.5)
    p[:10] = 0.0

    def pick(seed: int) -> list[int]:
        sel = build_selector("pass_rate_oracle", N, seed=seed)
        sel.observe_truth(p)
        return sorted(sel.select(8).tolist())

    assert pick(1) == pick(1)
    assert len({tuple(pick(s)) for s in range(5)}) > 1
    assert all(i >= 10 for s in range(5) for i in pick(s))


def test_a_selection_needs_a_fresh_truth():
    sel = build_selector("pass_rate_oracle", N)
    with pytest.raises(RuntimeError, match="observe_truth"):
        sel.select(4)
    sel.observe_truth(_truth())
    sel.select(4)
    with pytest.raises(RuntimeError, match="older policy"):
        sel.select(4)  # the truth was used: the policy may have changed since
    for bad in (np.full(N - 1, 0.5), np.full(N, 1.5), np.full(N, np.nan)):
        with pytest.raises(ValueError):
            sel.observe_truth(bad)


def test_a_truth_source_is_read_before_every_selection():
    sel = build_selector(
        "pass_rate_oracle",
        N,
        truth_source="test_pass_rate_oracle:StepTruth",
        truth_args={"scale": 0.5},
    )
    sel.select(5)
    assert sel.stats()["oracle/truth_version"] == 1 and sel._source.calls == 1
    second = sel.select(5)
    assert sel.stats()["oracle/truth_version"] == 2
    np.testing.assert_allclose(sel.truth, (np.arange(N) * 7 + 2) % 11 / 10 * 0.5)
    gap = np.abs(sel.truth - 0.5)
    assert gap[second].max() <= np.delete(gap, second).min()
    assert np.isfinite(sel.stats()["oracle/truth_ms"])


@pytest.mark.parametrize(
    ("hparams", "match"),
    [
        ({"truth_source": "no colon"}, "package.module:factory"),
        ({"truth_args": {"x": 1}}, "without a truth_source"),
        ({"truth_source": "a:b", "truth_args": [1]}, "mapping"),
        ({"target": 1.5}, "target"),
    ],
)
def test_bad_settings_are_refused_when_built(hparams, match):
    with pytest.raises(ValueError, match=match):
        build_selector("pass_rate_oracle", N, **hparams)


def test_a_source_that_cannot_be_loaded_is_named():
    sel = build_selector("pass_rate_oracle", N, truth_source="bots_verl.core:no_such_factory")
    with pytest.raises(ValueError, match="no_such_factory"):
        sel.select(3)


def test_checkpoint_keeps_the_last_truth_but_a_resumed_selector_reads_a_new_one():
    sel = build_selector("pass_rate_oracle", N, seed=4)
    sel.observe_truth(_truth(1), version=7)
    sel.select(6)
    state = pickle.loads(pickle.dumps(sel.state_dict()))
    np.testing.assert_array_equal(state["extra"]["truth"], _truth(1))
    assert state["extra"]["truth_version"] == 7
    fresh = build_selector("pass_rate_oracle", N, seed=0)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.truth, _truth(1))
    assert fresh.stats() == pytest.approx(sel.stats(), nan_ok=True)
    with pytest.raises(RuntimeError):
        fresh.select(6)
    # the same truth gives the same continuation (the generator was restored)
    sel.observe_truth(_truth(2))
    fresh.observe_truth(_truth(2))
    np.testing.assert_array_equal(sel.select(6), fresh.select(6))
    bad = sel.state_dict()
    bad["extra"]["truth"] = np.full(N, 2.0)
    with pytest.raises(ValueError, match="truth"):
        fresh.load_state_dict(bad)
