"""bots_verl.fileio: crash-safe writes, the stale-temporary rule, one writer per output, markdown tables."""

from __future__ import annotations

import json
import os

import pytest

from bots_verl import fileio


def test_json_is_published_whole_and_a_failed_write_leaves_the_old_content(tmp_path):
    out = tmp_path / "state.json"
    fileio.write_json_atomic(out, {"a": 1}, sort_keys=True)
    assert json.loads(out.read_text()) == {"a": 1}
    with pytest.raises(RuntimeError), fileio.publishing(out) as tmp:
        tmp.write_text("{torn")
        raise RuntimeError("killed mid-write")
    assert json.loads(out.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_directory_is_published_at_once(tmp_path):
    out = tmp_path / "model"
    with fileio.publishing(out) as tmp:
        tmp.mkdir()
        (tmp / "weights.bin").write_bytes(b"\0" * 8)
    assert (out / "weights.bin").read_bytes() == b"\0" * 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path):
    out = tmp_path / "table.parquet"
    dead = tmp_path / f".{out.name}{fileio.TEMP_MARK}{fileio.host_name()}-999999999"
    live = fileio.temp_path(out)
    other_host = tmp_path / f".{out.name}{fileio.TEMP_MARK}otherhost-1"
    for path in (dead, live, other_host):
        path.write_text("x")
    removed, kept = fileio.clean_stale_temps(out)
    assert removed == [str(dead)]
    assert sorted(kept) == sorted([str(live), str(other_host)])


def test_a_second_writer_is_refused_with_the_holder_named(tmp_path):
    out = tmp_path / "results.jsonl"
    with fileio.OutputLock(out, "collect a"):
        assert fileio.lock_holder(out)["pid"] == os.getpid()
        with pytest.raises(fileio.LockError, match=rf"pid {os.getpid()} on host .*\(collect a\)"):
            fileio.OutputLock(out, "collect b").acquire()
    assert fileio.lock_holder(out) is None
    assert not fileio.lock_path(out).exists()


def test_markdown_table():
    assert fileio.markdown_table(["a", "b"], [[1, "x"], ["", 2.5]]) == "| a | b |\n|---|---|\n| 1 | x |\n|  | 2.5 |"
    with pytest.raises(ValueError, match="a row of 1 cells under 2 titles"):
        fileio.markdown_table(["a", "b"], [[1]])
