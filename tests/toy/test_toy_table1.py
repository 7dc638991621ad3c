"""Issue 60: the paper's Table 1 on the toy testbed. The arms ``bots_mopps`` and ``bots_dots`` run what the recipes'
labels mean (one definition, ``runlog.METHODS``); the ``table1`` profile of arithmetic reuses the archived runs of the
``full`` profile (only the two new arms are planned); a family's runs are reused only by a benchmark of that family;
``--no-train`` refuses while runs are missing, naming them, and ``--summarize-finished`` tabulates the finished ones.
No training: archived runs of seed 0 on a copy of the shipped build; a training process that starts fails the test."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.settings import resolve_settings
from bots_verl.toy import benchmark, table1
from bots_verl.toy.arms import PROFILES, TABLE1_PROFILES, VARIANTS, arm_settings, profile_of, training_overrides
from bots_verl.toy.run_records import check_recorded_settings, read_build

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "recipes" / "toy" / "results"
# where the full profile's archived runs of seed 0 are (recipes/toy/results/full/README.md)
ARCHIVED_S0 = {"ceiling/runs_s0-3": ("random", "bots"), "full/runs_offline_easy2hard_s0-7": ("offline_easy2hard",)}


def _recipe_argv():
    spec = importlib.util.spec_from_file_location("recipe_argv", ROOT / "tests" / "recipes" / "recipe_argv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _settings(argv: list[str]):
    (config,) = _recipe_argv().compose([argv])
    return resolve_settings(read_bots_config(config))


def _toy_argv(tmp_path: Path, arm: str) -> list[str]:
    """The arm's training overrides on a stand-in manifest (paths only: nothing is read)."""
    art = {
        "policy_models": {"0": str(tmp_path / "policy")},
        "train_files": str(tmp_path / "train.parquet"),
        "val_files": str(tmp_path / "val.parquet"),
        "reference_columns": ["toy_weak_pass_rate", "toy_strong_pass_rate"],
        "max_response_length": 12,
        "task_id_field": "task_id",
    }
    overrides = training_overrides({"artifacts": art}, PROFILES["table1"], arm, 0, tmp_path / "run")
    return [o for o in overrides if not o.startswith("hydra.")]


@pytest.mark.parametrize("label", ["bots_mopps", "bots_dots"])
def test_the_toy_arm_runs_what_the_recipe_of_its_label_runs(tmp_path: Path, label: str) -> None:
    """The recipe (run_math_qwen2.5_1.5b_<label>.sh, recorded by bash) and the toy arm of the same name, composed
    and resolved as the entry point does: one selector, every effective hyperparameter equal, the same label; and
    neither is the toy's older mopps / implicit_only arm, which keep their own meaning."""
    (recipe,) = (
        _recipe_argv()
        .record(ROOT / "recipes" / f"run_math_qwen2.5_1.5b_{label}.sh", tmp_path / "rec", Path("/nonexistent"))
        .values()
    )
    ours, theirs = _settings(_toy_argv(tmp_path, label)), _settings(recipe)
    assert ours.method == theirs.method == label
    assert ours.selector.name == theirs.selector.name == "bots"
    assert dict(ours.selector.effective) == dict(theirs.selector.effective)
    assert VARIANTS[label][0] == "bots"
    for older in ("mopps", "implicit_only"):
        assert arm_settings(older) == (older, ())
        assert _settings(_toy_argv(tmp_path, older)).selector.effective != ours.selector.effective


def test_table1_profiles_arith_is_the_full_profiles_settings() -> None:
    """Every setting a run records is the full profile's (what lets its archived runs count); only the arms, the name
    and the runs at a time differ. Code and logic are their own families."""
    arith, full = TABLE1_PROFILES["arith"], PROFILES["full"]
    assert dataclasses.replace(arith, name="full", selectors=full.selectors, jobs=full.jobs) == full
    assert arith.selectors == ("random", "offline_easy2hard", "bots_mopps", "bots_dots", "bots")
    assert [profile_of("table1", f).family for f in ("arith", "code", "logic")] == ["arith", "code", "logic"]
    # code's and logic's evaluations sample: every 6 steps, so they do not take as long as the training
    assert (profile_of("table1", "code").eval_every, profile_of("table1", "logic").eval_every) == (6, 6)


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<out>/arith``: the shipped build ``full_s0`` (copied) and the archived random, offline_easy2hard and bots runs
    of seed 0."""
    from bots_verl.toy.prepare import prepare

    root = tmp_path_factory.mktemp("table1") / "arith"
    prepare(root / "data", seed=0, profile="full", jobs=1)  # the shipped build, copied and checked: seconds
    for archive, arms in ARCHIVED_S0.items():
        with tarfile.open(RESULTS / f"{archive}.tar.gz") as tar:
            wanted = {f"runs/{arm}_s0" for arm in arms}
            members = [m for m in tar.getmembers() if "/".join(m.name.split("/")[:2]) in wanted]
            tar.extractall(root, members=members, filter="data")
    return root


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    started = subprocess.Popen

    def refuse(cmd: list[str], **kwargs: object) -> subprocess.Popen:
        assert "bots_verl.main" not in cmd, f"a training process was started: {cmd}"
        return started(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_the_plan_on_archived_arith_runs_trains_only_the_new_arms(archived: Path, capsys, no_training) -> None:
    """The dry run checks the build and the archived runs against table1's settings and plans only the two arms
    they lack (the full plan: 3 x 8 archived runs reused, bots_mopps and bots_dots x 8 to train)."""
    argv = ["--profile", "table1", "--family", "arith", "--seeds", "0", "--out", str(archived), "--dry-run"]
    assert benchmark.main(argv) == 0
    out = capsys.readouterr().out
    assert "finished, reused (3): random_s0 offline_easy2hard_s0 bots_s0\n" in out
    assert "to train (2): bots_mopps_s0 bots_dots_s0\n" in out
    assert "build and runs checked" in out


def test_a_familys_runs_are_reused_only_by_its_own_family(archived: Path) -> None:
    """The family is recorded (the build's manifest, each run's bots.run_log.domain) and compared on reuse."""
    manifest = json.loads((archived / "data" / "manifest.json").read_text())
    code = dataclasses.replace(TABLE1_PROFILES["arith"], family="code", seeds=(0,))
    with pytest.raises(ValueError, match="holds a build of the arith family; asked: --family code"):
        read_build(code, archived)
    with pytest.raises(ValueError, match="bots.run_log.domain: recorded toy, asked code"):
        check_recorded_settings(manifest, code, archived, [("random", 0)])


def test_no_train_refuses_naming_the_missing_runs(archived: Path, capsys, no_training) -> None:
    assert table1.main(["--out", str(archived.parent), "--families", "arith", "--no-train"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("toy table1 failed: --no-train, and runs are missing: arith (")
    missing = err.split(": 37 runs: ")[1].split(".")[0].split()
    assert len(missing) == 37 and {"bots_mopps_s0", "bots_dots_s0", "random_s1", "bots_s7"} <= set(missing)
    assert not {"random_s0", "offline_easy2hard_s0", "bots_s0"} & set(missing)
    assert not (archived.parent / "table1.md").exists()


def test_a_family_without_its_build_is_refused_before_any_family_trains(
    tmp_path: Path, capsys, no_training, monkeypatch
) -> None:
    """A family whose table1 profile names a build it does not have (code has no ``quick`` build): asked together
    with arith, nothing starts (not even arith's prepare), and the message names the family and its builds."""
    monkeypatch.setitem(TABLE1_PROFILES, "code", dataclasses.replace(TABLE1_PROFILES["code"], data_profile="quick"))
    assert table1.main(["--out", str(tmp_path), "--families", "arith", "code"]) == 1
    assert "--family code of --profile table1: the code family has no 'quick' build profile" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def five_methods_s0(archived: Path, tmp_path: Path) -> Path:
    """A copy of ``archived`` with seed 0's archived ``bots_mopps`` and ``bots_dots`` runs added: seed 0 of the five
    methods finished, 35 of the 40 planned runs still to train."""
    root = tmp_path / "arith"
    shutil.copytree(archived, root, symlinks=True)
    for archive in ("table1/arith/runs_bots_mopps_s0-5", "table1/arith/runs_bots_dots_s0-4"):
        with tarfile.open(RESULTS / f"{archive}.tar.gz") as tar:
            members = [m for m in tar.getmembers() if m.name.split("/")[1:2] in (["bots_mopps_s0"], ["bots_dots_s0"])]
            tar.extractall(root, members=members, filter="data")
    return root


def test_summarize_finished_tabulates_the_finished_runs_and_counts_the_rest(
    five_methods_s0: Path, capsys, no_training
) -> None:
    """A grid under way: the table holds the finished runs (seed 0 of the five methods, one seed each), its title
    counts them against the 40 planned, and the table is the one ``--no-train`` would render from them."""
    out = five_methods_s0.parent
    assert table1.main(["--out", str(out), "--families", "arith", "--summarize-finished"]) == 0
    text = (out / "table1.md").read_text()
    assert text.startswith(
        "# Table 1 on the toy testbed (arith as math): the finished runs only (arith 5 of 40 planned "
    )
    assert "seeds: Random 1, Offline (easy→hard) 1, BOTS-MoPPS 1, BOTS-DOTS 1, BOTS 1." in text
    assert table1.main(["--out", str(out), "--families", "arith", "--no-train"]) == 1  # 35 runs still missing
    with pytest.raises(SystemExit):
        table1.main(["--out", str(out), "--families", "arith", "--summarize-finished", "--no-train"])
    assert "--no-train and --summarize-finished: give one" in capsys.readouterr().err


def test_summarize_finished_refuses_a_family_without_a_finished_run(tmp_path: Path, capsys, no_training) -> None:
    assert table1.main(["--out", str(tmp_path), "--families", "logic", "--summarize-finished"]) == 1
    assert "toy table1 failed: no finished run of the logic family in" in capsys.readouterr().err
    assert not (tmp_path / "table1.md").exists()
