"""Checks of verl's own keys before Ray (``bots_verl.config.verl_checks``): the training schedule (issue 47, item 4)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

from bots_verl.config.verl_checks import check_trainer_schedule, check_verl_compat


def _config(*overrides: str):
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=list(overrides))


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.total_training_steps=abc", "trainer.total_training_steps='abc' must be a positive integer or null"),
        ("trainer.total_training_steps=-1", "trainer.total_training_steps=-1 must be a positive integer or null"),
        ("trainer.total_training_steps=0", "trainer.total_training_steps=0 must be"),
        ("trainer.total_training_steps=2.5", "trainer.total_training_steps=2.5 must be"),
        ("trainer.total_training_steps=true", "trainer.total_training_steps=True must be"),
        ("trainer.total_epochs=0", "trainer.total_epochs=0 must be a positive integer"),
        ("trainer.total_epochs=null", "trainer.total_epochs=None must be a positive integer"),
        ("trainer.total_epochs=two", "trainer.total_epochs='two' must be a positive integer"),
        ("trainer.save_freq=0", "trainer.save_freq=0 must be a positive number of steps, or -1 for never"),
        ("trainer.save_freq=-5", "trainer.save_freq=-5 must be"),
        ("trainer.save_freq=1.5", "trainer.save_freq=1.5 must be"),
        ("trainer.test_freq=abc", "trainer.test_freq='abc' must be a positive number of steps, or -1 for never"),
        ("trainer.test_freq=null", "trainer.test_freq=None must be"),
    ],
)
def test_a_schedule_verl_would_misread_is_refused_naming_the_key(override, message):
    with pytest.raises(ValueError) as refused:
        check_trainer_schedule(_config(override))
    assert message in str(refused.value)


def test_every_bad_key_is_named_at_once_and_good_schedules_pass():
    with pytest.raises(ValueError) as refused:
        check_trainer_schedule(_config("trainer.total_training_steps=abc", "trainer.save_freq=0"))
    assert "total_training_steps" in str(refused.value) and "save_freq" in str(refused.value)
    check_trainer_schedule(_config())  # verl's defaults: steps from epochs, never save or test
    check_trainer_schedule(_config("trainer.total_training_steps=3", "trainer.save_freq=1", "trainer.test_freq=2"))


_ENGINE = "actor_rollout_ref.rollout.checkpoint_engine"


def test_the_weight_sync_bucket_is_a_positive_number_of_megabytes():
    """Every checkpoint engine's bucket size; a backend's own engine settings are the backend's check
    (``tests/verl_cpu/test_config_checks.py``)."""
    from bots_verl.config.verl_checks import check_checkpoint_engine, weight_sync_bucket_bytes

    for bad in ("0", "1.5", "-3", "abc", "true"):
        with pytest.raises(ValueError, match=f"{_ENGINE}.update_weights_bucket_megabytes="):
            check_checkpoint_engine(_config(f"{_ENGINE}.update_weights_bucket_megabytes={bad}"))
    check_checkpoint_engine(_config())
    assert weight_sync_bucket_bytes(_config(f"{_ENGINE}.update_weights_bucket_megabytes=3")) == 3 << 20


@pytest.mark.parametrize(
    "override, named, instead",
    [
        (
            "custom_reward_function.path=my_reward.py",
            "custom_reward_function.path='my_reward.py' (set it under reward.custom_reward_function)",
            "reward.custom_reward_function.path=my_reward.py",
        ),
        (
            "custom_reward_function.name=score",
            "custom_reward_function.name='score' (set it under reward.custom_reward_function)",
            "reward.custom_reward_function.name=score",
        ),
        (
            "reward_model.reward_manager=dapo",
            "reward_model.reward_manager='dapo' (set it under reward (reward.reward_manager, ",
            "reward.reward_manager.name=dapo",
        ),
        (
            "sandbox_fusion.url=http://127.0.0.1:8080",
            "sandbox_fusion.url='http://127.0.0.1:8080' (set it under reward.sandbox_fusion)",
            "reward.sandbox_fusion.url=http://127.0.0.1:8080",
        ),
    ],
)
def test_a_top_level_reward_section_of_older_verl_is_refused_naming_where_it_goes(override, named, instead):
    """verl 0.9.1's trainer reads ``reward.*`` only (the top-level sections are migrated by its fully-async entry point
    alone): set, they were ignored and the run scored by verl's default reward without a word (issue 59)."""
    with pytest.raises(ValueError) as refused:
        check_verl_compat(_config(override))
    assert named in str(refused.value) and "would be ignored" in str(refused.value)
    check_verl_compat(_config(instead))
