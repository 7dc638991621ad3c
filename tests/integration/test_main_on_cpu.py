"""``python -m bots_verl.main``: hydra composition, verl's validate_config, the dry run and config errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from integration_helpers import base_overrides, compose, make_pool

from bots_verl.main import check_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _main(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "RAY_ADDRESS": ""}
    return subprocess.run(
        [sys.executable, "-m", "bots_verl.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture()
def pool(tmp_path):
    path = tmp_path / "train.parquet"
    make_pool(path, 12)
    return str(path)


def test_cfg_job_composes_with_overrides_and_dry_run_passes(pool, tokenizer_dir):
    overrides = base_overrides(pool, tokenizer_dir, "bots.selector=mopps", "+bots.hparams.lam=0.2")
    job = _main("--cfg", "job", *overrides)
    assert job.returncode == 0, job.stderr[-2000:]
    assert "selector: mopps" in job.stdout and "lam: 0.2" in job.stdout
    assert "dataloader_num_workers: 0" in job.stdout and "trainer_mode: sync" in job.stdout

    dry = _main(*overrides, "bots.dry_run=true", "trainer.total_training_steps=3")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "BOTS dry run: config OK" in dry.stdout and "bots.selector=mopps" in dry.stdout


def test_bad_selector_fails_with_clear_message(pool, tokenizer_dir):
    bad = _main(*base_overrides(pool, tokenizer_dir, "bots.selector=bogus", "bots.dry_run=true"))
    assert bad.returncode != 0
    assert "bots.selector='bogus' is not a registered selector" in bad.stderr


def test_dry_run_warns_for_paths_only_on_the_cluster(caplog):
    cfg = compose(base_overrides("/cluster/data/train.parquet", "/cluster/models/qwen", "bots.dry_run=true"))
    settings = check_config(cfg)
    assert settings.dry_run and settings.reference_columns == ("weak_pass_rate", "strong_pass_rate")
    assert "does not exist here" in caplog.text and "not a local path" in caplog.text


@pytest.mark.parametrize(
    "override, message",
    [
        ("bots.reference_columns=[weak_pass_rate,missing_col]", "has no column 'missing_col'"),
        ("bots.task_id_field=uid_col", "has no column 'uid_col'"),
        ("data.dataloader_num_workers=2", "dataloader_num_workers"),
        ("trainer.v1.trainer_mode=colocate_async", "trainer_mode"),
        ("+bots.hparams.lamb=0.1", "lamb"),
        ("bots.success.rule=maybe", "bots.success.rule"),
        ("bots.reference_columns=[]", "reference"),
        ("bots.seed=-1", "bots.seed"),
        ("data.train_batch_size=3", "train_batch_size"),
    ],
)
def test_malformed_config_is_a_value_error(pool, tokenizer_dir, override, message):
    cfg = compose(base_overrides(pool, tokenizer_dir, override))
    with pytest.raises(ValueError, match=message):
        check_config(cfg)


def test_task_id_column_and_baselines_validate(pool, tokenizer_dir):
    for selector in ("random", "sequential", "offline_easy2hard", "implicit_only"):
        cfg = compose(base_overrides(pool, tokenizer_dir, f"bots.selector={selector}", "bots.task_id_field=task_id"))
        assert check_config(cfg).selector == selector
