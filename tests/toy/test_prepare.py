"""``python -m bots_verl.toy.prepare --profile ci`` end to end: the parquet layout the trainer reads, the reference
columns from reference_eval, verl's dataset over our tokenizer, the trainer's config checks, and resuming. The build is
the session's (``ci_data`` in ``conftest.py``: the command line with two jobs, seed 0), read-only here: the tests that
change a build change a copy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bots_verl.integration.evidence.task_index import TaskIndex, check_parquet_columns, read_reference_columns
from bots_verl.rewards import compute_score
from bots_verl.toy.build_profiles import BUILD_PROFILES, REFERENCE_COLUMNS, PrepareError
from bots_verl.toy.prepare import main, prepare
from bots_verl.toy.tasks import parse_prompt


@pytest.fixture(scope="module")
def built(ci_data: Path) -> Path:
    return ci_data


def test_train_and_val_have_the_layout_the_trainer_reads(built) -> None:
    profile = BUILD_PROFILES["ci"]
    train, val = built / "train.parquet", built / "val.parquet"
    check_parquet_columns(
        str(train), ["data_source", "prompt", "reward_model", "extra_info", "task_id", *REFERENCE_COLUMNS]
    )
    check_parquet_columns(str(val), ["data_source", "prompt", "reward_model", "extra_info", "task_id"])
    rows = pq.read_table(train).to_pylist()
    assert len(rows) == sum(profile.pool_counts().values()) == 96
    ids = [r["task_id"] for r in rows]
    assert ids == list(range(len(rows))) == [r["extra_info"]["index"] for r in rows]
    refs = read_reference_columns([str(train)], list(REFERENCE_COLUMNS), ("task_id",), TaskIndex(ids))
    assert refs.shape == (len(rows), 2) and not np.isnan(refs).any()
    assert np.all((refs >= 0) & (refs <= 1)) and np.allclose(refs * profile.reference_n % 1, 0)
    for r in rows:
        problem = parse_prompt(r["prompt"][0]["content"])
        assert r["prompt"][0]["role"] == "user" and r["extra_info"]["cell"] == problem.cell.name
        assert compute_score(r["data_source"], r["reward_model"]["ground_truth"], r["reward_model"]["ground_truth"])[
            "acc"
        ]
        assert r["reward_model"]["ground_truth"] == problem.answer
    held = pq.read_table(val).to_pylist()
    assert len(held) == profile.heldout_size
    assert {h["extra_info"]["cell"] for h in held} == set(profile.heldout_cells)
    assert not {h["prompt"][0]["content"] for h in held} & {r["prompt"][0]["content"] for r in rows}


def test_verl_dataset_reads_the_pool_with_our_tokenizer(built) -> None:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tokenizer = AutoTokenizer.from_pretrained(str(built / "models" / "policy"))
    config = OmegaConf.create({"max_prompt_length": 12, "filter_overlong_prompts": True, "cache_dir": str(built / "c")})
    dataset = RLHFDataset(str(built / "train.parquet"), tokenizer, config)
    assert len(dataset) == pq.read_metadata(built / "train.parquet").num_rows  # no prompt is overlong
    item = dataset[5]
    assert item["index"] == 5 and item["raw_prompt"][0]["role"] == "user"


def test_the_trainer_config_accepts_the_artifacts(built) -> None:
    from hydra import compose, initialize_config_module

    from bots_verl.main import check_config

    manifest = json.loads((built / "manifest.json").read_text())
    art = manifest["artifacts"]
    overrides = [
        f"data.train_files={art['train_files']}",
        f"data.val_files={art['val_files']}",
        f"actor_rollout_ref.model.path={art['policy_models']['0']}",
        "data.train_batch_size=4",
        "data.max_prompt_length=16",
        f"data.max_response_length={art['max_response_length']}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "trainer.logger=[console]",
        "trainer.n_gpus_per_node=1",
        f"bots.reference_columns=[{','.join(art['reference_columns'])}]",
        f"bots.task_id_field={art['task_id_field']}",
    ]
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        cfg = compose(config_name="bots_trainer", overrides=overrides)
    bots = check_config(cfg)
    assert tuple(bots.reference_columns) == REFERENCE_COLUMNS


def test_manifest_calibration_and_resume(built) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    assert set(manifest["stages"]) == {"data", "warmups", "references", "similarity", "calibration"}
    assert all(s["wall_s"] >= 0 and s["cpu_s"] >= 0 for s in manifest["stages"].values())
    calib = json.loads((built / "calibration.json").read_text())
    assert set(calib["pool"]) == {"policy", "weak", "strong"}
    assert 0 <= calib["pool"]["policy"]["mixed_share_n8"] <= 1
    assert (built / "calibration.md").read_text().startswith("# Toy testbed calibration")
    mtimes = {
        p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file() and p.suffix in (".parquet", ".safetensors")
    }
    again = prepare(built, seed=0, profile="ci", jobs=1)
    assert again["stages"] == manifest["stages"]  # every stage was skipped, so their timings are the first run's
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # nothing rebuilt
    with pytest.raises(PrepareError, match="seed"):
        prepare(built, seed=1, profile="ci", jobs=1)
    with pytest.raises(PrepareError, match="profile"):
        prepare(built, seed=3, profile="quick", jobs=1)


def test_a_lost_reference_is_rebuilt_alone_in_process(built, tmp_path) -> None:
    """Deleting the strong model and its results rebuilds just those (one job: in this process), same columns."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    before = pq.read_table(copy / "train.parquet")
    shutil.rmtree(copy / "models" / "strong")
    for name in ("train.parquet", "calibration.json", "refs/strong.jsonl"):
        (copy / name).unlink()
    weak_mtime = (copy / "models" / "weak" / "warmup.json").stat().st_mtime_ns
    manifest = prepare(copy, seed=0, profile="ci", jobs=1)
    after = pq.read_table(copy / "train.parquet")
    assert (copy / "models" / "weak" / "warmup.json").stat().st_mtime_ns == weak_mtime  # untouched
    assert after.column("toy_weak_pass_rate").equals(before.column("toy_weak_pass_rate"))
    # the warm-up and the per-prompt sampling seeds are fixed, so the rebuilt column is the same
    assert after.column("toy_strong_pass_rate").equals(before.column("toy_strong_pass_rate"))
    assert manifest["references"]["toy_strong_pass_rate"]["missing"] == 0


def test_quick_profile_is_the_full_pool_scaled_down_and_full_is_untouched() -> None:
    """Issue 21: the quick pool keeps the full pool's proportions (its starting policy has mixed groups to select),
    and the headline's data and warm-ups (the full profile) stay what its committed artifacts were built with."""
    full, quick = BUILD_PROFILES["full"], BUILD_PROFILES["quick"]
    assert {k: v / full.pool_per_cell[1] for k, v in full.pool_per_cell.items()} == {
        k: v / quick.pool_per_cell[1] for k, v in quick.pool_per_cell.items()
    }
    assert sum(quick.pool_counts().values()) == 735
    assert full.pool_per_cell == {1: 80, 2: 80, 3: 48, 4: 32} and full.heldout_size == 600
    assert [(s.steps, s.batch_size, s.lr, s.slip) for s in (full.policy, full.weak, full.strong)] == [
        (1000, 128, 2e-3, 0.5),
        (1000, 128, 2e-3, 0.0),
        (2000, 128, 2e-3, 0.0),
    ]
    # the quick warm-ups: the policy well past the old 150 steps, and the strong reference trained longest
    assert quick.policy.steps > 150 and quick.strong.steps > quick.weak.steps


def test_a_rewarmed_policy_is_calibrated_again(built, tmp_path) -> None:
    """The calibration belongs to the exact warm-ups: a policy of another spec is measured again, never reused."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    calib = json.loads((copy / "calibration.json").read_text())
    assert calib["specs"]["policy"] == json.loads((copy / "models" / "policy" / "warmup.json").read_text())["spec"]
    mtime = (copy / "calibration.json").stat().st_mtime_ns
    prepare(copy, seed=0, profile="ci", jobs=1)
    assert (copy / "calibration.json").stat().st_mtime_ns == mtime  # the same models: reused
    # what a re-warmed policy looks like to the calibration stage: its recorded spec differs
    calib["specs"]["policy"] = {**calib["specs"]["policy"], "slip": 0.5}
    (copy / "calibration.json").write_text(json.dumps(calib))
    prepare(copy, seed=0, profile="ci", jobs=1)
    # measured again: the file holds the real specs again
    assert (
        json.loads((copy / "calibration.json").read_text())["specs"]
        == json.loads((built / "calibration.json").read_text())["specs"]
    )


@pytest.mark.parametrize(
    ("family", "seed", "policy_accuracy"),
    [("arith", 0, 0.1211), ("arith", 2, 0.0608), ("logic", 0, 0.1047), ("code", 1, 0.0546)],
)
def test_a_fresh_full_build_starts_from_the_shipped_artifacts_and_trains_nothing(
    family, seed, policy_accuracy, tmp_path
):
    """The committed builds (recipes/toy/artifacts/full_s0, full_s2, logic_full_s0, code_full_s1) are what every
    machine trains from: a fresh prepare copies one and finds every stage done (no warm-up, no reference collection),
    the models bit for bit."""
    import hashlib

    from bots_verl.toy.prepare import prepare, shipped_artifacts

    shipped = shipped_artifacts("full", seed, family)
    assert shipped is not None
    manifest = prepare(tmp_path / "data", seed=seed, profile="full", jobs=1, family=family)
    policy = Path(manifest["artifacts"]["policy_models"]["0"])
    assert policy == tmp_path / "data" / "models" / "policy"

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    for name in ("policy", "weak", "strong"):
        got = tmp_path / "data" / "models" / name / "model.safetensors"
        assert digest(got) == digest(shipped / "models" / name / "model.safetensors")
    assert manifest["calibration"]["heldout"]["policy"]["accuracy"] == pytest.approx(policy_accuracy, abs=1e-4)
    assert shipped_artifacts("ci", 0) is None  # the small profiles build in seconds and are not shipped


def test_a_profile_changed_in_the_code_builds_afresh_not_from_the_shipped_build() -> None:
    """A recalibration (held-out cells, a warm-up's steps) is a build of its own: prepare copies the shipped build only
    when its data settings and every warm-up spec are the profile's, and says what differs otherwise."""
    import dataclasses

    from bots_verl.toy.build_profiles import build_profile, seeded
    from bots_verl.toy.prepare import _differs_from, shipped_artifacts

    shipped = shipped_artifacts("full", 2)
    prof = build_profile("arith", "full")

    def specs(p):
        return {name: seeded(getattr(p, name), 2, name) for name in ("policy", "weak", "strong")}

    assert _differs_from(shipped, prof.data_settings(2), specs(prof)) is None
    assert _differs_from(shipped, prof.data_settings(0), specs(prof)) == "other seed"
    moved = dataclasses.replace(prof, heldout_cells=prof.heldout_cells[:2], heldout_size=100)
    assert _differs_from(shipped, moved.data_settings(2), specs(prof)) == "other heldout cells, other heldout size"
    longer = dataclasses.replace(prof, weak=dataclasses.replace(prof.weak, steps=prof.weak.steps + 1))
    assert _differs_from(shipped, prof.data_settings(2), specs(longer)) == "another weak warm-up"


def test_a_changed_train_file_rebuilds_the_labelled_columns(built, tmp_path) -> None:
    """The labelled-subset columns copy train.parquet's reference values, so new values there are copied again."""
    import shutil

    import numpy as np
    import pyarrow as pa

    from bots_verl.toy.similarity_inputs import LABELLED_FILE, build_similarity_inputs, labelled_column

    copy = tmp_path / "changed"
    shutil.copytree(built, copy)
    column = REFERENCE_COLUMNS[0]
    train = pq.read_table(copy / "train.parquet")
    changed = np.round(1.0 - train.column(column).to_numpy(zero_copy_only=False), 6)
    pq.write_table(
        train.set_column(train.schema.get_field_index(column), column, pa.array(changed)), copy / "train.parquet"
    )
    build_similarity_inputs(copy, REFERENCE_COLUMNS, 0, 4)
    part = pq.read_table(copy / LABELLED_FILE).column(labelled_column(column, "ref10")).to_numpy(zero_copy_only=False)
    known = np.isfinite(part)
    assert known.any()
    np.testing.assert_array_equal(part[known], changed[known])


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 59, item 5's sibling: a build wrote its val.parquet and pool.parquet over a folder's own files (the
    benchmark's ``--out DIR`` builds into ``DIR/data``); only a build's own folder is resumed."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "val.parquet").write_bytes(b"the user's held-out set")
    with pytest.raises(PrepareError, match=rf"{data} holds files but no toy build \(no manifest.json or data.json\)"):
        prepare(data, seed=0, profile="ci", jobs=1)
    monkeypatch.setattr("signal.signal", lambda *args: None)  # main's SIGTERM handler would outlive the test
    assert main(["--out", str(data), "--profile", "ci", "--dry-run"]) == 2  # the dry run says so too
    assert [p.name for p in data.iterdir()] == ["val.parquet"]
    assert (data / "val.parquet").read_bytes() == b"the user's held-out set"
