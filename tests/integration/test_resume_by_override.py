"""A hyperparameter's source is provenance, not meaning (issue 61, item 1): a run started with a value in its yaml
resumes when the same value is given on the command line instead. The driver's own resume check
(``bots_verl.main._check_resume``: the fingerprint and the run folder's training record) on a real ``data.pt`` and
record, before Ray."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from integration_helpers import save_bots_data_pt

from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.settings import resolve_settings
from bots_verl.core.settings import OVERRIDE, YAML
from bots_verl.integration.safety.training_record import experiment_settings, record_experiment
from bots_verl.main import _check_resume, _driver_fingerprint


def _entry_point_config(overrides: list[str]):
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=overrides)


def test_a_value_moved_from_the_yaml_to_an_override_resumes(yaml_config, tmp_path):
    ckpt = tmp_path / "ckpt"
    common = ["bots.reference_columns=[weak,strong]", f"trainer.default_local_dir={ckpt}"]
    # the start: lam in the recipe yaml; its record, then a checkpoint with the driver's fingerprint
    started = yaml_config({"lam": 0.3}, common)
    start = resolve_settings(read_bots_config(started), common)
    record_experiment(started, experiment_settings(started), None)
    save_bots_data_pt(ckpt / "global_step_2", 12, _driver_fingerprint(start))
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")

    # the resume: the entry point's yaml (lam null) with lam given on the command line
    overrides = [*common, "bots.hparams.lam=0.3"]
    resumed = resolve_settings(read_bots_config(_entry_point_config(overrides)), overrides)
    assert (start.selector.sources["lam"], resumed.selector.sources["lam"]) == (YAML, OVERRIDE)
    assert _driver_fingerprint(resumed) == _driver_fingerprint(start)
    _check_resume(_entry_point_config(overrides), resumed)

    # the check compares: another value is refused
    other = [*common, "bots.hparams.lam=0.25"]
    with pytest.raises(ValueError, match=r"hparams: lam 0.3 -> 0.25"):
        _check_resume(_entry_point_config(other), resolve_settings(read_bots_config(_entry_point_config(other)), other))
