"""The task graph, reference imputation over it, labelling plans, and the selectors' ``task_embeddings`` plumbing."""

import hashlib

import numpy as np
import pytest

from bots_verl.core import build_selector, task_graph
from bots_verl.core.task_graph import TaskGraph, choose_labelled, impute_reference, impute_reference_report


def _brute_force(x, k):
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = u @ u.T
    np.fill_diagonal(sims, -np.inf)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(sims, order, axis=1)


@pytest.mark.parametrize("chunk_rows", [None, 1, 7, 1000])
def test_graph_is_the_exact_top_k(chunk_rows):
    x = np.random.default_rng(0).normal(size=(150, 6))
    graph = TaskGraph.from_embeddings(x, k=5, chunk_rows=chunk_rows)
    idx, sims = _brute_force(x, 5)
    assert graph.neighbours.dtype == np.int32 and graph.weights.dtype == np.float32
    np.testing.assert_array_equal(graph.neighbours, idx)
    np.testing.assert_allclose(graph.weights, np.maximum(sims, 0), atol=1e-6)
    assert not np.any(graph.neighbours == np.arange(150)[:, None])


def test_ties_go_to_the_lower_index_whatever_the_chunking():
    # tasks 0-5 point one way, 6-9 another: every task of the first group ties with all the others of its group
    x = np.zeros((10, 3))
    x[:6, 0] = 1.0
    x[6:, 1] = 2.0
    for rows in (None, 1, 3):
        graph = TaskGraph.from_embeddings(x, k=3, chunk_rows=rows)
        np.testing.assert_array_equal(graph.neighbours[0], [1, 2, 3])
        np.testing.assert_array_equal(graph.neighbours[4], [0, 1, 2])
        np.testing.assert_array_equal(graph.neighbours[9], [6, 7, 8])
        np.testing.assert_array_equal(graph.weights[0], [1, 1, 1])
    # zero similarity: a neighbour by rank, weight 0
    np.testing.assert_array_equal(TaskGraph.from_embeddings(x, k=6).weights[6], [1, 1, 1, 0, 0, 0])


@pytest.mark.parametrize(
    ("embeddings", "k", "match"),
    [
        (np.ones(10), 2, "2-D"),
        (np.ones((10, 2)), 10, "graph_k"),
        (np.ones((10, 2)), 0, "graph_k"),
        (np.array([[1.0, np.nan]] + [[1.0, 0.0]] * 9), 2, "NaN or infinite"),
        (np.array([[0.0, 0.0]] + [[1.0, 0.0]] * 9), 2, "all-zero rows"),
        (np.array([["a", "b"]] * 10), 2, "real numbers"),
    ],
)
def test_bad_embeddings_are_refused(embeddings, k, match):
    with pytest.raises(ValueError, match=match):
        TaskGraph.from_embeddings(embeddings, k)


def test_a_graph_that_does_not_fit_is_refused_with_the_estimate(monkeypatch):
    monkeypatch.setattr(task_graph, "available_memory_bytes", lambda: 10_000)
    with pytest.raises(ValueError, match=r"task graph of 1,000 tasks .* needs about [\d.]+ GB .* only 0.00 GB"):
        TaskGraph.from_embeddings(np.ones((1000, 4)), 4)
    monkeypatch.setattr(task_graph, "available_memory_bytes", lambda: None)  # unknown: built
    assert TaskGraph.from_embeddings(np.ones((1000, 4)), 4).k == 4


def _two_clusters(n=200, seed=0):
    rng = np.random.default_rng(seed)
    side = np.arange(n) % 2
    x = rng.normal(scale=0.05, size=(n, 4))
    x[:, 0] += side
    x[:, 1] += 1 - side
    return x, side


def test_imputation_fills_from_labelled_tasks_of_the_same_cluster_and_keeps_labels_bit_for_bit():
    x, side = _two_clusters()
    rng = np.random.default_rng(1)
    truth = np.where(side[:, None] == 1, 0.9, 0.1) + rng.uniform(-0.01, 0.01, size=(200, 2))
    ref = truth.copy()
    unlabelled = rng.random(200) < 0.8
    ref[unlabelled] = np.nan
    out, report = impute_reference_report(ref, TaskGraph.from_embeddings(x, 8))
    assert np.array_equal(out[~unlabelled], ref[~unlabelled])  # bit for bit
    assert np.abs(out[unlabelled] - truth[unlabelled]).max() < 0.03
    assert report["labelled"] == int((~unlabelled).sum())
    assert sum(report.values()) == 200


def test_imputation_falls_back_to_two_hops_then_the_labelled_mean():
    # a chain: 1 sees only 0 (labelled), 2 only 1, 3 only 2; 4 sees only 3
    nb = np.array([[1], [0], [1], [2], [3]])
    graph = TaskGraph(nb, np.ones((5, 1), dtype=np.float32))
    ref = np.array([[0.2, 0.6], [np.nan] * 2, [np.nan] * 2, [np.nan] * 2, [0.4, 0.8]])
    out, report = impute_reference_report(ref, graph)
    np.testing.assert_allclose(out[1], [0.2, 0.6])  # one hop
    np.testing.assert_allclose(out[2], [0.2, 0.6])  # two hops, through 1
    np.testing.assert_allclose(out[3], [0.3, 0.7])  # no labelled task within two hops: the labelled mean
    assert report == {"labelled": 2, "one_hop": 1, "two_hops": 1, "labelled_mean": 1}


def test_imputation_refuses_bad_reference():
    graph = TaskGraph.from_embeddings(np.random.default_rng(0).normal(size=(20, 3)), 3)
    ref = np.full((20, 2), 0.5)
    ref[:, 1] = np.nan
    with pytest.raises(ValueError, match="no labelled task"):
        impute_reference(ref, graph)
    with pytest.raises(ValueError, match="shape"):
        impute_reference(np.full((19, 2), 0.5), graph)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        impute_reference(np.full((20, 2), 1.5), graph)


def test_choose_labelled_sizes_seeds_and_bad_input():
    x = np.random.default_rng(0).normal(size=(500, 5))
    for method in ("uniform", "spread"):
        a = choose_labelled(x, 0.1, method, seed=3)
        assert a.dtype == np.int64 and a.size == 50 and np.all(np.diff(a) > 0)
        np.testing.assert_array_equal(a, choose_labelled(x, 0.1, method, seed=3))
        assert not np.array_equal(a, choose_labelled(x, 0.1, method, seed=4))
        np.testing.assert_array_equal(choose_labelled(x, 1.0, method, 0), np.arange(500))
    for fraction in (0, 0.0, -0.1, 1.5, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="fraction"):
            choose_labelled(x, fraction, "uniform", 0)
    with pytest.raises(ValueError, match="labelling method"):
        choose_labelled(x, 0.1, "kmeans", 0)


def test_spread_labelling_covers_small_clusters_that_uniform_misses():
    rng = np.random.default_rng(0)
    sizes = [500] + [10] * 9
    centres = np.eye(10) * 5
    x = np.concatenate([c + rng.normal(scale=0.1, size=(s, 10)) for c, s in zip(centres, sizes, strict=True)])
    cluster = np.repeat(np.arange(10), sizes)
    fraction = 10 / x.shape[0]
    spread = [np.unique(cluster[choose_labelled(x, fraction, "spread", s)]).size for s in range(5)]
    uniform = [np.unique(cluster[choose_labelled(x, fraction, "uniform", s)]).size for s in range(5)]
    assert min(spread) >= 9 and np.mean(uniform) < 4


# ----------------------------------------------------------------------------------------------- selectors
def _bots_digest(**kwargs):
    rng = np.random.default_rng(2026)
    n = 300
    ref = np.sort(rng.random((n, 2)), axis=1)
    truth = np.clip(ref[:, 0] + 0.3 * rng.standard_normal(n), 0.02, 0.98)
    sel = build_selector("bots", n, reference_pass_rates=ref, seed=11, **kwargs)
    h = hashlib.sha256()
    out = np.random.default_rng(5)
    for _ in range(25):
        b = sel.select(24)
        sel.update(b, out.binomial(16, truth[b]), np.full(b.size, 16))
        h.update(b.tobytes())
        h.update(sel.alpha.tobytes())
        h.update(sel.beta.tobytes())
    return h.hexdigest(), sel


def test_paper_bots_is_unchanged_bit_for_bit():
    """The digest of a fixed-seed run (selections and posteriors), computed with the code before issue 36."""
    golden = "0bf6d8ae79367061611e3feda30953817ef0cf3414fdf50af45da4bff6199dad"
    digest, sel = _bots_digest()
    assert digest == golden
    # embeddings given to a selector that needs no graph change nothing, and build no graph
    digest, sel = _bots_digest(task_embeddings=np.random.default_rng(0).normal(size=(300, 4)))
    assert digest == golden and sel.task_graph is None and "task_graph" not in sel.state_dict()


def test_partial_references_are_imputed_over_the_graph():
    x, side = _two_clusters()
    ref = np.where(side[:, None] == 1, [0.5, 0.9], [0.05, 0.2])
    partial = ref.copy()
    partial[20:] = np.nan
    sel = build_selector("bots_partial_ref", 200, reference_pass_rates=partial, task_embeddings=x)
    np.testing.assert_allclose(sel.reference, ref)
    same = build_selector("bots", 200, reference_pass_rates=partial, task_embeddings=x, reference_nan="neighbours")
    np.testing.assert_array_equal(same.reference, sel.reference)
    # the column-mean imputation is what reference_nan="impute" still does
    assert np.abs(build_selector("bots", 200, reference_pass_rates=partial).reference - ref).max() > 0.2
    with pytest.raises(ValueError, match="needs task_embeddings .*reference_nan='neighbours'"):
        build_selector("bots_partial_ref", 200, reference_pass_rates=partial)
    with pytest.raises(ValueError, match="defined by reference_nan='neighbours'"):
        build_selector("bots_partial_ref", 200, reference_pass_rates=partial, task_embeddings=x, reference_nan="error")
    with pytest.raises(ValueError, match="no value at all"):
        build_selector("bots_partial_ref", 200, reference_pass_rates=np.full((200, 2), np.nan), task_embeddings=x)
    with pytest.raises(ValueError, match="199 rows, but the pool has 200"):
        build_selector("bots_partial_ref", 200, reference_pass_rates=partial, task_embeddings=x[:-1])
    with pytest.raises(ValueError, match="needs reference_pass_rates"):
        build_selector("bots_partial_ref", 200, task_embeddings=x)


def test_checkpoints_refuse_another_graph():
    x, _ = _two_clusters()
    ref = np.full((200, 2), np.nan)
    ref[:50] = [0.3, 0.6]
    ref[:50:2] = [0.1, 0.4]
    sel = build_selector("bots_partial_ref", 200, reference_pass_rates=ref, task_embeddings=x, seed=0)
    state = sel.state_dict()
    build_selector("bots_partial_ref", 200, reference_pass_rates=ref, task_embeddings=x.copy()).load_state_dict(state)
    other = build_selector("bots_partial_ref", 200, reference_pass_rates=ref, task_embeddings=x[::-1].copy())
    before = other.state_dict()
    with pytest.raises(ValueError, match="task graph"):
        other.load_state_dict(state)
    assert other.state_dict()["task_graph"] == before["task_graph"]
    # a checkpoint with a graph does not load into a selector without one
    with_graph = build_selector("bots", 200, reference_pass_rates=ref, task_embeddings=x, reference_nan="neighbours")
    with pytest.raises(ValueError, match="task graph"):
        build_selector("bots", 200, reference_pass_rates=np.nan_to_num(ref, nan=0.5)).load_state_dict(
            with_graph.state_dict()
        )
