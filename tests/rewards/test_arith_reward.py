"""The toy arithmetic scorer: right, wrong, malformed and adversarial responses, through the public dispatcher."""

from __future__ import annotations

import time

import pytest

from bots_verl.rewards import compute_score, domain_of, supports
from bots_verl.rewards.arith_reward import DATA_SOURCE, canonical_answer

SOURCE = DATA_SOURCE


def _score(response, truth="46") -> dict:
    return compute_score(SOURCE, response, truth)


def test_routed_as_its_own_domain() -> None:
    assert supports(SOURCE) and domain_of(SOURCE) == "arith"
    assert set(_score("46")) == {"score", "acc", "formatted"}


@pytest.mark.parametrize(
    ("response", "truth"),
    [("46", "46"), ("0", "0"), ("-4", "-4"), ("7006652", "7006652"), (" 46\n", "46"), ("\t-120 ", "-120")],
)
def test_right_answers(response: str, truth: str) -> None:
    result = _score(response, truth)
    assert result == {"score": 1.0, "acc": True, "formatted": True}


def test_int_ground_truth_is_accepted() -> None:
    assert compute_score(SOURCE, "-12", -12)["acc"] is True


@pytest.mark.parametrize(("response", "truth"), [("47", "46"), ("-46", "46"), ("46", "-46"), ("4", "46"), ("1", "0")])
def test_wrong_but_well_formed(response: str, truth: str) -> None:
    assert _score(response, truth) == {"score": 0.0, "acc": False, "formatted": True}


@pytest.mark.parametrize(
    "response",
    [
        "",
        "   ",
        "046",  # leading zero
        "+46",  # explicit plus
        "-0",
        "--46",
        "46.0",
        "4 6",
        "46 46",  # several answers
        "46 47",
        "45 46",
        "46=46",
        "12+34=46",
        "46</s>",
        "46<unk>",
        "answer: 46",
        "\u0664\u0666",  # Arabic-Indic digits 4 6
        "\uff14\uff16",  # fullwidth 4 6
        "4\u200b6",  # zero-width space inside
        "46\u00a0",  # non-ASCII whitespace is not stripped
        "1e2",
        "0x2e",
        None,
        46,
        b"46",
        ["46"],
    ],
)
def test_malformed_is_a_failure(response) -> None:
    result = _score(response)
    assert result["score"] == 0.0 and result["acc"] is False and result["formatted"] is False


@pytest.mark.parametrize("response", ["46" * 200, "46" + " " * 300, "9" * 5000, "-" + "1" * 100_000])
def test_huge_responses_fail(response: str) -> None:
    assert _score(response) == {"score": 0.0, "acc": False, "formatted": False}


def test_huge_input_never_hangs() -> None:
    """A hang guard, not a speed target: 100 calls on 5M digits would take minutes if each were scanned or int()ed."""
    text = "1" * 5_000_000
    start = time.perf_counter()
    for _ in range(100):
        assert _score(text)["acc"] is False
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("truth", ["046", "-0", "4.6", "", "abc", " 46", "\u0664", 4.6, True, None, ["46"], "9" * 300])
def test_malformed_ground_truth_raises(truth) -> None:
    with pytest.raises(ValueError):
        canonical_answer(truth)
    with pytest.raises(ValueError):
        _score("46", truth)


def test_routed_like_verl_calls_it() -> None:
    """verl's reward loop calls the router with ``extra_info`` (and other domains' options); the toy scorer ignores
    them rather than raising, which would end a training step."""
    from bots_verl.rewards import compute_score as route

    info = {"index": 3, "split": "train"}
    assert route("toy__arith", "46", "46", extra_info=info, timeout_s=1.0)["acc"] is True
    assert route("toy__arith", "47", "46", extra_info=info)["acc"] is False
