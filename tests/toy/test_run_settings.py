"""A benchmark folder's runs are reused, resumed and summarised only under the settings they were trained with
(issue 59, items 3, 4 and 8c). No training: the real archived runs of the second build (``full_s2``, Random and BOTS,
seeds 0 and 1, unpacked from ``recipes/toy/results/claims/full_s2``) on a copy of its shipped build; a training
process that starts fails the test. (An interrupted run: ``test_benchmark_errors.py``.)"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tarfile
from pathlib import Path

import pytest

from bots_verl.toy import benchmark
from bots_verl.toy.arms import PROFILES
from bots_verl.toy.run_records import run_dir_of

RESULTS = Path(__file__).resolve().parents[2] / "recipes" / "toy" / "results"
ARCHIVE = RESULTS / "claims" / "full_s2" / "runs_random_bots_s0-7.tar.gz"
# the archived runs' own settings: the claims profile on build 2, as its README reproduces them
B2 = ["--profile", "claims", "--build-seed", "2", "--selectors", "random", "bots", "--seeds", "0", "1"]


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A benchmark folder of build 2 holding its archived runs: Random and BOTS, seeds 0 and 1, 90 steps each."""
    from bots_verl.toy.prepare import prepare

    root = tmp_path_factory.mktemp("b2")
    prepare(root / "data", seed=2, profile="full", jobs=1)  # the shipped build, copied and checked: seconds
    with tarfile.open(ARCHIVE) as tar:
        runs = {f"runs/{arm}_s{seed}" for arm in ("random", "bots") for seed in (0, 1)}
        tar.extractall(
            root, members=[m for m in tar.getmembers() if "/".join(m.name.split("/")[:2]) in runs], filter="data"
        )
    return root


@pytest.fixture
def folder(archived: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of :func:`archived` for one test (its files hard-linked: a test that wrote one would fail, not leak)."""
    root = tmp_path / "b2"
    shutil.copytree(archived, root, copy_function=os.link)
    for path in root.rglob("*"):
        if path.is_file():
            path.chmod(0o444)

    analysis_only = subprocess.Popen

    def no_training(cmd: list[str], **kwargs: object) -> subprocess.Popen:
        assert "bots_verl.main" not in cmd, f"a training process was started: {cmd}"
        return analysis_only(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", no_training)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # main's SIGTERM handler would outlive the test
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in (root / "runs").rglob("*") if p.is_file()}


def test_the_archived_runs_are_reused_and_summarised_without_training(folder: Path, capsys) -> None:
    """The claims README's reproduction: the archived runs are found finished, nothing trains, nothing of theirs
    changes, and the summary names their build and settings. A summary makes the same check first, on the manifest
    as copied (it runs no prepare, so its paths still name the folder it was copied from)."""
    from bots_verl.toy.run_records import check_recorded_settings

    manifest = json.loads((folder / "data" / "manifest.json").read_text())
    profile = dataclasses.replace(PROFILES["claims"], build_seed=2, selectors=("random", "bots"), seeds=(0, 1))
    assert str(folder) not in manifest["artifacts"]["val_files"]
    check_recorded_settings(manifest, profile, folder, [(a, s) for s in profile.seeds for a in profile.selectors])
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(0o644)  # the benchmark writes its summary and tables beside the runs
    before = _files(folder)
    assert benchmark.main([*B2, "--out", str(folder)]) == 0
    assert "toy benchmark ok: 4 runs" in capsys.readouterr().out
    text = (folder / "summary.md").read_text()
    assert "Build `full_s2`" in text and "lr 0.0001" in text and "16 tasks x 8 rollouts" in text
    assert _files(folder) == before


def test_a_rerun_with_other_settings_is_refused_before_anything_trains(folder: Path, capsys) -> None:
    """Issue 59, item 3: the same --out with --lr 0.5 --n 2 reported "toy benchmark ok", trained nothing and labelled
    the old runs with the new settings."""
    before = _files(folder)
    assert benchmark.main([*B2, "--lr", "0.5", "--n", "2", "--out", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"toy benchmark failed: {run_dir_of(folder, 'random', 0)} holds a run of other settings than asked" in err
    assert "actor_rollout_ref.actor.optim.lr: recorded 0.0001, asked 0.5" in err
    assert "actor_rollout_ref.rollout.n: recorded 8, asked 2" in err
    assert "3 more planned runs differ too: bots_s0, random_s1, bots_s1" in err
    assert not (folder / "summary.md").exists() and _files(folder) == before


def test_a_summary_is_refused_under_another_build_or_settings(folder: Path, capsys) -> None:
    """Issue 59, item 4: summarising build 2's runs with --build-seed 0 --lr 0.5 --n 2 --prompts 3 wrote a summary of
    "Build `full_s0` ... lr 0.5" over summary.json."""
    other = ["--lr", "0.5", "--n", "2", "--prompts", "3", "--summarize-finished", "--out", str(folder)]
    assert benchmark.main([*B2, "--build-seed", "0", *other]) == 1  # the last --build-seed counts
    err = capsys.readouterr().err
    assert f"{folder / 'data'} holds the build full_s2; asked: full_s0 (--profile claims, --build-seed 0)" in err
    assert benchmark.main([*B2, *other]) == 1
    err = capsys.readouterr().err
    assert "actor_rollout_ref.actor.optim.lr: recorded 0.0001, asked 0.5" in err
    assert "data.train_batch_size: recorded 16, asked 3" in err
    assert benchmark.main([*B2, "--eval-every", "5", "--summarize-finished", "--out", str(folder)]) == 1
    assert "trainer.save_freq: recorded 3, asked 5" in capsys.readouterr().err
    assert not (folder / "summary.json").exists() and not (folder / "summary.md").exists()


def test_a_summary_goes_through_the_profile_checks(folder: Path, capsys) -> None:
    """Issue 59, items 4 and 8c: a retired arm and a repeated one are refused as for training, before the folder is
    read (a repeated arm failed late in analysis.tables; a retired one was summarised without a word)."""
    summarize = ["--profile", "claims", "--build-seed", "2", "--summarize-finished", "--out", str(folder)]
    assert benchmark.main([*summarize, "--selectors", "random", "bots", "bots"]) == 1
    assert "toy benchmark failed: --selectors names bots more than once: name each once" in capsys.readouterr().err
    assert benchmark.main([*summarize, "--selectors", "random", "bots", "--seeds", "1", "0", "1"]) == 1
    assert "--seeds names 1 more than once" in capsys.readouterr().err
    (folder / "runs" / "bots_plus_s0").mkdir()  # a retired arm's archived run (recipes/toy/results/full)
    shutil.copy(run_dir_of(folder, "bots", 0) / "done.json", folder / "runs" / "bots_plus_s0" / "done.json")
    assert benchmark.main([*summarize, "--selectors", "random", "bots_plus", "--seeds", "0"]) == 1
    err = capsys.readouterr().err
    assert "arm 'bots_plus': unknown selector 'bots_plus'" in err and "recipes/toy/results/RETIRED.md" in err
    assert not (folder / "summary.json").exists()
    # the same arms in training mode: refused before the data, the lock or a run folder is written
    out = folder.parent / "fresh"
    assert benchmark.main(["--profile", "ci", "--selectors", "random", "random", "--out", str(out)]) == 1
    assert "--selectors names random more than once" in capsys.readouterr().err and not out.exists()


def test_runs_of_another_build_are_refused_by_the_content_they_trained_on(folder: Path, capsys) -> None:
    """The runs' paths are the folder's own, so only their run logs' record of the files' content shows that they
    trained on other data (here: build 0's held-out set in place of build 2's)."""
    val = folder / "data" / "val.parquet"
    val.unlink()
    shutil.copy(RESULTS.parents[1] / "toy" / "artifacts" / "full_s0" / "val.parquet", val)
    assert benchmark.main([*B2, "--summarize-finished", "--out", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "data.val_files (by content): recorded sha256:282af82360aae431, asked sha256:" in err
