"""The code and logic families' held-out accuracy estimate (bots_verl.toy.heldout, through bots_verl.toy.evaluate):
unbiased where the pass probability is known, deterministic in (run seed, step), identical on resume, adversarial
programs scored as failures in the sandbox, and arithmetic's exact evaluation unchanged (an archived run's step 0)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from bots_verl import runlog
from bots_verl.rewards import compute_score
from bots_verl.runlog import (
    TOY_CANONICAL_PART,
    TOY_ESTIMATE_PART,
    TOY_ESTIMATE_SE_PART,
    TOY_EXACT_METRIC,
    TOY_GREEDY_METRIC,
    TOY_NONCANONICAL_PART,
    TOY_POOL_METRIC,
    toy_heldout_key,
    toy_pool_key,
)
from bots_verl.toy.evaluate import evaluate_checkpoints, heldout_metric
from bots_verl.toy.families import family_of
from bots_verl.toy.heldout import estimate_accuracy, score_responses
from bots_verl.toy.tokenizer import EOS, encode, vocab_of

ROOT = Path(__file__).resolve().parents[2]
LOGIC = family_of("logic")


class TableLM(torch.nn.Module):
    """A causal LM over a constructed distribution: for each prompt, a table of complete responses (token ids ending
    in ``</s>``) with their probabilities; the next-token distribution is the table's conditional given the response
    so far (off the table: ``</s>``). It takes the calls ``generate_batch`` and ``answer_stats`` make, so the
    estimator runs unchanged on it and the pass probability is known exactly: sum of p over the passing responses."""

    def __init__(self, table: dict[tuple[int, ...], list[tuple[list[int], float]]], vocab_size: int, eos: int):
        super().__init__()
        self.table, self.vocab_size, self.eos = table, vocab_size, eos
        self.memo: dict[tuple[int, ...], torch.Tensor] = {}

    def _logits(self, seq: list[int]) -> torch.Tensor:
        key = tuple(seq)
        if key not in self.memo:
            self.memo[key] = self._conditional(seq)
        return self.memo[key]

    def _conditional(self, seq: list[int]) -> torch.Tensor:
        prompt = max((k for k in self.table if tuple(seq[: len(k)]) == k), key=len, default=None)
        mass = torch.zeros(self.vocab_size, dtype=torch.float64)
        if prompt is None:
            mass[self.eos] = 1.0  # inside a prompt: never scored
        else:
            done = seq[len(prompt) :]
            for response, p in self.table[prompt]:
                if response[: len(done)] == done and len(response) > len(done):
                    mass[response[len(done)]] += p
            if mass.sum() == 0:
                mass[self.eos] = 1.0
        return torch.where(mass > 0, torch.log(mass), torch.tensor(-1e4, dtype=torch.float64)).float()

    def forward(self, input_ids, attention_mask=None, past_key_values=None, **_):  # noqa: D102
        rows, width = input_ids.shape
        if past_key_values is None:
            mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
            seqs: list[list[int]] = [[] for _ in range(rows)]
            logits = torch.zeros(rows, width, self.vocab_size)
            for r in range(rows):
                for t in range(width):
                    if mask[r, t]:
                        seqs[r].append(int(input_ids[r, t]))
                        logits[r, t] = self._logits(seqs[r])
        else:
            seqs = [seq + [int(input_ids[r, 0])] for r, seq in enumerate(past_key_values)]
            logits = torch.stack([self._logits(seq) for seq in seqs]).unsqueeze(1)
        return type("Out", (), {"logits": logits, "past_key_values": seqs})()


def _logic_table(problems: list, seed: int) -> tuple[TableLM, np.ndarray, np.ndarray]:
    """A TableLM over four responses per logic problem (the canonical answer, two other spellings the reward
    accepts, a wrong order), random probabilities; with each problem's exact pass and canonical probability."""
    vocab = vocab_of("logic")
    rng = np.random.default_rng(seed)
    table, truth, canonical = {}, [], []
    for problem in problems:
        order = json.loads(problem.ground_truth)
        wrong = "<answer>[" + ",".join(f"'{x}'" for x in order[::-1]) + "]</answer>"
        texts = [problem.answer, problem.answer.replace("]", ",]"), "1" + problem.answer, wrong]
        p = rng.dirichlet(np.ones(len(texts)))
        ids, n_prompt = encode(problem.prompt, None, vocab)
        table[tuple(ids)] = [(encode("", t, vocab)[0][2:], float(q)) for t, q in zip(texts, p, strict=True)]
        passes = [compute_score(LOGIC.data_source, t, problem.ground_truth)["acc"] for t in texts]
        assert passes == [True, True, True, False], passes  # the reward accepts what the design says it does
        truth.append(float(p @ np.array(passes, dtype=float)))
        canonical.append(float(p[0]))
    return TableLM(table, len(vocab), vocab[EOS]), np.array(truth), np.array(canonical)


def _logic_problems(n: int, seed: int = 0) -> list:
    """``n`` distinct logic problems of 3-4 objects (a table holds one response distribution per prompt)."""
    rng = np.random.default_rng(seed)
    cells = [c for c in LOGIC.cells if c.objects <= 4]
    found: dict[str, object] = {}
    while len(found) < n:
        problem = cells[len(found) % len(cells)].sample(rng)
        found.setdefault(problem.prompt, problem)
    return list(found.values())


def test_the_estimate_is_unbiased_with_the_standard_error_it_reports() -> None:
    """Over 30 evaluations (steps) of a model whose accuracy is known exactly, the estimates average to it within
    their standard error; the SE they report is the theoretical one, sqrt(sum q(1 - q) / k) / N over the known
    non-canonical passing masses q, and matches their spread; the canonical part is the exact likelihood."""
    torch.set_num_threads(1)
    problems = _logic_problems(24)
    model, p_pass, p_canonical = _logic_table(problems, seed=1)
    truth, canonical = float(p_pass.mean()), float(p_canonical.mean())
    found = [estimate_accuracy(model, problems, "logic", max_tokens=48, run_seed=0, step=step) for step in range(30)]
    estimates = np.array([f.estimate for f in found])
    se = float(np.mean([f.se for f in found]))
    q = p_pass - p_canonical
    theory = math.sqrt(float(np.sum(q * (1 - q))) / found[0].samples) / len(problems)
    assert all(f.canonical == pytest.approx(canonical, abs=1e-6) for f in found)
    assert truth - canonical > 0.2  # the non-canonical passing mass is what is sampled
    assert abs(estimates.mean() - truth) < 4 * theory / math.sqrt(len(found)), (estimates.mean(), truth, theory)
    assert se == pytest.approx(theory, rel=0.15)
    assert 0.6 < estimates.std(ddof=1) / theory < 1.5, (estimates.std(ddof=1), theory)


def test_same_seed_same_estimate_and_another_step_or_seed_other_samples() -> None:
    torch.set_num_threads(1)
    problems = _logic_problems(16, seed=2)
    model, _, _ = _logic_table(problems, seed=3)
    runs = {
        (seed, step): estimate_accuracy(model, problems, "logic", max_tokens=48, run_seed=seed, step=step)
        for seed, step in ((0, 3), (0, 3), (0, 6), (1, 3))
    }
    first = estimate_accuracy(model, problems, "logic", max_tokens=48, run_seed=0, step=3)
    assert runs[(0, 3)] == first
    assert len({runs[k].noncanonical for k in ((0, 3), (0, 6), (1, 3))}) > 1
    with pytest.raises(ValueError, match="exact"):
        estimate_accuracy(model, problems, "arith", max_tokens=8, run_seed=0, step=0)


def test_adversarial_programs_are_scored_as_failures_in_the_sandbox() -> None:
    """The scorer the estimator calls runs code in the code reward's sandbox: a program that floods its output, one
    that prints the expected outputs but returns wrong ones, one that exits the interpreter, one that reads a file,
    one that recurses without end all fail, in bounded time (a hanging one: the next test, through the estimator)."""
    problem = family_of("code").cells[2].sample(np.random.default_rng(0))
    outputs = json.loads(problem.ground_truth)["outputs"]
    hostile = [
        "f=lambda x:[print('x'*10**6) for _ in range(20)] and x",
        f"f=lambda x:print({outputs!r}) or 0",
        "import os\nos._exit(0)\nf=lambda x:x",
        "f=lambda x:open('/etc/passwd').read() and x",
        "f=lambda x:f(x)",
    ]
    start = time.monotonic()
    results = score_responses("codegen__toy", [(f"```\n{p}\n```", problem.ground_truth) for p in hostile])
    assert results == [False] * len(hostile)
    assert time.monotonic() - start < 60
    assert score_responses("codegen__toy", [(problem.answer.replace("x", "y"), problem.ground_truth)]) == [True]


def test_a_hanging_sample_through_the_estimator_is_a_failure() -> None:
    """The whole path: a code model whose only non-canonical response never finishes (a power tower, in the family's
    alphabet); it runs once, in the sandbox, until its time limit, and fails: the estimate is the canonical part."""
    torch.set_num_threads(1)
    vocab = vocab_of("code")
    problem = family_of("code").cells[2].sample(np.random.default_rng(1))
    ids, _ = encode(problem.prompt, None, vocab)
    hang = "```\nf=lambda x:9**9**9**9\n```"
    table = {tuple(ids): [(encode("", problem.answer, vocab)[0][2:], 0.25), (encode("", hang, vocab)[0][2:], 0.75)]}
    found = estimate_accuracy(TableLM(table, len(vocab), vocab[EOS]), [problem], "code", max_tokens=40, run_seed=0,
                              step=0)  # fmt: skip
    assert found.noncanonical == 0.0 and found.canonical == pytest.approx(0.25, abs=1e-6)
    assert found.scored == 1  # the same program, sampled up to 4 times, ran once


def _policy_with_two_spellings(model_dir: Path, problems: list) -> None:
    """A tiny real Llama that writes each logic answer canonically or with a trailing comma (about half each)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from bots_verl.toy.likelihood import pad_batch
    from bots_verl.toy.tokenizer import build_tokenizer

    vocab = vocab_of("logic")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=96, tie_word_embeddings=True)  # fmt: skip
    model = LlamaForCausalLM(config)
    # lr 3e-3 for 300 steps, not 1e-2 for 150: at 1e-2 the fit depends on the CPU's float kernels (on an AVX-512
    # machine it stalled at loss 0.12 and wrote neither spelling); this one ends near the split's floor on both.
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    class Row:
        def __init__(self, prompt: str, answer: str) -> None:
            self.prompt, self.answer = prompt, answer

    rows = [Row(p.prompt, p.answer) for p in problems] + [Row(p.prompt, p.answer.replace("]", ",]")) for p in problems]
    for _ in range(300):
        input_ids, mask, labels = pad_batch(rows, vocab)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(str(model_dir))
    build_tokenizer(model_dir, "logic")
    (model_dir / "warmup.json").write_text(json.dumps({"spec": {"family": "logic"}}))


@pytest.fixture(scope="module")
def logic_build(tmp_path_factory) -> tuple[list, Path]:
    """``(12 logic problems, policy model)`` of a build folder with its manifest (the response budget)."""
    problems = _logic_problems(12, seed=4)
    build = tmp_path_factory.mktemp("logic") / "build"
    model_dir = build / "models" / "policy"
    _policy_with_two_spellings(model_dir, problems)
    (build / "manifest.json").write_text(json.dumps({"family": "logic", "artifacts": {"max_response_length": 48}}))
    return problems, model_dir


def _save_checkpoint(model_dir: Path, step_dir: Path) -> None:
    from bots_verl.toy.likelihood import load_model

    (step_dir / "actor").mkdir(parents=True)
    torch.save(load_model(model_dir).state_dict(), step_dir / "actor" / "model_world_size_1_rank_0.pt")


def _run_dir(path: Path, seed: int | None) -> Path:
    path.mkdir()
    runlog.write_meta(path, run_id=path.name, source="verl", seed=seed)
    return path


def test_evaluate_logs_the_estimate_and_a_resumed_evaluation_is_identical(tmp_path, logic_build) -> None:
    """evaluate_checkpoints on a logic run: the family from the model's warm-up record, the budget from the build's
    manifest, the seed from the run's meta.json; the logged figures; a resumed evaluation (its last line lost)
    writes the identical line; another run seed samples other responses."""
    problems, model_dir = logic_build
    _save_checkpoint(model_dir, tmp_path / "ckpt" / "global_step_2")

    def run(name: str, seed: int) -> Path:
        return _run_dir(tmp_path / name, seed)

    first = run("a", 0)
    logged = evaluate_checkpoints(first, tmp_path / "ckpt", model_dir, problems, problems[:5])
    source = LOGIC.data_source
    key = heldout_metric(model_dir)
    assert key == toy_heldout_key(source, TOY_ESTIMATE_PART)
    parts = [toy_heldout_key(source, p) for p in (TOY_CANONICAL_PART, TOY_NONCANONICAL_PART, TOY_ESTIMATE_SE_PART)]
    assert sorted(logged) == [0, 2]
    for figures in logged.values():
        assert set(figures) == {key, *parts, toy_pool_key(source, TOY_CANONICAL_PART)}
        assert figures[key] == pytest.approx(figures[parts[0]] + figures[parts[1]])
        assert 0.1 < figures[parts[1]] and 0 < figures[parts[2]] < 0.2  # the comma spelling is sampled and passes
    lines = (first / runlog.METRICS_FILE).read_text().splitlines()
    resumed = run("b", 0)
    (resumed / runlog.METRICS_FILE).write_text(lines[0] + "\n")
    assert evaluate_checkpoints(resumed, tmp_path / "ckpt", model_dir, problems, problems[:5]) == logged
    assert (resumed / runlog.METRICS_FILE).read_text().splitlines() == lines
    other = evaluate_checkpoints(run("c", 1), tmp_path / "ckpt", model_dir, problems, problems[:5])
    assert other[2][parts[0]] == logged[2][parts[0]] and other[2][parts[1]] != logged[2][parts[1]]
    no_seed = _run_dir(tmp_path / "d", None)
    with pytest.raises(ValueError, match="seed is None, not an integer"):
        evaluate_checkpoints(no_seed, tmp_path / "ckpt", model_dir, problems)
    shutil.rmtree(tmp_path / "ckpt")


def test_a_step_failing_in_a_worker_process_keeps_the_lines_before_it(tmp_path, logic_build) -> None:
    """Two checkpoints at a time in spawned processes: a broken checkpoint (step 4, no actor shard) stops the
    evaluation with its error, the steps before it are logged in order, and once it is repaired a rerun evaluates
    only that step: every line as a one-process evaluation writes it."""
    problems, model_dir = logic_build
    ckpt = tmp_path / "ckpt"
    _save_checkpoint(model_dir, ckpt / "global_step_2")
    (ckpt / "global_step_4" / "actor").mkdir(parents=True)
    run = _run_dir(tmp_path / "parallel", 3)
    with pytest.raises(ValueError, match="expected one single-rank actor shard"):
        evaluate_checkpoints(run, ckpt, model_dir, problems, jobs=2)
    assert [json.loads(line)["step"] for line in (run / runlog.METRICS_FILE).read_text().splitlines()] == [0, 2]
    shutil.rmtree(ckpt / "global_step_4")
    _save_checkpoint(model_dir, ckpt / "global_step_4")
    parallel = evaluate_checkpoints(run, ckpt, model_dir, problems, jobs=2)
    serial_run = _run_dir(tmp_path / "serial", 3)
    assert evaluate_checkpoints(serial_run, ckpt, model_dir, problems) == parallel and sorted(parallel) == [0, 2, 4]
    assert (run / runlog.METRICS_FILE).read_text() == (serial_run / runlog.METRICS_FILE).read_text()


def test_arithmetic_evaluation_reproduces_an_archived_run_exactly(tmp_path) -> None:
    """Arithmetic keeps its exact path and keys: the shipped full build's policy evaluates (step 0, no run seed or
    build budget read) to the accuracies the archived full benchmark's runs logged at step 0 (to 1e-6: the CPU's)."""
    from bots_verl.toy.tasks import parse_prompt

    build = ROOT / "recipes" / "toy" / "artifacts" / "full_s0"
    archived = json.loads((ROOT / "recipes" / "toy" / "results" / "full" / "summary.json").read_text())["runs"][0]

    def problems(name: str) -> list:
        return [parse_prompt(m[0]["content"]) for m in pq.read_table(build / name).column("prompt").to_pylist()]

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    logged = evaluate_checkpoints(
        run_dir, tmp_path / "no_ckpt", build / "models" / "policy", problems("val.parquet"), problems("train.parquet")
    )
    assert heldout_metric(build / "models" / "policy") == TOY_EXACT_METRIC
    line = json.loads((run_dir / runlog.METRICS_FILE).read_text())
    assert line["step"] == 0 and list(line["data"]) == [TOY_EXACT_METRIC, TOY_GREEDY_METRIC, TOY_POOL_METRIC]
    # 1e-6, not bit-exact: another CPU's float32 kernels move these means in the 8th digit (an AVX-512 machine:
    # 0.1211446438 against the archive's 0.1211446341); another path or key would miss by far more
    assert logged[0][TOY_EXACT_METRIC] == pytest.approx(archived["accuracy"]["0"], abs=1e-6)
    assert logged[0][TOY_POOL_METRIC] == pytest.approx(archived["pool_accuracy"]["0"], abs=1e-6)


@pytest.mark.parametrize("build", ["full_s0", "full_s2"])
def test_arithmetic_calibration_report_is_unchanged(build: str) -> None:
    """The calibration's markdown for an arithmetic build is byte for byte the shipped one (no sampled columns)."""
    from bots_verl.toy.build_stages import format_calibration

    folder = ROOT / "recipes" / "toy" / "artifacts" / build
    summary = json.loads((folder / "calibration.json").read_text(encoding="utf-8"))
    assert format_calibration(summary) == (folder / "calibration.md").read_text(encoding="utf-8")
