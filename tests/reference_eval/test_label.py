"""Label only a subset (issue 36): ``label`` prints the subset and the generations it saves; ``collect
--label-fraction`` evaluates exactly that subset, and ``merge`` leaves every other row NaN."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reference_eval_fixtures import N_ROWS, N, NoGeneration, by_id, run

from reference_eval.cli import main
from reference_eval.label import choose_subset
from reference_eval.merge import merge


@pytest.fixture
def embeddings(dataset: Path, tmp_path: Path) -> Path:
    out = tmp_path / "emb.parquet"
    assert main(["embed", "--method", "text", "--data", str(dataset), "--out", str(out), "--dims", "16"]) == 0
    return out


def test_label_prints_the_saved_generations(dataset, embeddings, tmp_path, capsys):
    out = tmp_path / "subset.json"
    args = ["label", "--data", str(dataset), "--label-fraction", "0.25", "--embeddings", str(embeddings)]
    assert main([*args, "-n", "16", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    skipped = N_ROWS - N_ROWS // 4
    assert f"saves {skipped} x 16 x 2 = {skipped * 32:,} generations" in captured.err
    report = json.loads(captured.out)
    assert report["labelled"] == N_ROWS // 4 and report["saved_generations"] == skipped * 32
    assert report["method"] == "spread" and len(json.loads(out.read_text())["task_ids"]) == N_ROWS // 4


def test_same_inputs_same_subset_and_bad_budgets_refused(dataset, embeddings):
    ids = pq.read_table(dataset, columns=["task_id"]).column("task_id").to_pylist()
    a = choose_subset(ids, 0.3, "spread", seed=1, embeddings=embeddings)
    assert a.task_ids == choose_subset(ids, 0.3, "spread", seed=1, embeddings=embeddings).task_ids
    assert len(choose_subset(ids, 0.3, "uniform", seed=1).task_ids) == round(0.3 * N_ROWS)
    with pytest.raises(ValueError, match="must be in \\(0, 1\\].*bots_noref"):
        choose_subset(ids, 0.0, "uniform")
    with pytest.raises(ValueError, match="spread needs --embeddings"):
        choose_subset(ids, 0.5, "spread")


def test_a_label_fraction_of_zero_fails_before_any_generation(dataset, tmp_path, caplog):
    args = ["collect", "--data", str(dataset), "--model", "none", "--out", str(tmp_path / "r.jsonl")]
    assert main([*args, "--label-fraction", "0", "--label-by", "uniform"]) == 2
    assert "--label-fraction must be in (0, 1]" in caplog.text
    assert not (tmp_path / "r.jsonl").exists()


def test_collect_evaluates_only_the_subset_and_merge_leaves_the_rest_nan(dataset, embeddings, backend, tmp_path):
    ids = pq.read_table(dataset, columns=["task_id"]).column("task_id").to_pylist()
    plan = choose_subset(ids, 0.25, "spread", seed=0, embeddings=embeddings, samples=N, models=1)
    results = tmp_path / "r.jsonl"
    report = run(dataset, results, backend, label_plan=plan)
    assert set(by_id(results)) == set(plan.task_ids)
    assert report.samples == len(plan.task_ids) * N
    assert report.label_plan["saved_generations"] == (N_ROWS - len(plan.task_ids)) * N
    # the subset's values are those of a full collect: a prompt's samples are seeded by its task id alone
    full = tmp_path / "full.jsonl"
    run(dataset, full, backend)
    assert all(by_id(results)[t]["successes"] == by_id(full)[t]["successes"] for t in plan.task_ids)
    merged = tmp_path / "merged.parquet"
    merge(dataset, [results], "ref_sub", out=merged)
    column = pq.read_table(merged, columns=["ref_sub"]).column("ref_sub").to_numpy(zero_copy_only=False)
    assert int(np.isfinite(column).sum()) == len(plan.task_ids)
    # a plan for another pool is refused before any generation
    other = choose_subset(ids[:-1], 0.25, "uniform")
    with pytest.raises(ValueError, match="label plan covers"):
        run(dataset, tmp_path / "x.jsonl", NoGeneration(), label_plan=other)
