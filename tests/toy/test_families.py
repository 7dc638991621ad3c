"""The toy testbed's code and logic families: their generators (cells, unique puzzles, GURU ground truths scored by
the real domain rewards), the tokenizer, and ``python -m bots_verl.toy.prepare --family code|logic --profile ci``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bots_verl.rewards import compute_score, domain_of
from bots_verl.toy import code_tasks, logic_tasks
from bots_verl.toy.build_profiles import FAMILY_PROFILES, PrepareError, build_profile
from bots_verl.toy.families import FAMILIES, family_of
from bots_verl.toy.heldout import SAMPLES
from bots_verl.toy.prepare import main, prepare
from bots_verl.toy.tokenizer import VOCAB, build_tokenizer, encode, vocab_of

NEW = ("code", "logic")


def _samples(family: str, per_cell: int = 20, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [cell.sample(rng) for cell in FAMILIES[family].cells for _ in range(per_cell)]


@pytest.mark.parametrize("family", NEW)
def test_cells_are_graded_seeded_and_prompts_read_back(family: str) -> None:
    fam = family_of(family)
    assert [fam.level(c) for c in fam.cells] == sorted(fam.level(c) for c in fam.cells)
    assert {fam.level(c) for c in fam.cells} == {1, 2, 3, 4}
    for cell in fam.cells:
        assert fam.cell_from_name(cell.name) == cell
    problems = _samples(family)
    assert [p.prompt for p in problems] == [p.prompt for p in _samples(family)]
    assert [p.prompt for p in problems] != [p.prompt for p in _samples(family, seed=1)]
    for i, problem in enumerate(problems):
        assert problem.cell == fam.cells[i // 20]
        assert fam.parse_prompt(problem.prompt) == problem
    for bad in ("", "1+2", "x", "+0", "BCD:", "BC:B<C", "BCD:B<C"):
        with pytest.raises(ValueError):
            fam.parse_prompt(bad)


def test_logic_puzzles_have_one_solution_and_no_spare_constraint() -> None:
    for problem in _samples("logic", per_cell=10):
        assert len(logic_tasks._solutions(problem.objects, list(problem.constraints))) == 1
        for c in problem.constraints:
            rest = [x for x in problem.constraints if x is not c]
            assert len(logic_tasks._solutions(problem.objects, rest)) > 1, problem.prompt
        order = problem.order
        for a, kind, b in problem.constraints:
            assert order.index(a) < order.index(b) if kind == "<" else order.index(a) == b - 1


def test_code_programs_follow_the_pipeline_left_to_right() -> None:
    assert code_tasks.parse_prompt("+3*2%5").expression == "(x+3)*2%5"
    assert code_tasks.parse_prompt("*2+3//4-1").expression == "(x*2+3)//4-1"
    assert code_tasks.CodeCell(1, 0).size == 9 + 9 + 8 + 8 + 8
    for problem in _samples("code", per_cell=10):
        f = eval(f"lambda x:{problem.expression}")  # noqa: S307 - our own generated expression, no model output
        assert [f(x) for x in code_tasks.TEST_INPUTS] == json.loads(problem.ground_truth)["outputs"]
        assert problem.expression.count("(") == problem.cell.wraps


@pytest.mark.parametrize("family", NEW)
def test_the_domain_reward_scores_the_canonical_answer_and_rejects_wrong_ones_and_the_slip(family: str) -> None:
    """Through the public dispatcher: code answers run in the bubblewrap sandbox (status ``ok`` / ``wrong_answer``
    are set only after the program ran), logic answers through the ordering checker."""
    fam = family_of(family)
    assert domain_of(fam.data_source) == family
    rng = np.random.default_rng(3)
    for cell in fam.cells[:: max(1, len(fam.cells) // 4)]:
        problem, other = cell.sample(rng), cell.sample(rng)
        right = compute_score(fam.data_source, problem.answer, problem.ground_truth)
        assert right["acc"] and right["score"] == 1.0
        slip = compute_score(fam.data_source, fam.slip(problem.answer), problem.ground_truth)
        assert not slip["acc"] and fam.slip(problem.answer) != problem.answer
        if other.ground_truth != problem.ground_truth:
            wrong = compute_score(fam.data_source, other.answer, problem.ground_truth)
            assert not wrong["acc"] and wrong["score"] == 0.0
            if family == "code":
                assert right["status"] == "ok" and wrong["status"] == "wrong_answer" and slip["status"] == "no_code"


@pytest.mark.parametrize("family", NEW)
def test_the_family_tokenizer_extends_arithmetic_and_renders_like_encode(family: str) -> None:
    vocab = vocab_of(family)
    assert {k: vocab[k] for k in VOCAB} == VOCAB and vocab_of("arith") == VOCAB
    tok = build_tokenizer(family=family)
    for problem in _samples(family, per_cell=2):
        ids, n_prompt = encode(problem.prompt, problem.answer, vocab)
        assert vocab["<unk>"] not in ids and n_prompt <= family_of(family).max_prompt_length
        messages = [{"role": "user", "content": problem.prompt}, {"role": "assistant", "content": problem.answer}]
        rendered = tok.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert list(rendered) == ids
        assert tok.decode(ids[n_prompt:], skip_special_tokens=True) == problem.answer


def test_unknown_families_and_profiles_are_refused_by_name(tmp_path, capsys) -> None:
    with pytest.raises(PrepareError, match="unknown toy task family 'poetry'"):
        build_profile("poetry", "ci")
    with pytest.raises(PrepareError, match=r"the code family has no 'quick' build profile \(it has \['ci', 'full'\]\)"):
        build_profile("code", "quick")
    assert main(["--out", str(tmp_path / "x"), "--profile", "quick", "--family", "logic", "--dry-run"]) == 2
    assert "the logic family has no 'quick' build profile" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["--out", str(tmp_path / "y"), "--profile", "ci", "--family", "code", "--dry-run"]) == 0
    assert "family code, profile ci" in capsys.readouterr().out
    assert build_profile("arith", "full") is FAMILY_PROFILES["arith"]["full"]


@pytest.fixture(scope="module", params=NEW)
def family_build(request, tmp_path_factory) -> tuple[str, Path]:
    """``python -m bots_verl.toy.prepare --profile ci --jobs 1 --family <family>`` in a fresh directory."""
    family = request.param
    out = tmp_path_factory.mktemp(f"toy_{family}_ci") / "data"
    assert main(["--out", str(out), "--profile", "ci", "--jobs", "1", "--family", family]) == 0
    return family, out


def test_a_family_build_has_the_domain_rows_references_and_refuses_another_family(family_build) -> None:
    family, out = family_build
    fam, profile = family_of(family), build_profile(family, "ci")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["family"] == family and manifest["artifacts"]["max_prompt_length"] == fam.max_prompt_length
    assert json.loads((out / "data.json").read_text())["settings"]["family"] == family
    train, val = pq.read_table(out / "train.parquet").to_pylist(), pq.read_table(out / "val.parquet").to_pylist()
    assert len(train) == sum(profile.pool_counts().values()) and len(val) == profile.heldout_size
    assert not {r["prompt"][0]["content"] for r in train} & {r["prompt"][0]["content"] for r in val}
    for row in train[:8] + val[:4]:
        problem = fam.parse_prompt(row["prompt"][0]["content"])
        assert row["data_source"] == fam.data_source and row["ability"] == fam.ability
        assert (
            row["extra_info"]["cell"] == problem.cell.name
            and row["reward_model"]["ground_truth"] == problem.ground_truth
        )
        assert compute_score(row["data_source"], problem.answer, row["reward_model"]["ground_truth"])["acc"]
    for column in ("toy_weak_pass_rate", "toy_strong_pass_rate"):
        values = np.array([r[column] for r in train])
        assert np.all((values >= 0) & (values <= 1)) and np.allclose(values * profile.reference_n % 1, 0)
    policy = json.loads((out / "models" / "policy" / "warmup.json").read_text())
    assert policy["spec"]["family"] == family
    assert "lower bound" in (out / "calibration.md").read_text()
    # beside each model's canonical lower bound, its sampled held-out estimate (bots_verl.toy.heldout)
    calibration = json.loads((out / "calibration.json").read_text())
    assert "| sampled acc |" in (out / "calibration.md").read_text()
    for name in ("policy", "weak", "strong"):
        sampled = calibration["heldout_sampled"][name]
        assert sampled["canonical"] == pytest.approx(calibration["heldout"][name]["accuracy"])
        assert sampled["estimate"] >= sampled["canonical"] and sampled["samples"] == SAMPLES[family]
    # resuming finds every stage done; the same directory as another family's or arithmetic's build is refused
    assert prepare(out, profile="ci", jobs=1, family=family)["stages"] == manifest["stages"]
    other = "logic" if family == "code" else "code"
    for wrong in (other, "arith"):
        with pytest.raises(PrepareError, match=f"holds a {family} build, not {wrong}"):
            prepare(out, profile="ci", jobs=1, family=wrong)


#: statuses the code reward sets only after the program ran in its sandbox
RAN = {"ok", "wrong_answer", "error", "compile_error", "timeout", "output_limit"}


def test_a_two_step_fit_is_scored_by_the_real_domain_reward(family_build, ray_attach) -> None:
    """One real 2-step GRPO fit per family (the toy benchmark's ``ci`` run of ``random``), with verl's rollout dump:
    every rollout's reward in the run is the domain reward's (the test scores each dumped response again through the
    public dispatcher, the code programs once more in the bubblewrap sandbox), and the responses exercise the
    reward's checks, not only its "no answer" branch: code programs that ran in the sandbox (their ``status``),
    answers the ordering checker parsed (``pred``). verl's dump carries no reward extra info on this path (its
    ``reward_extra_keys`` do not reach the trainer here), hence the rescoring."""
    from bots_verl import runlog
    from bots_verl.toy.arms import PROFILES, training_overrides
    from bots_verl.verl_cpu.smoke import run_training

    family, out = family_build
    fam = family_of(family)
    manifest = json.loads((out / "manifest.json").read_text())
    run_dir = out.parent / "runs" / "random_s0"
    run_dir.mkdir(parents=True)
    overrides = training_overrides(manifest, PROFILES["ci"], "random", 0, run_dir)
    assert f"data.max_prompt_length={fam.max_prompt_length}" in overrides
    mp = pytest.MonkeyPatch()
    try:
        for key, value in ray_attach().items():
            mp.setenv(key, value)
        run_training([*overrides, f"trainer.rollout_data_dir={run_dir / 'rollouts'}"], run_dir, run_dir / "log", 900)
    finally:
        mp.undo()
    assert sorted(step for step, _ in runlog.iter_metrics(run_dir / "run")) == [1, 2]
    rows = [json.loads(line) for step in (1, 2) for line in (run_dir / "rollouts" / f"{step}.jsonl").open()]
    assert len(rows) == 2 * PROFILES["ci"].prompts * PROFILES["ci"].n
    rescored = []
    for row in rows:
        problem = fam.parse_prompt(row["input"].removesuffix("="))
        assert row["gts"] == problem.ground_truth
        rescored.append(compute_score(fam.data_source, row["output"], row["gts"]))
        assert row["score"] == rescored[-1]["score"]
    if family == "code":
        assert {r["status"] for r in rescored} <= RAN | {"no_code"}
        assert any(r["status"] in RAN for r in rescored), "no rollout's program reached the sandbox"
    else:
        assert any(r["pred"] is not None for r in rescored), "no rollout's answer reached the ordering checker"
    _evaluate_fit(family, out, run_dir)


def _evaluate_fit(family: str, out: Path, run_dir: Path) -> None:
    """The fit's checkpoints evaluated as the benchmark does (bots_verl.toy.evaluate; two at a time in spawned
    processes: ``tests/toy/test_heldout.py``): the sampled held-out estimate per step, at least its canonical lower
    bound, and the same lines again, byte for byte, from a resumed evaluation."""
    from bots_verl import runlog
    from bots_verl.runlog import TOY_CANONICAL_PART, TOY_ESTIMATE_PART, TOY_ESTIMATE_SE_PART, toy_heldout_key
    from bots_verl.toy.evaluate import evaluate_checkpoints, heldout_metric

    fam, model = family_of(family), out / "models" / "policy"
    heldout = [fam.parse_prompt(r["prompt"][0]["content"]) for r in pq.read_table(out / "val.parquet").to_pylist()]
    logged = evaluate_checkpoints(run_dir / "run", run_dir / "ckpt", model, heldout)
    key = heldout_metric(model)
    assert sorted(logged) == [0, 1, 2] and key == toy_heldout_key(fam.data_source, TOY_ESTIMATE_PART)
    for figures in logged.values():
        assert figures[key] >= figures[toy_heldout_key(fam.data_source, TOY_CANONICAL_PART)]
        assert figures[toy_heldout_key(fam.data_source, TOY_ESTIMATE_SE_PART)] >= 0
    lines = (run_dir / "run" / runlog.METRICS_FILE).read_text().splitlines()
    # a resumed evaluation: the last two steps' lines lost, evaluated again
    (run_dir / "run" / runlog.METRICS_FILE).write_text("\n".join(lines[:-2]) + "\n")
    assert evaluate_checkpoints(run_dir / "run", run_dir / "ckpt", model, heldout) == logged
    assert (run_dir / "run" / runlog.METRICS_FILE).read_text().splitlines() == lines
