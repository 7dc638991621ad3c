"""reference_eval end to end on CPU with a tiny random model: collect → merge → stats, resume, and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from reference_eval_fixtures import N_ROWS, N, NoGeneration, by_id, make_rows, run, settings, write_rows

from reference_eval import DataError, ResultsError, compute_stats, merge, read_results
from reference_eval.cli import main


class FailAfter:
    """Wraps a backend and raises on the k-th generate call, like a crash mid-run."""

    name = "failing"

    def __init__(self, inner, calls_ok: int) -> None:
        self.inner, self.calls_ok, self.calls = inner, calls_ok, 0

    def generate(self, *args, **kwargs):
        self.calls += 1
        if self.calls > self.calls_ok:
            raise RuntimeError("injected crash")
        return self.inner.generate(*args, **kwargs)


@pytest.fixture(scope="module")
def reference_run(tiny_model, backend, tmp_path_factory):
    """One uninterrupted collect over the 20 rows, with responses saved; the baseline the other tests compare to."""
    d = tmp_path_factory.mktemp("reference_run")
    data = write_rows(make_rows(), d / "train.parquet")
    out = d / "results.jsonl"
    report = run(data, out, backend, save_responses=True)
    return data, out, report


def test_collect_then_merge_gives_k_over_n(reference_run, tmp_path):
    data, results, report = reference_run
    assert (report.evaluated, report.already_done, report.remaining, report.duplicate_prompts) == (N_ROWS, 0, 0, 1)
    records = by_id(results)
    assert sorted(records) == [100 + i for i in range(N_ROWS)]

    # The counts must be what the training reward says about the stored responses, recomputed independently here.
    from bots_verl.rewards import compute_score

    rows = {r["task_id"]: r for r in make_rows()}
    for tid, rec in records.items():
        assert rec["attempts"] == N and len(rec["responses"]) == N
        gt = rows[tid]["reward_model"]["ground_truth"]
        assert rec["successes"] == sum(bool(compute_score("math", t, gt)["acc"]) for t in rec["responses"])
        assert rec["model"] == "tiny" and rec["sampling"]["n"] == N

    out = tmp_path / "merged.parquet"
    rep = merge(data, [results], "tiny_pass_rate", out=out)
    assert (rep.rows, rep.with_results, rep.missing, rep.unknown_ids, rep.duplicate_prompt_rows) == (20, 20, 0, 0, 1)
    assert rep.attempts == [N]
    table = pq.read_table(out)
    original = pq.read_table(data)
    assert table.column_names == original.column_names + ["tiny_pass_rate"]
    assert table.drop(["tiny_pass_rate"]).equals(original)  # nested columns survive unchanged
    values = dict(zip(table.column("task_id").to_pylist(), table.column("tiny_pass_rate").to_pylist(), strict=True))
    for tid, v in values.items():
        assert v == records[tid]["successes"] / N
    # Sampling from the near-uniform tiny model hits the right \boxed{} sometimes: the column is not degenerate.
    assert len(set(values.values())) > 1
    meta = json.loads(table.schema.field("tiny_pass_rate").metadata[b"reference_eval"])
    assert meta["model"] == "tiny" and meta["sampling"]["n"] == N


def test_resume_after_limit_and_crash_equals_one_run(reference_run, backend, tmp_path):
    data, results, _ = reference_run
    expected = {tid: (r["successes"], r["responses"]) for tid, r in by_id(results).items()}

    # Interrupted by --limit, resumed with another batch size.
    out = tmp_path / "limited.jsonl"
    first = run(data, out, backend, limit=7, save_responses=True)
    assert (first.evaluated, first.remaining) == (7, 13)
    second = run(data, out, backend, batch_size=5, save_responses=True)
    assert (second.already_done, second.evaluated, second.remaining) == (7, 13, 0)
    assert {t: (r["successes"], r["responses"]) for t, r in by_id(out).items()} == expected

    # A crash in the second batch keeps exactly the first batch on disk; the rerun finishes the rest.
    out = tmp_path / "crashed.jsonl"
    with pytest.raises(RuntimeError, match="injected crash"):
        run(data, out, FailAfter(backend, calls_ok=1), save_responses=True)
    assert len(read_results(out)) == 8
    run(data, out, backend, save_responses=True)
    assert {t: (r["successes"], r["responses"]) for t, r in by_id(out).items()} == expected


def test_truncated_last_line_is_repaired_on_resume(reference_run, backend, tmp_path):
    data, results, _ = reference_run
    lines = results.read_text().splitlines(keepends=True)
    out = tmp_path / "torn.jsonl"
    # Three whole records plus half of the fourth, as a crash inside the write would leave.
    out.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    assert len(read_results(out)) == 3
    report = run(data, out, backend, save_responses=True)
    assert (report.already_done, report.evaluated) == (3, N_ROWS - 3)
    expected = {t: (r["successes"], r["responses"]) for t, r in by_id(results).items()}
    assert {t: (r["successes"], r["responses"]) for t, r in by_id(out).items()} == expected
    assert len(out.read_text().splitlines()) == N_ROWS  # no glued line left behind


def test_other_settings_are_refused_before_generation(reference_run, tmp_path):
    data, results, _ = reference_run
    out = tmp_path / "copy.jsonl"
    out.write_text(results.read_text())
    with pytest.raises(ResultsError, match="different settings"):
        run(data, out, NoGeneration(), settings=settings(temperature=0.7))
    with pytest.raises(ResultsError, match="different settings"):
        run(data, out, NoGeneration(), settings=settings(model="another"))
    # Same settings and nothing left to do: no backend is built at all.
    assert run(data, out, NoGeneration()).evaluated == 0


def test_missing_prompts_become_nan_and_are_counted(reference_run, backend, tmp_path):
    data, _, _ = reference_run
    partial = tmp_path / "partial.jsonl"
    run(data, partial, backend, limit=12)
    # A stray result for an id the parquet does not have is reported, not merged.
    stray = dict(read_results(partial)[0], task_id=9999)
    with open(partial, "a") as f:
        f.write(json.dumps(stray) + "\n")
    rep = merge(data, [partial], "ref", out=tmp_path / "m.parquet")
    assert (rep.with_results, rep.missing, rep.unknown_ids) == (12, 8, 1)
    assert rep.examples["unknown_ids"] == [9999]
    values = pq.read_table(tmp_path / "m.parquet").column("ref").to_pylist()
    assert sum(math.isnan(v) for v in values) == 8
    done = {r["task_id"] for r in read_results(partial)}
    for tid, v in zip(pq.read_table(data).column("task_id").to_pylist(), values, strict=True):
        assert math.isnan(v) == (tid not in done)


def test_merge_refuses_conflicts_and_overwrites(reference_run, tmp_path):
    data, results, _ = reference_run
    # Conflicting duplicate results for one id.
    bad = tmp_path / "conflict.jsonl"
    rec = read_results(results)[0]
    bad.write_text(results.read_text() + json.dumps(dict(rec, successes=(rec["successes"] + 1) % (N + 1))) + "\n")
    with pytest.raises(ResultsError, match="conflicting"):
        merge(data, [bad], "ref", out=tmp_path / "x.parquet")
    # An id that now points at another prompt.
    rows = make_rows()
    rows[0]["prompt"] = [{"role": "user", "content": "what is 2"}]
    moved = write_rows(rows, tmp_path / "moved.parquet")
    with pytest.raises(ResultsError, match="different prompt"):
        merge(moved, [results], "ref", out=tmp_path / "x.parquet")
    rep = merge(moved, [results], "ref", out=tmp_path / "x.parquet", skip_prompt_mismatch=True)
    assert (rep.prompt_mismatches, rep.missing) == (1, 1)
    # Never the input without --in-place; never an existing output without force; in-place keeps a backup.
    with pytest.raises(DataError, match="in-place"):
        merge(data, [results], "ref", out=data)
    with pytest.raises(DataError, match="exists"):
        merge(data, [results], "ref", out=tmp_path / "x.parquet")
    copy = write_rows(make_rows(), tmp_path / "inplace.parquet")
    rep = merge(copy, [results], "ref", in_place=True)
    assert Path(rep.backup).is_file() and "ref" not in pq.read_table(rep.backup).column_names
    assert "ref" in pq.read_table(copy).column_names
    with pytest.raises(DataError, match="already has a column"):
        merge(copy, [results], "ref", in_place=True)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda rows: [{k: v for k, v in r.items() if k != "prompt"} for r in rows], "'prompt' not found"),
        (lambda rows: [dict(r, data_source="no_such_source") for r in rows], "no_such_source"),
        (lambda rows: [dict(r, task_id=7) for r in rows], "not unique"),
        (lambda rows: [{k: v for k, v in r.items() if k != "task_id"} for r in rows], "extra_info.index"),
        (lambda rows: [dict(r, prompt="just a string") for r in rows], "list of chat messages"),
    ],
    ids=["no-prompt-column", "unknown-data-source", "duplicate-ids", "no-id-column", "prompt-not-messages"],
)
def test_malformed_input_fails_before_generation(tmp_path, mutate, message):
    data = write_rows(mutate(make_rows()), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=message):
        run(data, tmp_path / "r.jsonl", NoGeneration())
    assert not (tmp_path / "r.jsonl").exists()


def test_id_column_can_be_extra_info_index(reference_run, backend, tmp_path):
    rows = [{k: v for k, v in r.items() if k != "task_id"} for r in make_rows()]
    data = write_rows(rows, tmp_path / "noid.parquet")
    out = tmp_path / "r.jsonl"
    run(data, out, backend, id_column="extra_info.index", limit=3)
    assert sorted(by_id(out)) == [0, 1, 2]
    rep = merge(data, [out], "ref", out=tmp_path / "m.parquet", id_column="extra_info.index")
    assert (rep.with_results, rep.missing) == (3, 17)


def test_stats_writes_pngs_and_counts_weak_above_strong(tmp_path):
    weak = [0.0, 0.25, 0.5, 0.75, 1.0, float("nan"), 0.5, 0.0]
    strong = [0.25, 0.5, 0.25, 1.0, 1.0, 0.5, float("nan"), 1.0]
    rows = [dict(r, weak=w, strong=s) for r, w, s in zip(make_rows(8), weak, strong, strict=True)]
    data = write_rows(rows, tmp_path / "cols.parquet")
    result = compute_stats(data, ["weak", "strong"], tmp_path / "stats")
    (pair,) = result["pairs"]
    # Rows with both values: 6; weak > strong only at row 2; equal at row 4.
    assert (pair["rows_both"], pair["weak_gt_strong"], pair["equal"]) == (6, 1, 1)
    w = result["columns"]["weak"]
    assert (w["nan"], w["grid_n"]) == (1, 4)
    assert w["share_0"] == pytest.approx(2 / 7) and w["share_1"] == pytest.approx(1 / 7)
    assert result["pearson"]["weak"]["strong"] is not None
    for name in ("hist_weak.png", "hist_strong.png", "pair_weak__strong.png"):
        assert (tmp_path / "stats" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "stats" / "stats.json").read_text())["pairs"][0]["weak_gt_strong"] == 1


def test_cli_end_to_end(tiny_model, dataset, tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    common = ["--data", str(dataset), "--model", str(tiny_model), "--out", str(results), "--backend", "transformers"]
    common += ["-n", "2", "--max-tokens", "2", "--device", "cpu", "--no-progress", "--batch-size", "16"]
    assert main(["collect", *common, "--limit", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["evaluated"] == 5
    merged = tmp_path / "m.parquet"
    merge_args = ["--data", str(dataset), "--results", str(results), "--column", "c", "--out", str(merged)]
    assert main(["merge", *merge_args]) == 0
    assert json.loads(capsys.readouterr().out)["missing"] == N_ROWS - 5
    assert main(["stats", "--data", str(merged), "--columns", "c", "--out-dir", str(tmp_path / "s")]) == 0
    assert "c" in capsys.readouterr().out and (tmp_path / "s" / "hist_c.png").exists()
    # Bad input exits 2 with the reason, not a traceback.
    assert main(["collect", *common, "--id-column", "nope"]) == 2
    assert main(["collect", *common, "--temperature", "-1"]) == 2
    for sub in ("collect", "merge", "stats"):
        with pytest.raises(SystemExit) as exit_info:
            main([sub, "--help"])
        assert exit_info.value.code == 0
        assert "--data" in capsys.readouterr().out


def test_vllm_backend_imports_without_vllm():
    import importlib.util

    from reference_eval.backends import vllm as vllm_backend

    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(ImportError, match="pip install"):
            vllm_backend.VLLMBackend("unused")


@pytest.mark.gpu
def test_vllm_backend_matches_interface(tiny_model):
    pytest.importorskip("vllm")
    from reference_eval.backends import make_backend

    gen = make_backend("vllm", str(tiny_model), gpu_memory_utilization=0.2, max_model_len=128)
    prompts = [[{"role": "user", "content": "what is 1"}], [{"role": "user", "content": "what is 2"}]]
    out = gen.generate(prompts, n=3, temperature=1.0, max_tokens=4, seeds=[1, 2])
    assert [len(o) for o in out] == [3, 3]
    assert gen.generate(prompts, n=3, temperature=1.0, max_tokens=4, seeds=[1, 2]) == out  # seeded


def test_shards_partition_the_tasks_and_merge_back(reference_run, tmp_path):
    from reference_eval.collect import in_shard

    data, results, _ = reference_run
    ids = [100 + i for i in range(N_ROWS)]
    owners = [[s for s in range(3) if in_shard(t, 3, s)] for t in ids]
    assert all(len(o) == 1 for o in owners)  # every task in exactly one shard
    # Per-shard files (as data-parallel collect writes them) merge into the same column as one file.
    lines = results.read_text().splitlines(keepends=True)
    shard_files = []
    for s in range(3):
        path = tmp_path / f"shard{s}.jsonl"
        path.write_text("".join(ln for ln in lines if in_shard(json.loads(ln)["task_id"], 3, s)))
        shard_files.append(path)
    merge(data, [results], "ref", out=tmp_path / "one.parquet")
    rep = merge(data, shard_files, "ref", out=tmp_path / "sharded.parquet")
    assert rep.missing == 0
    assert pq.read_table(tmp_path / "one.parquet").equals(pq.read_table(tmp_path / "sharded.parquet"))
    # Files from other settings never form one column.
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(dict(json.loads(ln), settings_id="0" * 16)) + "\n" for ln in lines[:2]))
    with pytest.raises(ResultsError, match="different models or sampling settings"):
        merge(data, [shard_files[0], other], "ref", out=tmp_path / "mixed.parquet")


def test_success_is_judged_by_the_trainers_rule():
    """A plain-number reward is judged as the trainer's bots.success rule judges it (auto: score > 0)."""
    from bots_verl.rewards.success import SuccessRule
    from reference_eval.data import Task
    from reference_eval.scoring import Scorer

    task = Task(task_id=1, row=0, data_source="x", prompt=[], ground_truth="", extra_info=None, prompt_sha256="")
    half = Scorer("half", lambda *a, **k: 0.5)
    assert half.score(task, "") == (1.0, 0.5)
    assert Scorer("half", lambda *a, **k: 0.5, SuccessRule("score")).score(task, "") == (0.5, 0.5)
    assert Scorer("dapo", lambda *a, **k: -1.0).score(task, "") == (0.0, -1.0)
    assert Scorer("dict", lambda *a, **k: {"score": 1.0, "acc": False}).score(task, "") == (0.0, 1.0)
