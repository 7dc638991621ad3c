"""Exact pass rates: models load whole when several threads load at once, and a non-finite model is refused."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from bots_verl.toy.likelihood import answer_stats, load_model
from bots_verl.toy.model import ModelSpec, build_model
from bots_verl.toy.tasks import Problem

PROBLEMS = [Problem(a, b, op) for a, b, op in [(2, 3, "+"), (17, 8, "+"), (40, 9, "-"), (99, 99, "+"), (5, 4, "-")]]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    build_model(ModelSpec(hidden=32, layers=2, heads=2, intermediate=64), seed=0).save_pretrained(str(out))
    return out


def test_concurrent_loads_give_the_same_model_and_pass_rates(model_dir) -> None:
    """The toy benchmark evaluates runs in threads; unserialised ``from_pretrained`` left meta tensors (seen as NaN)."""
    reference = load_model(model_dir)
    expected = {k: v.clone() for k, v in reference.state_dict().items()}
    expected_p, expected_greedy = answer_stats(reference, PROBLEMS)

    def load_and_score(_: int) -> tuple[list[str], np.ndarray, np.ndarray]:
        model = load_model(model_dir)
        state = model.state_dict()
        wrong = [k for k, v in state.items() if v.is_meta or not torch.equal(v, expected[k])]
        wrong += [k for k, v in model.named_buffers() if v.is_meta or not torch.isfinite(v).all()]
        return wrong, *answer_stats(model, PROBLEMS)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(load_and_score, range(24)))
    for wrong, p, greedy in results:
        assert wrong == []
        np.testing.assert_array_equal(p, expected_p)
        np.testing.assert_array_equal(greedy, expected_greedy)
    assert np.all((expected_p > 0) & (expected_p < 1))


def test_a_model_with_non_finite_weights_is_refused(model_dir) -> None:
    model = load_model(model_dir)
    with torch.no_grad():
        model.model.embed_tokens.weight[:] = float("nan")
    with pytest.raises(ValueError, match="not finite"):
        answer_stats(model, PROBLEMS)


def test_answer_stats_rejects_a_non_positive_temperature(model_dir) -> None:
    with pytest.raises(ValueError, match="temperature"):
        answer_stats(load_model(model_dir), PROBLEMS, temperature=0)
