"""Numbers that are not pass rates (issue 34): ``stats`` warns about values outside [0, 1] and leaves them out of its
statistics; ``merge`` refuses results whose ids never match the parquet's (string ids against integer ids)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reference_eval import ResultsError, merge
from reference_eval.cli import main
from reference_eval.stats import compute_stats


def test_stats_warns_about_values_that_are_not_pass_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "refs.parquet"
    pq.write_table(pa.table({"w": [0.1, math.inf, 0.5, 1.7], "s": [0.2, 0.6, 0.7, 1.0]}), data)
    result = compute_stats(data, ["w", "s"])
    w = result["columns"]["w"]
    assert w["out_of_range"] == 2 and w["max"] == 0.5 and w["mean"] == pytest.approx(0.3)  # not inf, not 1.7
    assert result["columns"]["s"]["out_of_range"] == 0
    (warning,) = result["warnings"]
    assert warning.startswith(
        f"{data}: column 'w' has 2 values that are not pass rates in [0, 1] (row 1: inf, row 3: 1.7"
    )
    assert result["pairs"][0]["rows_both"] == 2  # the pairs use the pass rates only
    assert main(["stats", "--data", str(data), "--columns", "w", "s"]) == 0
    out = capsys.readouterr().out
    assert f"WARNING: {data}: column 'w' has 2 values" in out and " inf" not in out.split("WARNING")[0]


def _results(path: Path, ids: list) -> Path:
    lines = [{"task_id": t, "successes": 1, "attempts": 4, "score_errors": 0, "settings_id": "abc"} for t in ids]
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    return path


def test_merge_refuses_string_ids_against_integer_ids(tmp_path: Path) -> None:
    data = tmp_path / "train.parquet"
    pq.write_table(pa.table({"task_id": [100, 101, 102]}), data)
    results = _results(tmp_path / "r.jsonl", ["100", "101", "102"])
    with pytest.raises(ResultsError) as refused:
        merge(data, [results], "ref", out=tmp_path / "m.parquet")
    message = str(refused.value)
    assert f"3 result task ids are strs where {data}'s id column 'task_id' holds ints" in message
    assert "['100', '101', '102'] against [100, 101, 102]" in message
    assert not (tmp_path / "m.parquet").exists()
    # the CLI: exit 2, not an all-NaN column with exit 0
    assert (
        main(
            [
                "merge",
                "--data",
                str(data),
                "--results",
                str(results),
                "--column",
                "ref",
                "--out",
                str(tmp_path / "m.parquet"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "m.parquet").exists()


def test_merge_refuses_results_that_match_no_row(tmp_path: Path) -> None:
    data = tmp_path / "train.parquet"
    pq.write_table(pa.table({"task_id": [100, 101, 102]}), data)
    with pytest.raises(ResultsError, match=r"none of the 2 results matches a row of .* the column would be all NaN"):
        merge(data, [_results(tmp_path / "r.jsonl", [7, 8])], "ref", out=tmp_path / "m.parquet")
    # some rows without a result stay allowed (NaN and counted)
    report = merge(data, [_results(tmp_path / "r2.jsonl", [100, 8])], "ref", out=tmp_path / "m.parquet")
    assert report.with_results == 1 and report.missing == 2 and report.unknown_ids == 1
