"""The ``neighbours`` evidence plug-in and ``bots_noref``: propagation, two-phase updates, checkpoints, a real gain."""

import numpy as np
import pytest

from bots_verl.core import EVIDENCE, build_selector
from bots_verl.core.ours.neighbour_evidence import NeighbourEvidence
from bots_verl.core.task_graph import TaskGraph


def _line_pool(n=300, seed=0):
    """Tasks on a line of difficulty: the embedding is a smooth function of it, so similar tasks are similar."""
    rng = np.random.default_rng(seed)
    z = np.sort(rng.uniform(-4, 4, n))
    angle = (z + 4) / 8 * np.pi / 2  # cosine similarity falls with the difference in difficulty
    emb = np.column_stack([np.cos(angle), np.sin(angle), 0.01 * rng.normal(size=n)])
    return z, emb


def _plugin(emb, **params):
    graph = TaskGraph.from_embeddings(emb, 8)
    return NeighbourEvidence(len(emb), None, graph=graph, **params)


def test_registered_and_needs_the_graph():
    assert EVIDENCE["neighbours"] is NeighbourEvidence and NeighbourEvidence.needs_graph
    with pytest.raises(ValueError, match="task_embeddings"):
        NeighbourEvidence(10, None)
    with pytest.raises(ValueError, match="needs task_embeddings .*evidence='neighbours'"):
        build_selector("bots_noref", 10)
    with pytest.raises(ValueError, match="defined by evidence='neighbours'"):
        build_selector("bots_noref", 10, task_embeddings=np.eye(10), evidence="none")
    # the other plug-ins take no graph and are built as before
    assert build_selector("bots", 10, reference_pass_rates=np.full((10, 2), 0.5)).evidence.graph is None


def test_evidence_spreads_to_neighbours_and_not_to_unrelated_tasks():
    _, emb = _line_pool()
    plug = _plugin(emb)
    assert plug.predict() is None  # nothing before the first batch
    # a batch of easy-end tasks all solved, hard-end tasks all failed
    idx = np.array([0, 1, 2, 297, 298, 299])
    p, state = plug.propose(idx, np.array([1.0, 1, 1, 0, 0, 0]), np.full(6, 16.0))
    assert plug.predict() is None and plug.level is None  # propose changed nothing
    plug.commit(state)
    np.testing.assert_allclose(plug.predict(), p)
    assert p[3] > 0.9 and p[296] < 0.1  # neighbours of the observed tasks
    assert abs(p[150] - 0.5) < 0.05  # far from both: the level (here logit 0), barely moved


def test_residuals_follow_a_uniformly_improving_policy():
    """The policy gains 0.03 logit per step on every task: the level follows, the ranking of tasks is kept."""
    z, emb = _line_pool()
    z = z / 2  # logits within what 16 rollouts can resolve
    plug = _plugin(emb)
    rng = np.random.default_rng(1)
    for step in range(60):
        idx = np.sort(rng.choice(300, 24, replace=False))
        true = 1 / (1 + np.exp(-(-z[idx] + 0.03 * step)))
        plug.observe(idx, rng.binomial(16, true) / 16, np.full(24, 16.0))
    pred = np.log(plug.predict()) - np.log1p(-plug.predict())
    truth = -z + 0.03 * 59
    assert np.corrcoef(pred, truth)[0, 1] > 0.95
    # the prediction follows the improvement (1.8 logits; the pool's mean logit at the start is 0), with the lag of
    # the level's momentum, on the tasks 16 rollouts can resolve
    resolvable = np.abs(truth) < 3
    assert abs(pred[resolvable].mean() - truth[resolvable].mean()) < 0.4
    assert plug.level > 0.5
    assert np.abs(plug.predict() - 1 / (1 + np.exp(-truth))).mean() < 0.06


def test_a_rejected_update_changes_nothing(monkeypatch):
    _, emb = _line_pool()
    sel = build_selector("bots_noref", 300, task_embeddings=emb, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3):
        b = sel.select(16)
        sel.update(b, rng.integers(0, 17, 16), np.full(16, 16))
    before = sel.state_dict()

    def boom(*args, **kwargs):
        raise ValueError("posterior refused")

    monkeypatch.setattr(sel.posterior, "updated", boom)  # the step fails after the plug-in proposed its state
    b = sel.select(16)
    with pytest.raises(ValueError, match="posterior refused"):
        sel.update(b, np.full(16, 8.0), np.full(16, 16.0))
    after = sel.state_dict()["extra"]["evidence"]
    for key in ("num", "den"):
        np.testing.assert_array_equal(after[key], before["extra"]["evidence"][key])
    assert after["level"] == before["extra"]["evidence"]["level"]


def test_checkpoint_round_trip_and_refusal_on_other_embeddings():
    _, emb = _line_pool()
    rng = np.random.default_rng(2)
    sel = build_selector("bots_noref", 300, task_embeddings=emb, seed=4)
    for _ in range(5):
        b = sel.select(16)
        sel.update(b, rng.integers(0, 17, 16), np.full(16, 16))
    state = sel.state_dict()
    resumed = build_selector("bots_noref", 300, task_embeddings=emb, seed=99)
    resumed.load_state_dict(state)
    for _ in range(3):
        a, b = sel.select(16), resumed.select(16)
        np.testing.assert_array_equal(a, b)
        s = rng.integers(0, 17, 16)
        sel.update(a, s, np.full(16, 16))
        resumed.update(b, s, np.full(16, 16))
    np.testing.assert_array_equal(sel.alpha, resumed.alpha)
    # other embeddings: refused, nothing loaded
    other = build_selector("bots_noref", 300, task_embeddings=np.random.default_rng(3).normal(size=(300, 3)))
    fresh = other.state_dict()
    with pytest.raises(ValueError, match="task graph"):
        other.load_state_dict(state)
    np.testing.assert_array_equal(other.alpha, fresh["extra"]["posterior"]["alpha"])
    # the plug-in's own check, for a state handed to it directly
    with pytest.raises(ValueError, match="another task graph"):
        other.evidence.load_state_dict(state["extra"]["evidence"])
    bad = dict(state["extra"]["evidence"], den=-np.ones(300))
    with pytest.raises(ValueError, match="negative"):
        resumed.evidence.load_state_dict(bad)
    with pytest.raises(ValueError, match="lacks"):
        resumed.evidence.load_state_dict({"level": 0.0})


def test_bad_hyperparameters_are_refused():
    _, emb = _line_pool(50)
    for params, match in [({"shrink": 0}, "shrink"), ({"spread": -1}, "spread"), ({"forget": 1.0}, "forget")]:
        with pytest.raises(ValueError, match=match):
            build_selector("bots_noref", 50, task_embeddings=emb, **params)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bots_noref_finds_moderate_tasks_better_than_random(seed):
    """Static pool, most tasks far too hard or too easy; the embedding carries the difficulty. Over 25 steps the
    share of mixed groups (some right, some wrong) must beat Random's and MoPPS's (the same posterior without implicit
    evidence) clearly: the gain comes from the graph."""
    z, emb = _line_pool(600, seed)
    truth = 1 / (1 + np.exp(-2.0 * z))
    mixed = {}
    for name in ("bots_noref", "random", "mopps"):
        sel = build_selector(name, 600, task_embeddings=emb, seed=seed)
        rng = np.random.default_rng(seed + 10)
        hits = []
        for _ in range(25):
            b = sel.select(16)
            s = rng.binomial(8, truth[b])
            sel.update(b, s, np.full(16, 8))
            hits.append(np.mean((s > 0) & (s < 8)))
        mixed[name] = np.mean(hits[5:])
    assert mixed["bots_noref"] > max(mixed["random"], mixed["mopps"]) + 0.15, mixed
