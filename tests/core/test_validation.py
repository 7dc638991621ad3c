"""Bad input gets a clear ValueError and leaves the selector exactly as it was."""

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_verl.core import build_selector

N = 10
REF = np.column_stack([np.linspace(0, 0.5, N), np.linspace(0.4, 1, N)])


def _snapshot(sel):
    state = sel.state_dict()
    return state, [state["extra"]["posterior"]["alpha"], state["extra"]["posterior"]["beta"]]


BAD_UPDATES = [
    (([10], [1], [16]), "out of range"),
    (([-1], [1], [16]), "out of range"),
    (([1, 1], [1, 2], [16, 16]), "repeated"),
    (([1, 2], [1], [16, 16]), "differ in length"),
    (([1], [1], [16, 16]), "differ in length"),
    (([1], [-1], [16]), ">= 0"),
    (([1], [17], [16]), "exceed attempts"),
    (([1], [np.nan], [16]), "NaN or infinite"),
    (([1], [np.inf], [16]), "NaN or infinite"),
    (([1], [1], [0]), "positive"),
    (([1], [1], [np.nan]), "NaN or infinite"),
    (([1.5], [1], [16]), "integers"),
    (([True, False], [1, 1], [16, 16]), "integers"),  # a boolean mask is not a list of indices
    (([], [], []), "empty"),
    (([[1, 2]], [1, 2], [16, 16]), "1-D"),
    (([1], [1 + 2j], [16]), "real numbers"),  # the imaginary part used to be dropped silently
    (([1], ["3"], [16]), "real numbers"),  # a string used to be parsed
    (([1], [1], ["16"]), "real numbers"),
    (([1], [1], [True]), "real numbers"),  # a boolean attempt count is not 1
    (([1], [None], [16]), "real numbers"),
    (([1], [1], [1e308]), "attempts above"),  # used to turn beta into inf and NaN
]


@pytest.mark.parametrize(("args", "message"), BAD_UPDATES)
def test_bad_update_is_rejected_atomically(args, message):
    sel = build_selector("bots", N, reference_pass_rates=REF, seed=0)
    sel.update([0, 9], [4, 12], [16, 16])  # give it some non-trivial state (mu set)
    state, arrays = _snapshot(sel)
    with pytest.raises(ValueError, match=message):
        sel.update(*args)
    after, after_arrays = _snapshot(sel)
    for a, b in zip(arrays, after_arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    assert after["extra"]["evidence"] == state["extra"]["evidence"]
    assert after["steps"] == state["steps"] and after["rng"] == state["rng"]


@pytest.mark.parametrize("batch_size", [0, -1, N + 1, 2.0, True])
def test_bad_batch_size(batch_size):
    sel = build_selector("bots", N, reference_pass_rates=REF)
    with pytest.raises(ValueError, match="batch_size"):
        sel.select(batch_size)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reference_pass_rates": REF[:-1]}, "shape"),
        ({"reference_pass_rates": REF[:, :1]}, "exactly two"),
        ({"reference_pass_rates": REF + 0.6}, r"\[0, 1\]"),
        ({"reference_pass_rates": None}, "reference_pass_rates"),
        ({"reference_pass_rates": REF, "lam": 1.5}, "lam"),
        ({"reference_pass_rates": REF, "rho": -0.1}, "rho"),
        ({"reference_pass_rates": REF, "gamma": 1.0}, "gamma"),
        ({"reference_pass_rates": REF, "lamda": 0.1}, "unknown hyperparameter 'lamda'"),
        ({"reference_pass_rates": REF, "evidence": "magic"}, "unknown evidence"),
        ({"reference_pass_rates": REF, "selection": "magic"}, "unknown selection"),
        ({"reference_pass_rates": REF, "selection": "softmax", "tau": 0}, "tau"),
        ({"reference_pass_rates": REF, "alpha0": 0}, "alpha0"),
        ({"reference_pass_rates": REF, "tau": 0.1}, "unknown hyperparameter 'tau'"),  # softmax only
        ({"reference_pass_rates": REF, "implicit_scale": -1}, "implicit_scale"),
        ({"reference_pass_rates": REF, "implicit_scale": 1e308}, "implicit_scale"),
    ],
)
def test_bad_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_selector("bots", N, **kwargs)


def test_unknown_selector_and_missing_reference():
    with pytest.raises(ValueError, match="unknown selector"):
        build_selector("botz", N)
    with pytest.raises(ValueError, match="needs reference_pass_rates"):
        build_selector("offline_easy2hard", N)
    with pytest.raises(ValueError, match="num_tasks"):
        build_selector("random", 0)


def test_missing_reference_values_are_imputed_with_one_warning(caplog):
    ref = REF.copy()
    ref[[1, 2], 0] = np.nan
    ref[5, 1] = np.nan
    with caplog.at_level(logging.WARNING):
        sel = build_selector("bots", N, reference_pass_rates=ref)
    warnings = [r for r in caplog.records if "imputed" in r.getMessage()]
    assert len(warnings) == 1 and "3 missing" in warnings[0].getMessage()
    assert not np.isnan(sel.reference).any()
    assert sel.reference[1, 0] == pytest.approx(np.nanmean(ref[:, 0]))
    with pytest.raises(ValueError, match="missing values"):
        build_selector("bots", N, reference_pass_rates=ref, reference_nan="error")
    ref[:, 1] = np.nan
    with pytest.raises(ValueError, match="no value at all"):
        build_selector("bots", N, reference_pass_rates=ref)


@settings(max_examples=60, deadline=None)
@given(
    evidence=st.sampled_from(["interpolation", "none"]),
    lam=st.floats(0, 1),
    rho=st.floats(0, 1),
    steps=st.lists(
        st.lists(st.tuples(st.integers(0, N - 1), st.floats(0, 1), st.integers(1, 64)), min_size=1, max_size=N),
        min_size=1,
        max_size=8,
    ),
)
def test_posterior_stays_positive_and_finite(evidence, lam, rho, steps):
    sel = build_selector("bots", N, reference_pass_rates=REF, evidence=evidence, lam=lam, rho=rho, seed=0)
    for step in steps:
        by_task = {i: (frac, n) for i, frac, n in step}
        idx = np.array(list(by_task))
        n = np.array([by_task[i][1] for i in idx], dtype=float)
        s = np.array([by_task[i][0] for i in idx]) * n
        sel.update(idx, s, n)
        assert np.all(np.isfinite(sel.alpha)) and np.all(np.isfinite(sel.beta))
        assert np.all(sel.alpha > 0) and np.all(sel.beta > 0)
        batch = sel.select(3)
        assert np.unique(batch).size == 3


@pytest.mark.parametrize("key", ["lam", "rho", "target", "alpha0", "gamma", "warm_start_weight", "implicit_scale"])
@pytest.mark.parametrize("value", [True, False, np.True_])
def test_a_boolean_is_not_a_number_hyperparameter(key, value):
    """Issue 47, item 8: float(True) is 1.0, so lam=true ran as lambda = 1."""
    with pytest.raises(ValueError, match=rf"hyperparameter '{key}' is a number .*got the boolean"):
        build_selector("bots", N, reference_pass_rates=REF, **{key: value})


@pytest.mark.parametrize(
    ("selector", "key", "value", "fix"),
    [
        ("bots", "lam", "0.1", "+bots.hparams.lam=0.1"),
        ("bots", "rho", " 0.3", "+bots.hparams.rho=0.3"),
        ("pass_rate_oracle", "target", "0.5", "+bots.hparams.target=0.5"),
        ("dps", "decay", "high", "+bots.hparams.decay=<number>"),
        ("greso", "p_easy", "0.5", "+bots.hparams.p_easy=0.5"),
    ],
)
def test_a_quoted_number_is_refused_naming_the_key_and_the_fix(selector, key, value, fix):
    """Issue 47, item 9: a string rate failed later with "Unknown format code 'g'", or was kept as a string."""
    ref = REF if selector == "bots" else None
    with pytest.raises(ValueError) as refused:
        build_selector(selector, N, reference_pass_rates=ref, **{key: value})
    message = str(refused.value)
    assert f"hyperparameter '{key}' is a number" in message and f"got the string {value!r}" in message
    assert fix in message


def test_numbers_of_either_type_and_non_number_hyperparameters_still_pass():
    sel = build_selector("bots", N, reference_pass_rates=REF, lam=1, rho=np.float32(0.2), implicit_scale=8)
    assert (sel.lam, sel.rho, sel.implicit_scale) == (1.0, pytest.approx(0.2), 8.0)
    assert build_selector("bots", N, reference_pass_rates=REF, evidence="none", selection="greedy").hparams[
        "evidence"
    ] == ("none")


def _null_cases():
    """Every (selector, hyperparameter) whose default is a value, the two every selector reads included."""
    from bots_verl.core import SELECTORS

    for name in sorted(SELECTORS):
        cls = SELECTORS.lookup(name)
        for key, default in {**cls.effective_hparams({}), **cls._BASE_DEFAULTS}.items():
            if default is not None and key not in cls.FIXED:
                yield name, key


@pytest.mark.parametrize(("selector", "key"), list(_null_cases()))
def test_a_null_hyperparameter_is_refused_naming_it(selector, key):
    """Issue 59, item 8a: gamma=None failed inside the selector with float()'s message, which names nothing."""
    with pytest.raises(ValueError) as refused:
        build_selector(selector, N, reference_pass_rates=REF, task_embeddings=np.eye(N) + 0.5, **{key: None})
    assert f"hyperparameter '{key}' is null, but it takes a value" in str(refused.value)


def test_a_hyperparameter_whose_default_is_null_still_takes_null():
    assert build_selector("bots", N, reference_pass_rates=REF, implicit_scale=None).hparams["implicit_scale"] is None
