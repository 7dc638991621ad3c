"""The known-answer script and the tiny byte-level model: patterns, rewards, prompt matching, round trips, refusals."""

from __future__ import annotations

import copy
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from bots_verl.data.guru import prepare
from bots_verl.data.guru_fixture import build_guru_dir, code_solution
from bots_verl.verl_cpu.known_answers import (
    KnownAnswers,
    build_known_answers,
    check_script,
    expected_outcomes,
    known_answers_path,
    load_script,
    pattern_of,
    validate_script,
)
from bots_verl.verl_cpu.tiny_model import build_tiny_model


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("guru")
    prepare(build_guru_dir(root / "raw"), root / "data")
    return root / "data"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.mark.parametrize("domain", ["math", "code", "logic"])
def test_scripted_answers_score_as_scripted_with_the_training_reward(domain, data_dir):
    rows = pq.read_table(data_dir / domain / "train.parquet").to_pylist()
    script = build_known_answers(rows, solution_for=code_solution)
    check_script(script, rows)  # raises if a right answer does not score 1 or a wrong one does
    patterns = {pattern_of(t["task_id"]) for t in script["tasks"]}
    assert patterns == {"right", "mixed", "wrong"}
    expected = expected_outcomes(script, 4)
    for task in script["tasks"]:
        successes, attempts = expected[task["task_id"]]
        assert attempts == 4 and successes == {"right": 4, "mixed": 2, "wrong": 0}[pattern_of(task["task_id"])]


def test_math_answers_take_several_latex_forms(data_dir):
    rows = pq.read_table(data_dir / "math" / "train.parquet").to_pylist()
    script = build_known_answers(rows)
    rights = {t["responses"][0] for t in script["tasks"] if pattern_of(t["task_id"]) != "wrong"}
    assert any("\\frac" in r for r in rights) and any(".0}" in r for r in rights) and any("\\(" in r for r in rights)


def test_a_wrong_script_is_caught_before_training(data_dir):
    rows = pq.read_table(data_dir / "logic" / "train.parquet").to_pylist()
    script = build_known_answers(rows)
    script["tasks"][0]["correct"] = [not c for c in script["tasks"][0]["correct"]]
    with pytest.raises(ValueError, match="scores acc="):
        check_script(script, rows)


def test_code_tasks_need_a_solution_and_prompts_must_be_unique(data_dir):
    rows = pq.read_table(data_dir / "code" / "train.parquet").to_pylist()
    with pytest.raises(ValueError, match="solution_for"):
        build_known_answers(rows)
    with pytest.raises(ValueError, match="appears twice"):
        build_known_answers([rows[0], {**rows[0], "task_id": 99}], solution_for=code_solution)


def test_the_server_matches_the_rendered_prompt_and_cycles_the_responses(tokenizer):
    script = {
        "format": "bots-known-answers",
        "version": 1,
        "tasks": [
            {"task_id": 0, "prompt": "problem 1", "data_source": "x", "responses": ["a"], "correct": [True]},
            {"task_id": 1, "prompt": "problem 10", "data_source": "x", "responses": ["b", "c"], "correct": [1, 0]},
        ],
    }
    known = KnownAnswers(script, tokenizer)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "problem 10"}], add_generation_prompt=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    entry = known.match(ids)
    assert entry is not None and entry.prompt == "problem 10"  # the longer prompt, not its prefix "problem 1"
    texts = [tokenizer.decode(known.response_ids(entry, k, 100)) for k in range(3)]
    assert texts == ["b<|im_end|>", "c<|im_end|>", "b<|im_end|>"]
    assert len(known.response_ids(entry, 0, 1)) == 1  # cut at the response budget
    other = tokenizer.apply_chat_template([{"role": "user", "content": "unrelated"}], add_generation_prompt=True)
    assert known.match(other["input_ids"] if hasattr(other, "keys") else other) is None


def test_a_script_of_another_format_is_refused_naming_the_file(tmp_path, tokenizer):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "other", "tasks": []}))
    with pytest.raises(ValueError, match="bad.json"):
        KnownAnswers.load(path, tokenizer)
    assert known_answers_path(None) is None and known_answers_path({"known_answers": "f.json"}) == "f.json"


def test_the_tiny_tokenizer_reads_any_text_and_renders_chatml(tokenizer):
    text = "Find $\\frac{1}{2}$ — é 中文 ```python\nprint('x')\n``` \t"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    rendered = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
    assert tokenizer.decode(rendered) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.eos_token == "<|im_end|>"


def test_a_tiny_model_directory_built_with_other_settings_is_refused(tmp_path):
    build_tiny_model(tmp_path / "m", seed=1, hidden_size=32)
    build_tiny_model(tmp_path / "m", seed=1, hidden_size=32)  # the same settings: kept
    with pytest.raises(ValueError, match="built with"):
        build_tiny_model(tmp_path / "m", seed=2, hidden_size=32)


# ---------------------------------------------------------------------------------------------- malformed files
GOOD: dict[str, Any] = {
    "format": "bots-known-answers",
    "version": 1,
    "tasks": [
        {"task_id": 0, "prompt": "2 + 2 = ?", "data_source": "math", "responses": ["\\boxed{4}"], "correct": [True]},
        {"task_id": 7, "prompt": "3 + 3 = ?", "data_source": "math", "responses": ["6", "5"], "correct": [1, 0]},
    ],
}


def _broken(change) -> Any:
    script = copy.deepcopy(GOOD)
    return change(script) or script


def _set(index: int, key: str, value: Any):
    return lambda s: s["tasks"][index].__setitem__(key, value)


def _drop(index: int, key: str):
    return lambda s: s["tasks"][index].__delitem__(key)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # the four
        (_set(1, "responses", []), r"task 1 \(task_id 7\): responses must be a non-empty list of strings, got \[\]"),
        (_set(0, "prompt", ""), r"task 0 \(task_id 0\): prompt must be a non-empty string, got ''"),
        (_set(0, "responses", "\\boxed{4}"), r"task 0 \(task_id 0\): responses must be a non-empty list of strings"),
        (lambda s: s["tasks"], r"must be a JSON object .* got a list"),
        # their siblings
        (_set(0, "prompt", "  \n"), "prompt must be a non-empty string"),
        (_set(0, "prompt", 5), "prompt must be a non-empty string"),
        (_set(1, "responses", ["6", None]), r"task 1 \(task_id 7\): responses\[1\] must be a string"),
        (_set(1, "responses", {"a": 1}), "responses must be a non-empty list"),
        (_set(1, "correct", [True]), r"correct must be a list of 2 flags"),
        (_set(1, "correct", "10"), r"correct must be a list of 2 flags"),
        (_set(1, "correct", [2, 0]), "correct must hold true/false"),
        (_set(1, "correct", [0.5, 1]), "correct must hold true/false"),
        (_set(1, "task_id", "7"), "task_id must be an integer"),
        (_set(1, "task_id", True), "task_id must be an integer"),
        (_set(1, "task_id", 0), r"task 1 \(task_id 0\): its task_id repeats task 0's"),
        (_set(1, "prompt", "2 + 2 = ?"), r"task 1 \(task_id 7\): its prompt repeats task 0's"),
        (_set(1, "data_source", None), "data_source must be a non-empty string"),
        (_drop(0, "responses"), r"task 0 \(task_id 0\): missing keys \['responses'\]"),
        (_set(0, "response", ["x"]), r"unknown keys \['response'\]"),
        (lambda s: s["tasks"].__setitem__(1, ["a"]), "task 1: must be an object"),
        (lambda s: s.__setitem__("tasks", []), "tasks must be a non-empty list"),
        (lambda s: s.__setitem__("tasks", {"0": {}}), "tasks must be a non-empty list"),
        (lambda s: s.__delitem__("tasks"), "tasks must be a non-empty list"),
        (lambda s: s.__setitem__("version", 2), "not a bots-known-answers v1 script"),
        (lambda s: s.__setitem__("extra", 1), r"unknown keys \['extra'\]"),
        (lambda s: "just text", "must be a JSON object"),
        (lambda s: 4, "must be a JSON object"),
    ],
)
def test_a_malformed_script_is_refused_at_load_naming_the_file_and_the_task(tmp_path, tokenizer, change, message):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(_broken(change)))
    for load in (load_script, lambda p: KnownAnswers.load(p, tokenizer)):
        with pytest.raises(ValueError, match=message) as refused:
            load(path)
        assert str(refused.value).startswith(f"known-answers file {path}: ")


def test_unreadable_and_non_json_files_are_refused_naming_the_file(tmp_path):
    with pytest.raises(ValueError, match=f"known-answers file {tmp_path / 'absent.json'}: .*No such file"):
        load_script(tmp_path / "absent.json")
    (tmp_path / "cut.json").write_text('{"format": "bots-known-answers", "tasks": [')
    with pytest.raises(ValueError, match=f"known-answers file {tmp_path / 'cut.json'}: "):
        load_script(tmp_path / "cut.json")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="binary.json"):
        load_script(tmp_path / "binary.json")


@pytest.mark.parametrize("domain", ["math", "code", "logic"])
def test_a_well_formed_script_loads_as_written(tmp_path, data_dir, domain):
    assert validate_script(copy.deepcopy(GOOD)) == GOOD
    rows = pq.read_table(data_dir / domain / "train.parquet").to_pylist()
    script = build_known_answers(rows, solution_for=code_solution)
    path = tmp_path / "built.json"
    path.write_text(json.dumps(script))
    assert load_script(path) == script  # what build_known_answers writes passes its own check
