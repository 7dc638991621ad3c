"""The CPU backend's config checks (``bots_verl.verl_cpu.config_checks``): registered with the config layer when the
driver imports them, and refusing before Ray what the rollout's worker would refuse minutes into a run."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

from bots_verl.verl_cpu.config_checks import check_cpu_gloo_settings

_ENGINE = "actor_rollout_ref.rollout.checkpoint_engine"


def _config(*overrides: str):
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=list(overrides))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            [f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=-5"],
            f"{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=-5 must be a positive number of seconds",
        ),
        ([f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=abc"], "timeout_s='abc' must be a positive number"),
        ([f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=inf"], "timeout_s=inf must be a positive number"),
        (
            [f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeot_s=5"],
            f"{_ENGINE}.engine_kwargs.cpu_gloo has unknown keys ['timeot_s']; cpu_gloo takes ['timeout_s', 'host']",
        ),
        ([f"+{_ENGINE}.engine_kwargs.cpu_gloo.host=''"], "host='' must be an address or null"),
        ([f"{_ENGINE}.update_weights_bucket_megabytes=0"], "update_weights_bucket_megabytes=0 must be a positive"),
    ],
)
def test_the_cpu_gloo_settings_a_worker_would_refuse_are_refused_before_ray(overrides, message):
    """Issue 47, item 5: each of these failed 80 s or more into a run, inside the rollout's Ray worker."""
    with pytest.raises(ValueError) as refused:
        check_cpu_gloo_settings(_config(f"{_ENGINE}.backend=cpu_gloo", *overrides))
    assert message in str(refused.value)


def test_the_driver_and_the_engine_refuse_with_one_check():
    """The worker builds the engine with the same check the driver runs: one rule, one message."""
    from bots_verl.verl_cpu.checkpoint_engine import GlooCheckpointEngine

    with pytest.raises(ValueError) as driver:
        check_cpu_gloo_settings(
            _config(f"{_ENGINE}.backend=cpu_gloo", f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=0")
        )
    with pytest.raises(ValueError) as worker:
        GlooCheckpointEngine(1 << 20, timeout_s=0)
    assert str(driver.value) == str(worker.value)
    check_cpu_gloo_settings(_config(f"{_ENGINE}.backend=cpu_gloo", f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=1200"))
    # another backend's engine_kwargs are not the CPU backend's to read
    check_cpu_gloo_settings(_config(f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeout_s=0"))


def test_the_driver_registers_the_backends_checks_before_check_config_runs(tmp_path):
    """``bots_verl.main`` imports the backend's checks, so every path to ``check_config`` runs them (the config layer
    cannot import them: ``tests/test_import_structure.py``)."""
    import bots_verl.main  # noqa: F401
    from bots_verl.config.checks import registered_checks, run_config_checks

    assert {
        "bots_verl.verl_cpu.config_checks.check_cpu_gloo_settings",
        "bots_verl.verl_cpu.known_answers.check_known_answers",
    } <= set(registered_checks())
    with pytest.raises(ValueError, match="cpu_gloo has unknown keys"):
        run_config_checks(_config(f"{_ENGINE}.backend=cpu_gloo", f"+{_ENGINE}.engine_kwargs.cpu_gloo.timeot_s=5"))
    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.rollout\.custom\.known_answers: known-answers file"):
        run_config_checks(_config(f"+actor_rollout_ref.rollout.custom.known_answers={missing}"))
    run_config_checks(_config())
