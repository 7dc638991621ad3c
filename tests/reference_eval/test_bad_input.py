"""reference_eval under malformed input and faults: every case is refused with a message naming the file, row or
line, nothing half-written is left behind, and "we don't know" never becomes a number.

Processes that must really die (SIGKILL) or really hold a lock run as subprocesses; everything else is in-process.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from reference_eval_fixtures import N, NoGeneration, by_id, make_rows, run, settings, write_rows

from bots_verl.fileio import LockError, OutputLock, host_name, lock_path
from bots_verl.rewards import compute_score
from reference_eval import DataError, ResultsError, merge
from reference_eval.merge import clean_leftovers
from reference_eval.results import MAX_RECORD_BYTES
from reference_eval.scoring import Scorer

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _python(code: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT, text=True, **kwargs)


class FlakyScorer:
    """The training reward, except that once generation has started it raises on every response of row 0 and on the
    first two responses of row 1 (as a broken sandbox or judge would); the empty-response checks before generation
    pass, as they would for a valid ground truth."""

    def __init__(self) -> None:
        self.armed = False
        self.row1_calls = 0

    def __call__(self, data_source, response, ground_truth, extra_info=None):
        if self.armed and extra_info["index"] == 0:
            raise RuntimeError("judge unreachable")
        if self.armed and extra_info["index"] == 1:
            self.row1_calls += 1
            if self.row1_calls <= 2:
                raise RuntimeError("judge unreachable")
        return compute_score(data_source, response, ground_truth, extra_info)


def test_unscored_responses_are_unknown_not_failures(backend, dataset, tmp_path):
    flaky = FlakyScorer()
    scorer = Scorer("tests:flaky", flaky)

    def start_generation():
        flaky.armed = True
        return backend

    results = tmp_path / "r.jsonl"
    report = run(
        dataset,
        results,
        start_generation,
        scorer=scorer,
        settings=settings(scorer=scorer.name),
        on_score_error="fail",
        limit=3,
        save_responses=True,
    )
    assert report.score_errors == N + 2
    records = by_id(results)
    assert (records[100]["score_errors"], records[100]["mean_score"]) == (N, None)  # null, not 0.0
    assert records[101]["score_errors"] == 2
    # Row 1's successes are what the reward says about its two scored responses (the last two).
    gt = make_rows()[1]["reward_model"]["ground_truth"]
    scored = records[101]["responses"][2:]
    assert records[101]["successes"] == sum(bool(compute_score("math", t, gt)["acc"]) for t in scored)

    rep = merge(dataset, [results], "ref", out=tmp_path / "m.parquet")
    assert (rep.unscored, rep.partly_unscored, rep.with_results) == (1, 1, 2)
    assert rep.missing == len(make_rows()) - 2  # 17 without a result + the unscored row
    assert rep.examples["unscored"] == [100]
    merged = pq.read_table(tmp_path / "m.parquet").select(["task_id", "ref"]).to_pylist()
    values = {row["task_id"]: row["ref"] for row in merged}
    assert math.isnan(values[100])
    assert values[101] == records[101]["successes"] / 2
    assert values[102] == records[102]["successes"] / N


def test_every_rows_ground_truth_is_checked_before_generation(tmp_path):
    rows = make_rows()
    rows[13]["reward_model"] = {"style": "rule", "ground_truth": ""}
    rows[14].update(data_source="logic__zebra_puzzle_dataset")
    rows[14]["reward_model"] = {"style": "rule", "ground_truth": json.dumps({"header": ["a"], "rows": [["1"]]})}
    rows[16].update(data_source="logic__zebra_puzzle_dataset")
    rows[16]["reward_model"] = {"style": "rule", "ground_truth": "{not json"}
    data = write_rows(rows, tmp_path / "bad.parquet")
    with pytest.raises(DataError) as err:
        run(data, tmp_path / "r.jsonl", NoGeneration(), on_score_error="fail")
    message = str(err.value)
    assert "rejects 2 of 20 rows" in message
    assert "row 13 (id 113)" in message and "row 16 (id 116)" in message and "row 14" not in message
    assert not (tmp_path / "r.jsonl").exists()


def test_second_writer_is_refused_and_a_killed_writers_lock_is_taken_over(backend, dataset, tmp_path):
    results = tmp_path / "r.jsonl"
    holder = _python(
        f"""
        import time
        from reference_eval_fixtures import run

        class Stuck:
            name = "stuck"

            def generate(self, *args, **kwargs):
                print("generating", flush=True)
                time.sleep(600)

        run({str(dataset)!r}, {str(results)!r}, Stuck())
        """,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == "generating"
        with pytest.raises(LockError) as err:
            run(dataset, results, NoGeneration())
        assert f"pid {holder.pid} on host {host_name()}, started " in str(err.value)
        assert "collect --data" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    assert holder.returncode == -signal.SIGKILL
    assert lock_path(results).exists()  # the killed writer could not clean up ...
    report = run(dataset, results, backend, limit=2)  # ... and its lock does not block the next run
    assert report.evaluated == 2
    assert not lock_path(results).exists()


def _record(task_id=1, **fields):
    rec = {"task_id": task_id, "successes": 1, "attempts": 4, "score_errors": 0, "settings_id": "abc"}
    return json.dumps({**rec, **fields})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_record(attempts=True, successes=0), "attempts must be a positive integer, got True"),
        (_record(successes=True), "successes must be a number"),
        (_record(attempts=0, successes=0), "attempts must be a positive integer"),
        (_record(score_errors=5), r"score_errors must be an integer in \[0, 4\]"),
        (_record(successes=4, score_errors=1), r"successes must be a number in \[0, 3\]"),
        ('{"task_id": 2, "successes": NaN, "attempts": 4, "settings_id": "abc"}', "successes must be a number"),
        (_record(task_id=True), "task_id must be an int or a non-empty string"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"task_id": ' + "[" * 100_000, "nested too deeply"),
    ],
    ids=["bool-attempts", "bool-successes", "zero-attempts", "errors>attempts", "successes>scored", "nan", "bool-id"]
    + ["deep-array", "deep-unclosed"],
)
def test_malformed_result_lines_name_file_and_line(dataset, tmp_path, line, message):
    results = tmp_path / "r.jsonl"
    results.write_text(_record(task_id=100) + "\n" + line + "\n")
    with pytest.raises(ResultsError, match=rf"{results}: line 2 .*{message}"):
        merge(dataset, [results], "ref", out=tmp_path / "m.parquet")
    assert not (tmp_path / "m.parquet").exists()


def test_a_huge_line_is_refused_without_reading_it_all(dataset, tmp_path):
    results = tmp_path / "r.jsonl"
    with open(results, "w") as f:
        f.write(_record(task_id=100) + "\n")
        f.write('{"pad": "' + "x" * MAX_RECORD_BYTES + '"}\n')
    with pytest.raises(ResultsError, match=rf"{results}: line 2 is longer than {MAX_RECORD_BYTES} bytes"):
        merge(dataset, [results], "ref", out=tmp_path / "m.parquet")


@pytest.mark.parametrize(
    "content", [b"", b"not a parquet file at all", "truncated"], ids=["empty", "garbage", "truncated"]
)
def test_unreadable_parquet_is_a_data_error(dataset, tmp_path, content):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(dataset.read_bytes()[: dataset.stat().st_size // 2] if content == "truncated" else content)
    with pytest.raises(DataError, match=rf"{bad}: not a readable parquet file"):
        run(bad, tmp_path / "r.jsonl", NoGeneration())
    with pytest.raises(DataError, match=rf"{tmp_path} is a directory"):
        run(tmp_path, tmp_path / "r.jsonl", NoGeneration())


def test_cli_errors_are_one_line_without_traceback(dataset, tmp_path):
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 but nothing else")
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    proc = _python(
        f"""
        import sys
        from reference_eval.cli import main

        common = ["--column", "c", "--out", {str(tmp_path / "m.parquet")!r}]
        codes = [
            main(["merge", "--data", {str(garbage)!r}, "--results", {str(deep)!r}, *common]),
            main(["merge", "--data", {str(dataset)!r}, "--results", {str(deep)!r}, *common]),
        ]
        sys.exit(10 * codes[0] + codes[1])
        """,
        stderr=subprocess.PIPE,
    )
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 22, stderr
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2, stderr
    assert f"{garbage}: not a readable parquet file" in errors[0]
    assert f"{deep}: line 1 is nested too deeply" in errors[1]


def test_an_interrupted_in_place_merge_is_cleaned_up_by_the_next(backend, dataset, tmp_path):
    results = tmp_path / "r.jsonl"
    run(dataset, results, backend, limit=3)
    original = dataset.read_bytes()
    # A real merge, killed (SIGKILL: no finally, no cleanup) at the moment it would rename the new file into place.
    killed = _python(
        f"""
        import os, signal
        from reference_eval import merge

        os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
        merge({str(dataset)!r}, [{str(results)!r}], "ref", in_place=True)
        """
    )
    killed.wait(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != dataset.name and p.suffix != ".jsonl")
    # The complete temp file and the backup, as the kill left them, and the lock file of the dead merge.
    assert [name.rsplit(".", 1)[-1].split("-")[0] for name in leftovers] == ["tmp", "bak", "lock"], leftovers
    assert dataset.read_bytes() == original  # the input itself was never touched

    report = merge(dataset, [results], "ref", in_place=True)
    assert sorted(Path(p).name for p in report.cleaned) == leftovers[:2] and report.leftovers == []
    remaining = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".jsonl")
    assert remaining == sorted([dataset.name, Path(report.backup).name])  # no hidden file, one backup
    assert Path(report.backup).read_bytes() == original
    assert "ref" in pq.read_table(dataset).column_names


def test_two_merges_into_one_file_cannot_interleave(backend, dataset, tmp_path):
    """Two in-place merges would each add their column to the same old table; the later rename would drop the other's
    column. The second is refused while the first holds the output."""
    results = tmp_path / "r.jsonl"
    run(dataset, results, backend, limit=2)
    with OutputLock(dataset, "merge --column a"):
        with pytest.raises(LockError, match=rf"pid {os.getpid()} on host {host_name()}.*merge --column a"):
            merge(dataset, [results], "b", in_place=True)
    assert "b" not in pq.read_table(dataset).column_names
    assert merge(dataset, [results], "b", in_place=True).with_results == 2


def test_temp_files_that_cannot_be_judged_are_reported_not_removed(dataset, tmp_path):
    other_host = tmp_path / f".{dataset.name}.tmp-otherhost-1"
    live = tmp_path / f".{dataset.name}.tmp-{host_name()}-{os.getpid()}"
    for path in (other_host, live):
        path.write_bytes(b"partial")
    removed, kept = clean_leftovers(dataset)
    assert removed == [] and sorted(kept) == sorted([str(other_host), str(live)])
    assert other_host.exists() and live.exists()


def test_a_reward_dict_without_score_is_a_scorer_error_not_zero():
    from reference_eval.data import Task

    task = Task(task_id=1, row=0, data_source="x", prompt=[], ground_truth="", extra_info=None, prompt_sha256="")
    with pytest.raises(ValueError, match="no 'score'"):
        Scorer("acc-only", lambda *a, **k: {"acc": True}).score(task, "")


def test_stats_with_a_column_given_twice_is_one_error_line(tmp_path):
    data = tmp_path / "refs.parquet"
    pq.write_table(pa.table({"w": [0.1, 0.5, 0.9], "s": [0.2, 0.6, 1.0]}), data)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "reference_eval", "stats", "--data", str(data), "--columns", "w", "s", "w"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR"), proc.stderr
    assert "column 'w' is given more than once" in lines[0]
