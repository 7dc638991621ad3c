"""The run folder (issue 47): the training settings recorded at the start and checked on resume, and one run per
folder. The driver's path in ``bots_verl.main.run`` up to ``run_ppo``, which is replaced: no Ray starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from integration_helpers import ROOT, base_overrides, compose, make_pool, save_bots_data_pt

from bots_verl.core.settings import effective_hparams
from bots_verl.integration.safety.fingerprint import run_fingerprint
from bots_verl.integration.safety.run_lock import LOCK_NAME, RunFolderInUse
from bots_verl.integration.safety.training_record import RECORD_FILE
from bots_verl.main import run

LR = "actor_rollout_ref.actor.optim.lr"


@pytest.fixture()
def pool(tmp_path):
    path = tmp_path / "train.parquet"
    make_pool(path, 12)
    return str(path)


@pytest.fixture()
def no_ray(monkeypatch):
    """``run_ppo`` replaced: record what the driver handed it."""
    import verl.trainer.main_ppo

    calls = []
    monkeypatch.setattr(verl.trainer.main_ppo, "run_ppo", lambda config, **kw: calls.append(config))
    return calls


def _launch(pool, tokenizer_dir, tmp_path, *extra):
    overrides = [f"trainer.default_local_dir={tmp_path / 'ckpt'}", f"bots.run_log.dir={tmp_path / 'run'}", *extra]
    config = compose(base_overrides(pool, tokenizer_dir, *overrides))
    run(config)
    return config


def _save_checkpoint(ckpt, step: int = 2):
    """What run A's trainer leaves: a global_step folder with the BOTS posterior and its fingerprint."""
    fingerprint = run_fingerprint(
        task_ids=None,
        prompts_sha256=None,
        reference_columns=["weak_pass_rate", "strong_pass_rate"],
        reference=None,
        selector="bots",
        hparams=effective_hparams("bots", {}),
        success_rule="auto",
        success_threshold=0.0,
    )
    save_bots_data_pt(ckpt / f"global_step_{step}", 12, fingerprint)
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_a_rerun_with_other_training_settings_is_refused_naming_each_change(pool, tokenizer_dir, tmp_path, no_ray):
    """Run A (batch 4, lr 1e-6), then the same command with batch 8 and another learning rate: it resumed A's
    checkpoint silently and meta.json said batch 8 held for the whole run."""
    _launch(pool, tokenizer_dir, tmp_path)  # run A starts fresh: its settings are recorded
    record = json.loads((tmp_path / "ckpt" / RECORD_FILE).read_text())
    assert record["settings"]["data.train_batch_size"] == 4 and record["settings"][LR] == 1e-6
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["extra"]["experiment"]["data.train_batch_size"] == 4
    _save_checkpoint(tmp_path / "ckpt")

    changed = ["data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{LR}=3e-7"]
    for dry_run in ("true", "false"):
        with pytest.raises(ValueError) as refused:
            _launch(pool, tokenizer_dir, tmp_path, *changed, f"bots.dry_run={dry_run}")
        message = str(refused.value)
        assert "this launch changes the training settings the run was started with" in message
        assert (
            "training: data.train_batch_size 4 -> 8 (accept with bots.resume.accept_changed="
            "[training.data.train_batch_size])" in message
        )
        assert f"training: {LR} 1e-06 -> 3e-07 (accept with bots.resume.accept_changed=[training.{LR}])" in message
        assert "actor_rollout_ref.actor.ppo_mini_batch_size 4 -> 8" in message
    assert len(no_ray) == 1  # only run A got to run_ppo
    assert json.loads((tmp_path / "run" / "meta.json").read_text()) == meta  # untouched by the refusals

    # accepting the learning rate alone still refuses the batch
    with pytest.raises(ValueError, match=r"data.train_batch_size 4 -> 8") as refused:
        _launch(pool, tokenizer_dir, tmp_path, *changed, f"bots.resume.accept_changed=[training.{LR}]")
    assert f"{LR} 1e-06" not in str(refused.value)

    # a deliberate change of the learning rate: accepted, and recorded in the run log
    _launch(pool, tokenizer_dir, tmp_path, f"{LR}=3e-7", f"bots.resume.accept_changed=[training.{LR}]")
    assert len(no_ray) == 2
    after = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert after["created"] == meta["created"] and after["extra"]["experiment"][LR] == 1e-6  # the start, as it was
    (resume,) = after["extra"]["resumes"]
    assert resume["changed"] == {LR: [1e-6, 3e-7]} and resume["accept_changed"] == [f"training.{LR}"]
    assert resume["resumed_from"] == str(tmp_path / "ckpt" / "global_step_2")
    record = json.loads((tmp_path / "ckpt" / RECORD_FILE).read_text())
    assert record["settings"][LR] == 3e-7 and record["history"][0]["changed"] == {LR: [1e-6, 3e-7]}
    # the next resume is checked against what the run continued with
    with pytest.raises(ValueError, match=r"3e-07 -> 1e-06 \(accept with"):
        _launch(pool, tokenizer_dir, tmp_path, f"{LR}=1e-6", "bots.dry_run=true")
    _launch(pool, tokenizer_dir, tmp_path, f"{LR}=3e-7", "bots.dry_run=true")


def test_a_checkpoint_without_a_record_is_said_and_gets_one(pool, tokenizer_dir, tmp_path, no_ray, caplog):
    """A run started before the record existed cannot be checked: a warning, then the record from this resume on."""
    _save_checkpoint(tmp_path / "ckpt")
    _launch(pool, tokenizer_dir, tmp_path, "bots.dry_run=true")
    assert f"the run folder has no {RECORD_FILE}" in caplog.text and not (tmp_path / "ckpt" / RECORD_FILE).exists()
    _launch(pool, tokenizer_dir, tmp_path)
    record = json.loads((tmp_path / "ckpt" / RECORD_FILE).read_text())
    assert record["settings"]["data.train_batch_size"] == 4
    assert record["resumed_from"] == str(tmp_path / "ckpt" / "global_step_2")
    with pytest.raises(ValueError, match=r"data.train_batch_size 4 -> 8"):
        _launch(pool, tokenizer_dir, tmp_path, "data.train_batch_size=8", "bots.dry_run=true")


def test_a_moved_run_folder_resumes_and_a_replaced_data_file_is_a_change(tokenizer_dir, tmp_path, no_ray):
    """The record holds the data files and the model by content, not by path: a run folder moved with its data (a
    run archive extracted elsewhere, a benchmark copied to another disk) resumes; other bytes at the same path are a
    change. Recorded by path, the moved copy was refused and a file replaced in place passed."""
    first = tmp_path / "first"
    first.mkdir()
    make_pool(first / "train.parquet", 12)
    _launch(str(first / "train.parquet"), tokenizer_dir, first)
    settings = json.loads((first / "ckpt" / RECORD_FILE).read_text())["settings"]
    assert settings["data.train_files"].startswith("sha256:") and settings["actor_rollout_ref.model.path"].startswith(
        "model:"
    )
    _save_checkpoint(first / "ckpt")
    moved = tmp_path / "moved"
    shutil.copytree(first, moved)
    _launch(str(moved / "train.parquet"), tokenizer_dir, moved, "bots.dry_run=true")  # the same run, elsewhere
    make_pool(moved / "train.parquet", 12, seed=1)  # the same tasks in another order: other bytes
    with pytest.raises(ValueError, match=r"data.train_files 'sha256:[0-9a-f]{16}' -> 'sha256:[0-9a-f]{16}'"):
        _launch(str(moved / "train.parquet"), tokenizer_dir, moved, "bots.dry_run=true")


_HOLDER = """
import sys, time
from bots_verl.integration.safety.run_lock import hold_run_folders
from omegaconf import OmegaConf
hold_run_folders(OmegaConf.create({"trainer": {"default_local_dir": sys.argv[1]}}))
print("holding", flush=True)
time.sleep(120)
"""


def test_a_second_run_in_a_held_run_folder_is_refused_and_a_killed_holder_does_not_block(
    pool, tokenizer_dir, tmp_path, no_ray, caplog
):
    """Two runs of one experiment on two Ray clusters with shared storage: the cluster claim covers one cluster."""
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(ckpt)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        for dry_run in ("true", "false"):
            with pytest.raises(RunFolderInUse) as refused:
                _launch(pool, tokenizer_dir, tmp_path, f"bots.dry_run={dry_run}")
            assert f"{ckpt} is in use by another run: pid {holder.pid} on host" in str(refused.value)
        assert not no_ray and not (tmp_path / "run").exists()  # refused before anything was written
    finally:
        holder.kill()  # SIGKILL: the lock file stays behind
        holder.wait()
    assert (ckpt / f"{LOCK_NAME}.lock").is_file()
    with caplog.at_level("INFO"):
        _launch(pool, tokenizer_dir, tmp_path)
    assert len(no_ray) == 1 and f"took over a stale lock of pid {holder.pid}" in caplog.text
    assert not (ckpt / f"{LOCK_NAME}.lock").exists() and not (tmp_path / "run" / f"{LOCK_NAME}.lock").exists()
