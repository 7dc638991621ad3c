"""Warm-up and exact pass rates: bitwise determinism from the spec, exact probabilities that sampling agrees with."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bots_verl.toy.likelihood import answer_stats
from bots_verl.toy.model import ModelSpec, build_model
from bots_verl.toy.tasks import Cell, Problem
from bots_verl.toy.tokenizer import VOCAB, encode
from bots_verl.toy.warmup import WarmupSpec, WarmupTargetError, is_done, train_warmup

TINY = ModelSpec(hidden=32, layers=2, heads=2, intermediate=64)
# one-digit addition only: after a few dozen steps the pass rates sit between 0 and 1, which the sampling check needs
SPEC = WarmupSpec(model=TINY, mixture={"add1x1": 1.0}, steps=60, batch_size=32, lr=1e-2, warmup_steps=5)


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    out = tmp_path_factory.mktemp("w") / "model"
    return out, train_warmup(SPEC, out, log_every=20)


def _weights(path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path)).state_dict()


def test_same_spec_gives_bitwise_the_same_model(warmed, tmp_path) -> None:
    out, result = warmed
    again = train_warmup(SPEC, tmp_path / "again", log_every=20)
    assert again["loss"] == result["loss"]
    first, second = _weights(out), _weights(tmp_path / "again")
    assert all(torch.equal(first[k], second[k]) for k in first)
    other = train_warmup(_replace(SPEC, init_seed=1), tmp_path / "other", log_every=20)
    assert other["loss"] != result["loss"]
    assert result["loss"][-1][1] < result["loss"][0][1]  # it learns


def _replace(spec: WarmupSpec, **kw) -> WarmupSpec:
    import dataclasses

    return dataclasses.replace(spec, **kw)


def test_finished_warmup_is_skipped_and_a_different_spec_is_refused(warmed) -> None:
    out, result = warmed
    assert is_done(out, SPEC)
    assert train_warmup(SPEC, out) == json.loads((out / "warmup.json").read_text())
    with pytest.raises(ValueError, match="another spec"):
        train_warmup(_replace(SPEC, steps=61), out)


def test_a_foreign_directory_is_never_overwritten(tmp_path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="no finished warm-up"):
        train_warmup(SPEC, tmp_path / "model")
    assert (tmp_path / "model" / "notes.txt").read_text() == "mine"


def test_bad_specs_are_rejected() -> None:
    bad = ({"steps": 0}, {"lr": 0.0}, {"lr": float("nan")}, {"batch_size": 0}, {"mixture": {"div1x1": 1.0}})
    for kw in (*bad, {"slip": -0.1}, {"slip": 1.0}):
        with pytest.raises(ValueError):
            _replace(SPEC, **kw)


def test_exact_pass_rates_agree_with_sampling(warmed) -> None:
    """P(sampled response is right) from one forward pass equals the frequency over many sampled responses."""
    from transformers import AutoModelForCausalLM

    from bots_verl.rewards import compute_score

    out, _ = warmed
    model = AutoModelForCausalLM.from_pretrained(str(out))
    problems = [Problem(a, b, "+") for a, b in [(2, 3), (7, 8), (0, 0), (9, 9), (4, 5), (1, 6)]]
    p, greedy = answer_stats(model, problems)
    assert np.all((p > 0) & (p < 1)) and p.std() > 0.02, p  # informative: not all 0 or 1
    n = 400
    inv = {i: t for t, i in VOCAB.items()}
    torch.manual_seed(0)
    for prob, problem, is_greedy in zip(p, problems, greedy, strict=True):
        ids = torch.tensor([encode(problem.prompt)[0]])
        with torch.no_grad():
            sampled = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                top_k=0,
                max_new_tokens=6,
                num_return_sequences=n,
                pad_token_id=VOCAB["<pad>"],
            )
            best = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=6)
        texts = [_response(row, ids.shape[1], inv) for row in sampled]
        hits = sum(compute_score("toy__arith", t, problem.answer)["acc"] for t in texts)
        se = np.sqrt(prob * (1 - prob) / n)
        assert abs(hits / n - prob) < 4.5 * se + 0.01, (problem, hits / n, prob)
        assert (_response(best[0], ids.shape[1], inv) == problem.answer) == bool(is_greedy)


def _response(row: torch.Tensor, prompt_len: int, inv: dict[int, str]) -> str:
    """Decode like verl: the tokens after the prompt up to the first </s>, special tokens skipped."""
    out = []
    for t in row[prompt_len:].tolist():
        if inv[t] == "</s>":
            break
        if inv[t] not in ("<pad>", "<s>", "<unk>"):
            out.append(inv[t])
    return "".join(out)


def test_build_model_is_seeded() -> None:
    a, b, c = build_model(TINY, 0), build_model(TINY, 0), build_model(TINY, 1)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.config.vocab_size == len(VOCAB) and a.generation_config.eos_token_id == VOCAB["</s>"]
    assert Cell.from_name("add1x1") in SPEC.cell_weights


def test_a_slipping_warmup_learns_the_stray_token_and_keeps_old_specs_equal(warmed, tmp_path) -> None:
    import random

    from bots_verl.toy.warmup import _with_slips

    # no slip: the data and the stored spec are what they were before the field existed
    problems = [Problem(1, 2, "+"), Problem(3, 4, "+")]
    assert _with_slips(problems, 0.0, random.Random(0)) == problems
    assert "slip" not in SPEC.to_dict() and _replace(SPEC, slip=0.5).to_dict()["slip"] == 0.5
    slipped = _with_slips(problems * 500, 0.3, random.Random(0))
    share = np.mean([p.answer.startswith("=") for p in slipped])
    assert 0.25 < share < 0.35
    assert all(p.answer.lstrip("=") == q.answer for p, q in zip(slipped, problems * 500, strict=True))

    out = tmp_path / "slipping"
    train_warmup(_replace(SPEC, slip=0.5), out, log_every=20)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    clean = AutoModelForCausalLM.from_pretrained(str(warmed[0])).eval()
    ids, _ = encode("3+4")
    # the probability that the response opens with "=": learnt by the slipping model only
    with torch.no_grad():
        p_slip = torch.softmax(model(torch.tensor([ids])).logits[0, -1], -1)[VOCAB["="]]
        p_clean = torch.softmax(clean(torch.tensor([ids])).logits[0, -1], -1)[VOCAB["="]]
    assert p_slip > 0.2 and p_clean < 0.05


# ---------------------------------------------------------------------------------------- stopping at a pass rate
def _probe() -> list[str]:
    from bots_verl.toy.families import family_of

    fam = family_of("arith")
    return [p.prompt for p in fam.sample_unique({fam.cell_from_name("add1x1"): 30}, np.random.default_rng(0), [])]


def _checks(caplog) -> dict[int, float]:
    """The pool pass rates the warm-up logged at its checks, by step."""
    found = {}
    for record in caplog.records:
        if "pool pass rate" in record.getMessage():
            step, rate = record.args[1], record.args[2]
            found[step] = rate
    return found


def test_a_warmup_stops_at_the_first_check_that_reaches_its_target_and_is_otherwise_unchanged(
    warmed, tmp_path, caplog
) -> None:
    """Checks change nothing the training reads: stopped at ``steps``, the model is bitwise the fixed-length one
    (what lets a build made by step counts be recorded with its target); one not reaching the target within
    ``max_steps`` fails naming how far it got and writes nothing; past ``steps`` it trains on at the floor rate."""
    out, result = warmed
    probe = _probe()
    caplog.set_level("INFO", logger="bots_verl.toy.warmup")
    never = _replace(SPEC, stop_at=0.999, check_every=10, max_steps=SPEC.steps)
    with pytest.raises(WarmupTargetError, match=r"did not reach a pool pass rate of 0.999 in 60 steps \(highest"):
        train_warmup(never, tmp_path / "never", log_every=20, probe=probe)
    assert not (tmp_path / "never").exists()
    checks = _checks(caplog)
    assert sorted(checks) == [10, 20, 30, 40, 50, 60]
    assert checks[60] > max(checks[s] for s in (10, 20, 30, 40, 50))  # still climbing: a target stops it at 60
    # the target between the last two checks' rates: it stops at step 60, bitwise the fixed 60-step model
    at_60 = _replace(never, stop_at=(checks[50] + checks[60]) / 2, max_steps=2 * SPEC.steps)
    stopped = train_warmup(at_60, tmp_path / "at_60", log_every=20, probe=probe)
    assert stopped["stopped_at"] == 60 and [tuple(c) for c in stopped["checks"]] == sorted(checks.items())
    assert stopped["loss"] == result["loss"]
    first, second = _weights(out), _weights(tmp_path / "at_60")
    assert all(torch.equal(first[k], second[k]) for k in first)
    # the saved model is the one checked
    model = build_model(TINY, seed=0)
    model.load_state_dict(second)
    from bots_verl.toy.families import family_of

    tasks = [family_of("arith").parse_prompt(p) for p in probe]
    assert float(np.mean(answer_stats(model, tasks)[0])) == pytest.approx(checks[60], abs=1e-12)
    # a target the first check reaches stops there; one above step 60's rate trains on past the schedule's end
    early = train_warmup(_replace(at_60, stop_at=checks[10] / 2), tmp_path / "early", log_every=20, probe=probe)
    assert early["stopped_at"] == 10 and len(early["checks"]) == 1
    later = _replace(at_60, stop_at=checks[60] + 1e-6)
    beyond = train_warmup(later, tmp_path / "beyond", log_every=20, probe=probe)
    assert 60 < beyond["stopped_at"] <= 120 and beyond["checks"][-1][1] >= later.stop_at


def test_stopping_settings_are_checked_and_recorded_only_when_used(tmp_path) -> None:
    for kw in (
        {"stop_at": 0.0, "max_steps": 60},
        {"stop_at": 1.0, "max_steps": 60},
        {"stop_at": 0.5},  # no max_steps
        {"stop_at": 0.5, "max_steps": 59},  # below steps
        {"stop_at": 0.5, "max_steps": 60, "check_every": 0},
        {"max_steps": 120},  # without stop_at
    ):
        with pytest.raises(ValueError):
            _replace(SPEC, **kw)
    with pytest.raises(ValueError, match="needs the prompts it is checked on"):
        train_warmup(_replace(SPEC, stop_at=0.5, max_steps=60), tmp_path / "m")
    assert not {"stop_at", "check_every", "max_steps"} & set(SPEC.to_dict())  # older specs compare equal
    assert _replace(SPEC, stop_at=0.5, max_steps=60).to_dict()["stop_at"] == 0.5
