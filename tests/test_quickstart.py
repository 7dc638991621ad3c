"""``make quickstart``: its report on two real training runs (the session's toy benchmark runs: one pair of real fits
serves both), its two training commands on the shipped toy build (dry runs of ``bots_verl.main``), and the ``--out``
guard: a rerun replaces only the run folders a quickstart wrote (issue 47) and writes the testbed only into a data
folder it wrote, never building one (issue 59, item 5).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bots_verl import quickstart
from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.quickstart import MARKER, check_out_dir, main


@pytest.mark.slow
def test_the_report_of_two_real_runs_has_the_mixed_share_and_the_posterior(bench, capsys):
    """The report on real runs: the toy benchmark's ``ci`` runs of Random and BOTS (the session's ``bench``,
    ``tests/conftest.py``), trained as the quickstart's are (:func:`bots_verl.toy.arms.training_overrides`, then
    ``python -m bots_verl.main``), on a smaller build; the shipped build's own arguments are checked below."""
    from bots_verl.toy.arms import PROFILES

    root, _ = bench
    prof = PROFILES["ci"]
    runs = {arm: root / "runs" / f"{arm}_s0" for arm in ("random", "bots")}
    result = quickstart.summarise(runs, root / "data")
    printed = quickstart.report(result)
    assert "Share of mixed groups per step" in printed and "BOTS's posterior after the last step" in printed
    assert result["steps"] == prof.steps
    for arm in ("random", "bots"):
        shares = result["mixed"][arm]
        assert sorted(shares) == list(range(1, prof.steps + 1))  # trained steps only: not the benchmark's step 0
        assert all(0.0 <= v <= 1.0 for v in shares.values())
        assert f"{runs[arm] / 'run'}" in printed
    # the posterior by size, recomputed from BOTS's checkpoint and the build's files
    state = checkpoint_sampler_state(runs["bots"] / "ckpt" / f"global_step_{prof.steps}" / "data.pt")["selector_state"]
    alpha, beta = (np.asarray(state["extra"]["posterior"][k]) for k in ("alpha", "beta"))
    pool = pq.read_table(root / "data" / "train.parquet", columns=["task_id", "extra_info"]).to_pandas()
    exact = pq.read_table(root / "data" / "calibration.parquet").to_pandas().set_index("task_id")
    pool["digits"] = [max(info["digits_a"], info["digits_b"]) for info in pool["extra_info"]]
    pool["mean"], pool["selected"] = alpha / (alpha + beta), state["times_selected"]
    pool["exact"] = exact.loc[pool["task_id"], "policy_exact_pass_rate"].to_numpy()
    expected = [
        {
            "digits": digits,
            "tasks": len(group),
            "selected": group["selected"].sum(),
            "posterior_mean": pytest.approx(group["mean"].mean()),
            "exact_pass_rate": pytest.approx(group["exact"].mean()),
        }
        for digits, group in pool.groupby("digits")
    ]
    assert result["posterior"] == expected and len(expected) >= 2
    assert sum(row["selected"] for row in result["posterior"]) == prof.steps * prof.prompts
    json.dumps(result)  # what main() writes to quickstart.json


@pytest.mark.slow
def test_both_arms_on_the_shipped_build_pass_verls_and_bots_config_checks(tmp_path, monkeypatch):
    """The quickstart's own training commands, on the shipped testbed build, as ``bots_verl.main`` dry runs (every
    config check, no Ray): the arguments the real quickstart trains with (``make quickstart``)."""
    import subprocess
    import sys

    from bots_verl.verl_cpu import smoke

    out = tmp_path / "qs"
    manifest = quickstart.shipped_testbed(out / "data")  # copied, and every stage found done by the real prepare

    def dry_run(overrides, cwd, log, timeout):
        argv = [sys.executable, "-m", "bots_verl.main", *overrides, "bots.dry_run=true"]
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        log.write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, proc.stderr[-3000:]

    monkeypatch.setattr(smoke, "run_training", dry_run)
    runs = quickstart.train_arms(manifest, out, steps=12, timeout=300)
    assert sorted(runs) == ["bots", "random"]
    for arm, run_dir in runs.items():
        assert run_dir == out / arm
        log = (run_dir / "train.log").read_text()
        assert "BOTS dry run: config OK" in log, log[-2000:]
        assert (run_dir / MARKER).is_file()
    # the shipped build: the policy and the two reference columns BOTS reads
    assert manifest["artifacts"]["reference_columns"] and len(manifest["artifacts"]["policy_models"]) == 1


# ---------------------------------------------------------------------------------------------- the --out guard
@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stand-ins for the testbed build and the training runs (the guard is under test, not them); records calls."""
    from bots_verl.toy import arms, prepare
    from bots_verl.verl_cpu import smoke

    calls: list[str] = []
    monkeypatch.setattr(prepare, "prepare", lambda out, **kw: calls.append(f"prepare {out}") or {})
    monkeypatch.setattr(arms, "training_overrides", lambda *args: [])
    monkeypatch.setattr(smoke, "run_training", lambda overrides, cwd, log, timeout: calls.append(f"train {log}"))
    return calls


def _other_run(folder: Path) -> Path:
    """A folder some other job wrote: a checkpoint the quickstart must not delete."""
    checkpoint = folder / "ckpt" / "global_step_100" / "model.pt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"weights")
    return checkpoint


@pytest.mark.parametrize("arm", ["random", "bots"])
def test_an_out_holding_another_run_is_refused_and_nothing_is_deleted(
    arm: str, tmp_path: Path, capsys: pytest.CaptureFixture, no_training: list[str]
) -> None:
    out = tmp_path / "experiments"
    checkpoint = _other_run(out / arm)
    assert main(["--steps", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{out / arm} was not written by the quickstart" in err and "nothing deleted" in err
    assert checkpoint.read_bytes() == b"weights"
    assert no_training == [] and sorted(p.name for p in out.iterdir()) == [arm]  # nothing built, nothing written


@pytest.mark.parametrize("kind", ["file", "link"])
def test_an_arm_that_is_a_file_or_a_link_is_refused(kind: str, tmp_path: Path, no_training: list[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "elsewhere"
    checkpoint = _other_run(target)
    if kind == "file":
        (out / "bots").write_text("notes")
    else:
        (out / "bots").symlink_to(target, target_is_directory=True)
    with pytest.raises(ValueError, match=f"{out / 'bots'} is a {kind}, not a quickstart run folder"):
        quickstart.run_quickstart(out, steps=1)
    assert checkpoint.read_bytes() == b"weights" and no_training == []
    assert (out / "bots").is_symlink() if kind == "link" else (out / "bots").read_text() == "notes"


def test_a_quickstart_run_folder_is_marked_and_a_rerun_replaces_it(tmp_path: Path, no_training: list[str]) -> None:
    out = tmp_path / "qs"
    check_out_dir(out)  # absent: fine
    (out / "random").mkdir(parents=True)
    check_out_dir(out)  # empty: fine (nothing to lose)
    for arm in ("random", "bots"):
        run_dir = quickstart._train({}, arm, 1, out, 10.0)
        assert (run_dir / MARKER).is_file()
        (run_dir / "ckpt").mkdir()  # what the first run left
    check_out_dir(out)  # an earlier quickstart's runs: accepted
    run_dir = quickstart._train({}, "bots", 1, out, 10.0)
    assert (run_dir / MARKER).is_file() and not (run_dir / "ckpt").exists()  # replaced
    assert no_training == [f"train {out / arm / 'train.log'}" for arm in ("random", "bots", "bots")]


def test_the_readmes_sample_output_is_an_excerpt_of_the_recorded_run() -> None:
    """The README's quickstart output block is lines of recipes/toy/results/quickstart.md's recorded report, in their
    order (``...`` marks lines left out), so the sample on the first page has a run behind it (issue 59)."""
    repo = Path(__file__).resolve().parents[1]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quickstart and install") :]
    sample = section[section.index("```text\n") + len("```text\n") :]
    sample_lines = [line for line in sample[: sample.index("```")].splitlines() if line != "..."]
    recorded = (repo / "recipes" / "toy" / "results" / "quickstart.md").read_text(encoding="utf-8")
    report = recorded[recorded.index("```text\n") + len("```text\n") :].splitlines()
    assert len(sample_lines) >= 5
    position = 0
    for line in sample_lines:
        assert line in report[position:], f"README sample line not in the recorded report (in order): {line!r}"
        position = report.index(line, position) + 1


# ------------------------------------------------------------------------------- the testbed's data (issue 59, item 5)
def test_an_out_whose_data_holds_the_users_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, no_training: list[str]
) -> None:
    """The user's own ``DIR/data/val.parquet`` was overwritten, ``pool.parquet`` added and a build of hours started,
    while the quickstart said "the shipped toy testbed"."""
    out = tmp_path / "experiments"
    (out / "data").mkdir(parents=True)
    (out / "data" / "val.parquet").write_bytes(b"the user's held-out set")
    assert main(["--steps", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{out / 'data'} was not written by the quickstart (no {MARKER})" in err and "nothing deleted" in err
    assert sorted(p.name for p in (out / "data").iterdir()) == ["val.parquet"]
    assert (out / "data" / "val.parquet").read_bytes() == b"the user's held-out set"
    assert no_training == [] and sorted(p.name for p in out.iterdir()) == ["data"]


def test_without_the_shipped_testbed_nothing_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, no_training: list[str]
) -> None:
    from bots_verl.toy import prepare

    monkeypatch.setattr(prepare, "SHIPPED", tmp_path / "not_shipped")
    out = tmp_path / "qs"
    assert main(["--steps", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"the shipped toy testbed build {tmp_path / 'not_shipped' / 'full_s0'} is missing" in err
    assert "git checkout -- recipes/toy/artifacts/full_s0" in err
    assert no_training == [] and not (out / "data").exists()


def test_the_shipped_testbed_is_copied_once_and_never_completed_by_a_build(
    tmp_path: Path, no_training: list[str]
) -> None:
    from bots_verl.toy.prepare import shipped_artifacts

    shipped = shipped_artifacts("full", 0)
    assert shipped is not None
    data = tmp_path / "qs" / "data"
    quickstart.shipped_testbed(data)
    files = {str(p.relative_to(shipped)) for p in shipped.rglob("*") if p.is_file()}
    assert {str(p.relative_to(data)) for p in data.rglob("*") if p.is_file()} == files | {MARKER}
    assert [p.name for p in data.parent.iterdir()] == ["data"]  # no copy left beside it
    check_out_dir(data.parent)  # the quickstart's own: accepted by a rerun
    (data / "notes.txt").write_text("kept")
    quickstart.shipped_testbed(data)  # reused, not copied again
    assert (data / "notes.txt").read_text() == "kept"
    (data / "models" / "strong" / "model.safetensors").unlink()
    with pytest.raises(RuntimeError, match=r"lacks models/strong/model.safetensors of the shipped toy testbed"):
        quickstart.shipped_testbed(data)
    assert no_training == [f"prepare {data}"] * 2  # the incomplete copy never reached prepare's stages
