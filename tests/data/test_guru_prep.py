"""GURU -> verl conversion on miniature files with GURU's real per-file schemas."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bots_verl.data.guru import find_file, prepare, prepare_domain
from bots_verl.data.guru_fixture import build_guru_dir, write_bad_math_train
from bots_verl.data.guru_rows import PrepError
from bots_verl.rewards import compute_score

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def guru(tmp_path: Path) -> Path:
    return build_guru_dir(tmp_path / "guru")


def test_all_domains_convert(guru: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = prepare(guru, out)
    expected = {
        "math": {"train": 12, "val_math500": 5, "val_aime24": 16},
        "code": {"train": 12, "val_livecodebench": 3, "val_humaneval": 3},
        "logic": {"train": 18, "val_zebra": 3, "val_ordering": 3, "val_arcagi1": 3},
    }
    for domain, outputs in expected.items():
        assert {k: v["rows_out"] for k, v in report[domain]["outputs"].items()} == outputs
        assert json.loads((out / domain / "prep_report.json").read_text())["domain"] == domain
        train = pq.read_table(out / domain / "train.parquet")
        # One schema per domain, pass rates as top-level float columns, a dense int64 task id mirrored in extra_info.
        assert train.schema.field("task_id").type == "int64"
        assert str(train.schema.field("qwen2.5_7b_pass_rate").type) == "double"
        assert str(train.schema.field("reward_model").type) == "struct<style: string, ground_truth: string>"
        rows = train.to_pylist()
        assert [r["task_id"] for r in rows] == list(range(len(rows)))
        assert all(r["extra_info"]["index"] == r["task_id"] for r in rows)
        assert all(r["extra_info"]["original_index"] is not None for r in rows)
        # Only the needed columns survive (no GURU leftovers such as solution, llama8b_solve_rate, input_output).
        assert set(train.schema.names) == {
            "data_source",
            "prompt",
            "ability",
            "reward_model",
            "extra_info",
            "task_id",
            "qwen2.5_7b_pass_rate",
            "qwen3_30b_pass_rate",
        }
    # AIME repeats each problem 8x on purpose: duplicates counted, kept, not fatal.
    assert report["math"]["outputs"]["val_aime24"]["issues"] == {"duplicate_prompt": 14}
    # Evaluation files without pass rates come out without those columns.
    assert "qwen3_30b_pass_rate" not in pq.read_schema(out / "logic" / "val_zebra.parquet").names
    assert "qwen3_30b_pass_rate" in pq.read_schema(out / "math" / "val_math500.parquet").names


def test_converted_rows_score_with_the_rewards(guru: Path, tmp_path: Path) -> None:
    """The stored ground truths (JSON-encoded for structured logic answers) are what the reward functions expect."""
    prepare(guru, tmp_path / "out", domains=["logic", "code", "math"])
    answers = {
        "logic__zebra_puzzle_dataset": lambda gt: f"<answer>{gt}</answer>",
        "logic__ordering_puzzle_dataset": lambda gt: f"<answer>{gt}</answer>",
        "logic__graph_logical_dataset": lambda gt: f"<answer>{gt}</answer>",
        "simulation__arcagi1": lambda gt: f"<answer>{gt}</answer>",
        "simulation__arcagi2": lambda gt: f"<answer>{gt}</answer>",
        "simulation__barc": lambda gt: f"<answer>{gt}</answer>",
        "math__merged_deduped_dapo_or1_dataset": lambda gt: f"\\boxed{{{gt}}}",
        "codegen__leetcode2k": lambda gt: (
            "```python\nclass Solution:\n    def total(self, xs: List[int]) -> int:\n        return sum(xs)\n```"
        ),
    }
    for domain in ("logic", "math"):
        for row in pq.read_table(tmp_path / "out" / domain / "train.parquet").to_pylist():
            make = answers[row["data_source"]]
            gt = row["reward_model"]["ground_truth"]
            assert compute_score(row["data_source"], make(gt), gt, row["extra_info"])["acc"] is True, row
    code = pq.read_table(tmp_path / "out" / "code" / "train.parquet").to_pylist()
    leet = next(r for r in code if r["data_source"] == "codegen__leetcode2k")
    assert leet["extra_info"]["prefix"] == "from typing import *\n"  # needed: the solution uses List without import
    gt = leet["reward_model"]["ground_truth"]
    assert compute_score(leet["data_source"], answers["codegen__leetcode2k"](gt), gt, leet["extra_info"])["acc"]
    taco = next(r for r in code if r["data_source"] == "codegen__taco")
    program = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert compute_score("codegen__taco", program, taco["reward_model"]["ground_truth"], taco["extra_info"])["acc"]


def _bad_math(tmp_path: Path) -> Path:
    guru = build_guru_dir(tmp_path / "guru")
    write_bad_math_train(guru)
    return guru


def test_fatal_issues_block_and_are_counted(tmp_path: Path) -> None:
    guru = _bad_math(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(PrepError, match="fatal row issues") as err:
        prepare_domain(guru, out, "math", with_eval=False)
    assert "missing_pass_rate" in str(err.value)
    assert not (out / "math").exists()  # nothing half-written
    assert sorted(p.name for p in out.iterdir()) == ["math.prep_report.failed.json"]  # no hidden leftovers either
    failed = json.loads((out / "math.prep_report.failed.json").read_text())
    assert failed["written"] is False
    report = failed["outputs"]["train"]
    assert report["issues"] == {
        "missing_pass_rate": 2,
        "pass_rate_out_of_range": 1,
        "weak_gt_strong": 1,
        "duplicate_prompt": 1,
        "bad_ground_truth": 1,
    }
    assert report["blocking"] == {"missing_pass_rate": 2, "pass_rate_out_of_range": 1, "bad_ground_truth": 1}


def test_drop_flags_drop_and_report(tmp_path: Path) -> None:
    guru = _bad_math(tmp_path)
    out = tmp_path / "out"
    drop = {"missing_pass_rate", "pass_rate_out_of_range", "bad_ground_truth"}
    report = prepare_domain(guru, out, "math", drop=frozenset(drop), with_eval=False)["outputs"]["train"]
    assert (report["rows_in"], report["rows_out"], report["dropped"]) == (8, 4, 4)
    rows = pq.read_table(out / "math" / "train.parquet").to_pylist()
    # weak > strong and the duplicate are kept (warnings), NaN never becomes 0, ids stay dense after drops.
    assert [r["task_id"] for r in rows] == [0, 1, 2, 3]
    assert [r["extra_info"]["original_index"] for r in rows] == ["1000", "1003", "1004", "1005"]
    assert all(not math.isnan(r["qwen2.5_7b_pass_rate"]) for r in rows)
    both = prepare_domain(
        guru, out, "math", drop=frozenset(drop | {"weak_gt_strong", "duplicate_prompt"}), with_eval=False
    )["outputs"]["train"]
    assert (both["rows_out"], both["dropped"]) == (2, 6)


def test_input_errors_are_clear(tmp_path: Path, guru: Path) -> None:
    with pytest.raises(PrepError, match="no file named codegen__nope_<size>.parquet"):
        find_file(guru / "train", "codegen__nope")
    table = pq.read_table(guru / "train" / "math__combined_54.4k.parquet").drop_columns(["qwen3_30b_pass_rate"])
    pq.write_table(table, guru / "train" / "math__combined_54.4k.parquet")
    with pytest.raises(PrepError, match=r"missing columns \['qwen3_30b_pass_rate'\]"):
        prepare_domain(guru, tmp_path / "out", "math", with_eval=False)


def test_cli(guru: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "bots_verl.data.guru",
        "--guru-dir",
        str(guru),
        "--out-dir",
        str(out),
        "--domains",
        "logic",
        "--skip-eval",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "logic/train: 18 rows in, 18 kept, 0 dropped; issues none" in proc.stderr
    assert f"logic: wrote train.parquet (18 rows) and prep_report.json to {out / 'logic'}" in proc.stderr
    bad = subprocess.run([*cmd[:4], str(tmp_path / "missing"), *cmd[5:]], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and "is not a directory" in bad.stderr
