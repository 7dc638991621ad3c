"""GURU data prep under unreadable input, unwritable output, reruns and kills: a clear error naming the file, and a
domain's outputs appear all together or not at all, never mixed with an earlier run's.

The kill test runs the real prep in a subprocess and SIGKILLs it at the worst moment (between its two renames).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bots_verl.data.guru import prepare_domain
from bots_verl.data.guru_fixture import build_guru_dir, eval_math_file, math_file, ordering_file, write_bad_math_train
from bots_verl.data.guru_rows import PrepError

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MATH500 = Path("online_eval") / "math__math_500.parquet"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _hidden(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".")) if out.exists() else []


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    cmd = [sys.executable, "-m", "bots_verl.data.guru", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


@pytest.fixture()
def guru(tmp_path: Path) -> Path:
    return build_guru_dir(tmp_path / "guru")


def _damage(guru: Path, how: str) -> Path:
    """Damage one input file as named; returns the path the error must name."""
    if how == "directory":
        path = guru / "train" / "math__combined_54.4k.parquet"
        path.unlink()
        path.mkdir()
        return path
    path = guru / MATH500
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "garbage": b"PAR1 not really parquet", "truncated": data[: len(data) // 2]}[how])
    return path


@pytest.mark.parametrize("how", ["empty", "garbage", "truncated", "directory"])
def test_unreadable_inputs_name_the_file_and_write_nothing(guru, tmp_path, how):
    bad = _damage(guru, how)
    out = tmp_path / "out"
    with pytest.raises(PrepError, match=str(bad)):
        prepare_domain(guru, out, "math")
    # The train file converted fine before the eval file failed: still nothing of this domain may appear.
    assert not (out / "math").exists()
    assert _hidden(out) == []


def test_cli_reports_unreadable_input_and_unwritable_output_in_one_line(guru, tmp_path):
    bad = _damage(guru, "garbage")
    proc = _cli("--guru-dir", str(guru), "--out-dir", str(tmp_path / "out"), "--domains", "math")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert f"{bad}: not a readable parquet file" in error, proc.stderr

    not_a_dir = tmp_path / "a_file"
    not_a_dir.write_text("")
    proc = _cli("--guru-dir", str(guru), "--out-dir", str(not_a_dir / "out"), "--domains", "logic", "--skip-eval")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"cannot write in the output directory {not_a_dir / 'out'}" in proc.stderr, proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_output_directory(guru, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o500)
    try:
        with pytest.raises(PrepError, match=f"cannot write in the output directory {out}"):
            prepare_domain(guru, out, "logic", with_eval=False)
    finally:
        out.chmod(0o700)


def test_a_failed_rerun_leaves_the_previous_outputs_untouched(guru, tmp_path):
    out = tmp_path / "out"
    prepare_domain(guru, out, "math")
    before = _snapshot(out / "math")
    assert sorted(before) == ["prep_report.json", "train.parquet", "val_aime24.parquet", "val_math500.parquet"]

    # An eval file that fails after the new train file was converted.
    _damage(guru, "truncated")
    with pytest.raises(PrepError, match="not a readable parquet file"):
        prepare_domain(guru, out, "math")
    assert _snapshot(out / "math") == before

    # Fatal row issues: the report goes beside the folder, not into it.
    eval_math_file(guru / MATH500, 5, "math__math_500", with_rates=True)
    write_bad_math_train(guru)
    with pytest.raises(PrepError, match=r"nothing written \(.*math is unchanged\)"):
        prepare_domain(guru, out, "math")
    assert _snapshot(out / "math") == before
    assert json.loads((out / "math.prep_report.failed.json").read_text())["outputs"]["train"]["blocking"]
    assert _hidden(out) == []

    # Fixed input: published, and the stale failure report goes away.
    math_file(guru / "train" / "math__combined_54.4k.parquet", n=7)
    prepare_domain(guru, out, "math")
    assert pq.read_table(out / "math" / "train.parquet").num_rows == 7
    assert not (out / "math.prep_report.failed.json").exists()


def test_a_rerun_never_mixes_generations(guru, tmp_path):
    out = tmp_path / "out"
    prepare_domain(guru, out, "math")
    math_file(guru / "train" / "math__combined_54.4k.parquet", n=6)
    report = prepare_domain(guru, out, "math", with_eval=False)
    # The val_* files of the first run belong to the old generation: gone, not left beside the new train file.
    assert sorted(p.name for p in (out / "math").iterdir()) == ["prep_report.json", "train.parquet"]
    on_disk = json.loads((out / "math" / "prep_report.json").read_text())
    assert on_disk == json.loads(json.dumps(report))
    assert on_disk["outputs"]["train"]["rows_out"] == pq.read_table(out / "math" / "train.parquet").num_rows == 6


def test_files_the_prep_did_not_write_stop_it(guru, tmp_path):
    out = tmp_path / "out"
    prepare_domain(guru, out, "logic", with_eval=False)
    mine = out / "logic" / "train.refs.parquet"
    mine.write_bytes(b"user data")
    before = _snapshot(out / "logic")
    with pytest.raises(PrepError, match=r"holds files the prep did not write: \['train.refs.parquet'\]"):
        prepare_domain(guru, out, "logic", with_eval=False)
    assert _snapshot(out / "logic") == before


def test_a_kill_between_the_renames_is_repaired_by_the_next_run(guru, tmp_path):
    out = tmp_path / "out"
    prepare_domain(guru, out, "math")
    before = _snapshot(out / "math")
    math_file(guru / "train" / "math__combined_54.4k.parquet", n=5)
    code = f"""
        import os, signal
        from pathlib import Path
        from bots_verl.data.guru import prepare_domain

        real_rename = os.rename

        def rename(src, dst):
            # The old folder has just been moved aside; die before the new one is moved in.
            if Path(dst).name == "math" and ".tmp-" in str(src):
                os.kill(os.getpid(), signal.SIGKILL)
            real_rename(src, dst)

        os.rename = rename
        prepare_domain(Path({str(guru)!r}), Path({str(out)!r}), "math")
        """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "math").exists()
    assert [name.split("-")[0] for name in _hidden(out)] == [".math.old", ".math.tmp"]

    # The next run fails on its input, and yet the previous outputs are back, whole; no hidden folder remains.
    write_bad_math_train(guru)
    with pytest.raises(PrepError, match="fatal row issues"):
        prepare_domain(guru, out, "math")
    assert _snapshot(out / "math") == before
    assert _hidden(out) == []


def test_drop_duplicate_prompt_keeps_intended_eval_repeats(guru, tmp_path):
    prompts = [f"q{i}" for i in range(6)]
    prompts[3] = prompts[1]
    math_file(guru / "train" / "math__combined_54.4k.parquet", n=6, prompts=prompts)
    report = prepare_domain(guru, tmp_path / "out", "math", drop=frozenset({"duplicate_prompt"}))["outputs"]
    # Train: the repeated prompt is dropped as asked.
    assert (report["train"]["rows_out"], report["train"]["dropped"]) == (5, 1)
    # AIME24 is 2 problems x 8 here (30 x 8 in GURU): mean@8 needs every repeat; they are counted, not dropped.
    aime = report["val_aime24"]
    assert (aime["rows_out"], aime["dropped"], aime["issues"]) == (16, 0, {"duplicate_prompt": 14})
    assert pq.read_table(tmp_path / "out" / "math" / "val_aime24.parquet").num_rows == 16


def test_log_says_what_happened(guru, tmp_path):
    write_bad_math_train(guru)
    proc = _cli("--guru-dir", str(guru), "--out-dir", str(tmp_path / "out"), "--domains", "math", "--skip-eval")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("INFO ") and ": math/train: 8 rows in, fatal issues {" in lines[0], proc.stderr
    assert "kept" not in proc.stderr and "wrote" not in proc.stderr  # no claim of output that never appears
    assert lines[-1].startswith("ERROR ") and ": math: fatal row issues" in lines[-1]
    assert "nothing written" in lines[-1] and "Traceback" not in proc.stderr


def test_a_deeply_nested_ground_truth_is_a_bad_ground_truth_not_a_crash(guru, tmp_path):
    path = guru / "train" / "logic__ordering_puzzle_1.9k.parquet"
    rows = pq.read_table(ordering_file(path)).to_pylist()
    for i, row in enumerate(rows):  # JSON text, as re-runs and some GURU variants store it; row 1 nested 100k deep
        truth = row["reward_model"]["ground_truth"]
        row["reward_model"]["ground_truth"] = "[" * 100_000 if i == 1 else json.dumps(truth)
    pq.write_table(pa.Table.from_pylist(rows), path)
    report = prepare_domain(guru, tmp_path / "out", "logic", drop=frozenset({"bad_ground_truth"}), with_eval=False)
    files = report["outputs"]["train"]["files"]
    assert files[path.name] == {"rows": 3, "issues": {"bad_ground_truth": 1}}
