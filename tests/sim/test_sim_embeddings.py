"""The simulator's task embeddings and partial references (issue 36): what they carry, and the loop keys."""

import numpy as np
import pytest

from bots_verl.core.task_graph import TaskGraph
from bots_verl.sim import build_world, get_scenario, parse_method, run_experiment
from bots_verl.sim.loop import stream
from bots_verl.sim.pool_embeddings import labelled_reference, pool_embeddings


def _world(**over):
    return build_world(get_scenario("toy", **over), stream(0, 0))


def test_embeddings_carry_the_latent_difficulty_and_their_noise_knob_blurs_it():
    spreads = []
    for noise in (0.0, 1.0, 4.0):
        world = _world(embedding_noise=noise)
        emb = pool_embeddings(world, stream(0, 3))
        assert emb.shape == (len(world.pool), 64)
        np.testing.assert_array_equal(emb, pool_embeddings(world, stream(0, 3)))  # its own stream: deterministic
        hardness = world.pool.discrimination * world.pool.difficulty
        graph = TaskGraph.from_embeddings(emb, 8)
        spreads.append(np.abs(hardness[graph.neighbours] - hardness[:, None]).mean())
    random_pairs = np.abs(hardness - np.random.default_rng(0).permutation(hardness)).mean()
    assert spreads[0] < spreads[1] < spreads[2] < random_pairs
    assert spreads[1] < 0.5 * random_pairs  # at the default noise, neighbours are far closer in difficulty


def test_the_embeddings_leave_the_world_unchanged():
    a, b = _world(), _world(embedding_noise=3.0, embedding_dims=8)
    np.testing.assert_array_equal(a.pool.reference, b.pool.reference)
    np.testing.assert_array_equal(a.pool.difficulty, b.pool.difficulty)


def test_labelled_reference_and_the_loop_keys():
    world = _world()
    emb = pool_embeddings(world, stream(0, 3))
    ref = world.pool.reference
    assert labelled_reference(ref, emb, 1.0, "uniform", 0) is ref
    assert labelled_reference(ref, emb, 0.0, "uniform", 0) is None
    part = labelled_reference(ref, emb, 0.1, "spread", 0)
    labelled = ~np.isnan(part[:, 0])
    assert labelled.sum() == round(0.1 * len(ref))
    np.testing.assert_array_equal(part[labelled], ref[labelled])
    spec = parse_method("r10=bots_partial_ref:ref_fraction=0.1,ref_labels=spread")
    assert (spec.ref_fraction, spec.ref_labels, spec.hparams) == (0.1, "spread", {})
    with pytest.raises(ValueError, match="ref_fraction"):
        parse_method("bots:ref_fraction=1.5")
    with pytest.raises(ValueError, match="ref_labels"):
        parse_method("bots:ref_labels=kmeans")


def test_reference_free_and_partial_arms_run_and_beat_random():
    res = run_experiment(
        "toy",
        ["random", "bots_noref:ref_fraction=0", "r10=bots_partial_ref:ref_fraction=0.1"],
        seeds=2,
        steps=20,
        batch_size=16,
        rollouts_per_task=8,
        plots=False,
    )
    etr = {label: row["etr"].mean for label, row in res.summary.items()}
    assert etr["bots_noref"] > etr["random"] + 0.05 and etr["r10"] > etr["random"] + 0.05, etr
