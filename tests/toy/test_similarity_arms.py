"""The toy benchmark's issue-36 arms (``bots_ref10``, ``bots_ref5``, ``bots_noref``): the ``ci`` build's task
embeddings and labelled-subset columns; the labelled arm through the driver's checks with its own overrides; the
reference-free arm in one real 1-step GRPO run through ``python -m bots_verl.main`` with the benchmark's overrides
(verl's real trainer on CPU), whose checkpoint shows the selector received the embeddings: the run fingerprint's
sha256 is the embedding file's, aligned to the pool."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bots_verl.integration.evidence.embeddings import load_task_embeddings
from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.toy.arms import LABELLED_ARMS, PROFILES, arm_settings, training_overrides
from bots_verl.toy.similarity_inputs import LABELLED_SUBSETS, labelled_column

pytestmark = pytest.mark.slow

PROFILE = PROFILES["ci"]
ARMS = ("bots_ref10", "bots_ref5", "bots_noref")


@pytest.fixture(scope="module")
def data(ci_data: Path) -> Path:
    return ci_data


@pytest.fixture(scope="module")
def manifest(data: Path) -> dict:
    return json.loads((data / "manifest.json").read_text())


def test_the_build_holds_embeddings_and_labelled_columns(data: Path, manifest: dict) -> None:
    art = manifest["artifacts"]
    train = pq.read_table(art["train_files"])
    ids = train.column("task_id").to_pylist()
    emb = load_task_embeddings(art["task_embeddings"], ids)
    assert emb.meta["method"] == "policy" and emb.vectors.shape[0] == len(ids)
    labelled = pq.read_table(art["labelled_train_files"])
    assert labelled.column("task_id").to_pylist() == ids
    for subset, fraction in LABELLED_SUBSETS.items():
        for column in art["reference_columns"]:
            full = train.column(column).to_numpy(zero_copy_only=False)
            part = labelled.column(labelled_column(column, subset)).to_numpy(zero_copy_only=False)
            known = np.isfinite(part)
            assert known.sum() == max(1, round(fraction * len(ids)))
            np.testing.assert_array_equal(part[known], full[known])  # the build's own values on the labelled tasks
        assert manifest["similarity"][subset]["saved_generations"] > 0


def test_the_arms_are_one_switch_each(manifest: dict, tmp_path: Path) -> None:
    assert arm_settings("bots_ref10") == ("bots_partial_ref", ())
    assert arm_settings("bots_noref") == ("bots_noref", ())
    for arm in ARMS:
        argv = training_overrides(manifest, PROFILE, arm, 0, tmp_path)
        refs = next(a for a in argv if a.startswith("bots.reference_columns="))
        subset = LABELLED_ARMS[arm]
        refs_full = manifest["artifacts"]["reference_columns"]
        columns = [] if subset is None else [labelled_column(c, subset) for c in refs_full]
        assert refs == f"bots.reference_columns=[{','.join(columns)}]"
        assert any(a.startswith("bots.task_embeddings=") for a in argv)
    # the paper arm is unchanged: full columns, no embeddings
    paper = training_overrides(manifest, PROFILE, "bots", 0, tmp_path)
    assert not any(a.startswith("bots.task_embeddings=") for a in paper)


def test_the_labelled_arm_passes_the_drivers_checks_with_its_labelled_share(
    data: Path, manifest: dict, tmp_path: Path
) -> None:
    """``bots_ref10`` as its run starts: its overrides compose, pass every driver check (``bots_verl.main``'s, the
    pool's inputs included) and give the partial-reference selector the share of labelled tasks the build recorded.
    Its training step is the reference-free arm's below with reference columns on top: the trainer reads them with
    the same function as the driver's pool check (``read_reference_columns``), so one real run covers both arms."""
    from hydra import compose, initialize_config_module

    from bots_verl.config.overrides import overridden_keys
    from bots_verl.config.verl_checks import train_files
    from bots_verl.integration.evidence.pool_checks import check_pool_inputs
    from bots_verl.main import check_config
    from bots_verl.verl_cpu import launch

    argv = training_overrides(manifest, PROFILE, "bots_ref10", 0, tmp_path)
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        config = compose(config_name="bots_trainer", overrides=argv)
    launch.apply_cpu_settings(config, overridden_keys(argv))
    settings = check_config(config, argv)
    assert settings.selector.name == arm_settings("bots_ref10")[0] == "bots_partial_ref"
    coverage = check_pool_inputs(train_files(config), settings)
    tasks = pq.read_table(manifest["artifacts"]["train_files"]).num_rows
    labelled = manifest["similarity"][LABELLED_ARMS["bots_ref10"]]["labelled"]
    assert coverage == {"tasks": tasks, "labelled": labelled} and 0 < labelled < tasks


# bots_ref10 and bots_ref5 differ from bots_noref in their reference columns, which the tests above check through
# the driver; the reference-free arm trains for real (a run costs about a minute of CI's two cores); one step
# suffices: the checkpoint's fingerprint and selector state are what is checked
def test_a_real_step_and_the_selector_got_the_embeddings(data: Path, manifest: dict, monkeypatch, ray_attach) -> None:
    from bots_verl.verl_cpu.smoke import run_training

    arm = "bots_noref"
    for key, value in ray_attach().items():  # the session's Ray cluster: one cluster start and stop saved
        monkeypatch.setenv(key, value)
    run_dir = data.parent / "runs" / f"{arm}_s0"
    run_dir.mkdir(parents=True)
    argv = [*training_overrides(manifest, PROFILE, arm, 0, run_dir), "trainer.total_training_steps=1"]
    run_training(argv, run_dir, run_dir / "train.log", 900)
    state = checkpoint_sampler_state(run_dir / "ckpt" / "global_step_1" / "data.pt")
    art = manifest["artifacts"]
    ids = pq.read_table(art["train_files"], columns=["task_id"]).column("task_id").to_pylist()
    expected = load_task_embeddings(art["task_embeddings"], ids).sha256
    assert state["fingerprint"]["task_embeddings"]["sha256"] == expected
    assert state["fingerprint"]["selector"]["name"] == arm_settings(arm)[0]
    assert state["updates"] == 1
    meta = json.loads((run_dir / "run" / "meta.json").read_text())
    assert meta["method"] == arm and meta["extra"]["reference_coverage"] is None  # no reference columns
