"""``ref_neighbours`` evidence and ``bots_ref_graph`` (issue 38, item 4): references corrected over the task graph."""

import numpy as np
import pytest

from bots_verl.core import EVIDENCE, SELECTORS, build_selector
from bots_verl.core.evidence import InterpolationEvidence
from bots_verl.core.residual_evidence import ReferenceResidualEvidence
from bots_verl.core.similarity import TaskGraph

N = 300
RNG = np.random.default_rng(7)
# two clusters of tasks in embedding space; the references call both equally hard, the policy finds cluster A easy
CLUSTER = np.arange(N) < N // 2
EMB = np.where(CLUSTER[:, None], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]) + 0.05 * RNG.normal(size=(N, 3))
REF = np.column_stack([np.full(N, 0.2), np.full(N, 0.6)]) + 0.01 * RNG.random((N, 2))


def _plugin(**params):
    graph = TaskGraph.from_embeddings(EMB, 8)
    return ReferenceResidualEvidence(N, REF, graph=graph, **{**ReferenceResidualEvidence.DEFAULTS, **params})


def test_registered_and_listed_with_the_paper_bots_unchanged():
    assert EVIDENCE["ref_neighbours"] is ReferenceResidualEvidence
    assert ReferenceResidualEvidence.needs_reference and ReferenceResidualEvidence.needs_graph
    assert SELECTORS["bots_ref_graph"].DEFAULTS["evidence"] == "ref_neighbours"
    assert SELECTORS["bots_ref_graph"].DEFAULTS["rho"] == 0.3
    assert SELECTORS["bots"].DEFAULTS["evidence"] == "interpolation" and SELECTORS["bots"].DEFAULTS["rho"] == 0.1
    with pytest.raises(ValueError, match="task_embeddings"):
        build_selector("bots_ref_graph", N, reference_pass_rates=REF)
    with pytest.raises(ValueError, match="reference"):
        build_selector("bots_ref_graph", N, task_embeddings=EMB)


def test_a_cluster_the_references_misjudge_is_corrected_for_its_unvisited_tasks():
    """Observations on a few tasks of cluster A (easy) and B (hard) move the unvisited tasks of each cluster apart,
    where the paper's interpolation predicts both alike."""
    ev, paper = _plugin(), InterpolationEvidence(N, REF)
    idx = np.array([0, 1, 2, N // 2, N // 2 + 1, N // 2 + 2])
    rates = np.array([0.9, 1.0, 0.9, 0.0, 0.1, 0.0])
    n = np.full(6, 8.0)
    for _ in range(3):
        p = ev.observe(idx, rates, n)
        base = paper.observe(idx, rates, n)
    nb = ev.residuals.task_graph.neighbours
    unvisited_a = np.setdiff1d(nb[idx[:3]].ravel(), idx)
    unvisited_b = np.setdiff1d(nb[idx[3:]].ravel(), idx)
    assert CLUSTER[unvisited_a].all() and not CLUSTER[unvisited_b].any() and unvisited_a.size >= 8
    assert np.ptp(base) < 0.05  # the references cannot tell the clusters apart
    assert p[unvisited_a].mean() > base[unvisited_a].mean() + 0.15
    assert p[unvisited_b].mean() < base[unvisited_b].mean() - 0.15
    # tasks far from every observation keep the references' prediction
    far = np.setdiff1d(np.arange(N), np.concatenate([idx, unvisited_a, unvisited_b]))
    assert np.allclose(p[far], base[far], atol=1e-3)
    assert ev.stats()["correction_abs_mean"] > 0.3


def test_no_prediction_before_mu_and_propose_changes_nothing():
    ev = _plugin()
    assert ev.predict() is None
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in ev.state_dict().items()}
    p, state = ev.propose(np.array([0, 200]), np.array([0.5, 0.25]), np.full(2, 8.0))
    assert p is not None and p.shape == (N,)
    after = ev.state_dict()
    assert np.array_equal(after["num"], before["num"]) and after["base"] == before["base"]
    ev.commit(state)
    assert np.allclose(ev.predict(), p)


def test_checkpoint_round_trip_and_refusals():
    sel = build_selector("bots_ref_graph", N, reference_pass_rates=REF, task_embeddings=EMB, seed=3)
    rng = np.random.default_rng(1)
    truth = np.where(CLUSTER, 0.7, 0.1)
    for _ in range(4):
        b = sel.select(16)
        sel.update(b, rng.binomial(8, truth[b]), np.full(16, 8))
    state = sel.state_dict()
    resumed = build_selector("bots_ref_graph", N, reference_pass_rates=REF, task_embeddings=EMB, seed=99)
    resumed.load_state_dict(state)
    assert np.array_equal(resumed.select(16), sel.select(16))
    bad = dict(state, extra={**state["extra"], "evidence": {**state["extra"]["evidence"], "den": -np.ones(N)}})
    fresh = build_selector("bots_ref_graph", N, reference_pass_rates=REF, task_embeddings=EMB, seed=5)
    alpha = fresh.alpha.copy()
    with pytest.raises(ValueError, match="negative weights"):
        fresh.load_state_dict(bad)
    assert np.array_equal(fresh.alpha, alpha)


def test_a_rejected_update_leaves_the_plugin_unchanged():
    sel = build_selector("bots_ref_graph", N, reference_pass_rates=REF, task_embeddings=EMB, seed=0)
    b = sel.select(8)
    sel.update(b, np.full(8, 4.0), np.full(8, 8.0))
    num = sel.evidence.residuals.num.copy()
    with pytest.raises(ValueError):
        sel.update(b, np.full(8, 9.0), np.full(8, 8.0))  # more successes than attempts
    assert np.array_equal(sel.evidence.residuals.num, num)
