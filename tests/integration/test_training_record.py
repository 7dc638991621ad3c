"""What the run folder's record of the training settings covers (issue 59): every setting of verl's composed config
under the recorded sections, the harmless ones aside, so that a setting verl adds is recorded without a hand list; the
reward's code by content; and the resume checks on it (``check_resume`` as the driver calls it, before Ray), records
of an earlier version included. Composition only (hydra, verl's real ``ppo_trainer`` config): no Ray."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import tarfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.utils import get_class
from integration_helpers import ROOT, save_bots_data_pt
from omegaconf import OmegaConf, open_dict

from bots_verl.config.bots_config import read_bots_config
from bots_verl.core.settings import effective_hparams
from bots_verl.integration.safety.fingerprint import run_fingerprint
from bots_verl.integration.safety.recorded_settings import HARMLESS, RECORDED_SECTIONS, harmless
from bots_verl.integration.safety.resume import check_resume
from bots_verl.integration.safety.training_record import (
    RECORD_FILE,
    experiment_changes,
    experiment_settings,
    module_identity,
    read_record,
    record_experiment,
)


@functools.cache
def _composed():
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer")


def _config(settings: dict | None = None):
    """verl's composed config (``bots_trainer.yaml`` over ``ppo_trainer``; composed once), ``settings`` set on a
    copy."""
    config = copy.deepcopy(_composed())
    for key, value in (settings or {}).items():
        OmegaConf.update(config, key, value)
    return config


def _leaves(prefix: str, node, out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if not str(key).startswith("_"):  # _target_: verl's dataclass, not a setting
                _leaves(f"{prefix}.{key}", value, out)
    else:
        out.append(prefix)


def _settings_of(config) -> list[str]:
    out: list[str] = []
    for section in RECORDED_SECTIONS:
        _leaves(section, OmegaConf.to_container(OmegaConf.select(config, section), resolve=True), out)
    return out


#: the settings that resumed without a word before issue 59 (the reward, the policy loss, gradient clipping)
ISSUE_59 = (
    "reward.custom_reward_function.path",
    "reward.custom_reward_function.name",
    "reward.reward_manager.name",
    "reward.reward_manager.source",
    "actor_rollout_ref.actor.policy_loss.loss_mode",
    "actor_rollout_ref.actor.grad_clip",
    "data.reward_fn_key",
)


def test_every_setting_of_the_recorded_sections_is_recorded_or_named_harmless():
    """Fails when verl's config has a setting under the actor, rollout, reward, algorithm, model or data that the
    record leaves out without a reason in HARMLESS."""
    config = _config()
    recorded = experiment_settings(config)
    leaves = _settings_of(config)
    assert len(leaves) > 300  # verl's whole config, not a stub
    uncovered = [key for key in leaves if key not in recorded and not harmless(key)]
    assert uncovered == []
    assert [key for key in recorded if harmless(key)] == []
    assert [key for key in ISSUE_59 if key not in recorded] == []
    for section in ("actor_rollout_ref.actor", "actor_rollout_ref.rollout", "reward", "algorithm", "data"):
        assert any(key.startswith(section + ".") for key in recorded), section


def test_a_setting_verl_adds_is_recorded_without_a_change_here():
    """What a new verl release (or a user's ``+key=...``) adds under a recorded section is recorded as it is."""
    config = _config()
    added = ["actor_rollout_ref.actor.new_knob", "reward.new_knob", "algorithm.new_section.knob", "data.new_knob"]
    with open_dict(config):
        for key in added:
            OmegaConf.update(config, key, 0.5, force_add=True)
    recorded = experiment_settings(config)
    assert {key: recorded.get(key) for key in added} == dict.fromkeys(added, 0.5)


def _names_a_setting(config, key: str) -> bool:
    """``key`` is in the composed config, or a field of the verl dataclass its section is built as (settings verl
    declares in a dataclass only, set with ``+key=...``)."""
    if OmegaConf.select(config, key, default="<absent>") != "<absent>":
        return True
    section, _, name = key.rpartition(".")
    target = OmegaConf.select(config, f"{section}._target_", default=None)
    return target is not None and name in {f.name for f in dataclasses.fields(get_class(target))}


def test_every_harmless_entry_names_a_setting_of_verl_with_a_reason():
    """A stale entry (a setting verl renamed or dropped) would hide its successor's absence from the test above."""
    config = _config()
    assert all(any(key.startswith(section + ".") for section in RECORDED_SECTIONS) for key in HARMLESS)
    assert [key for key, why in HARMLESS.items() if not why.strip()] == []
    assert [key for key in HARMLESS if not _names_a_setting(config, key)] == []
    assert not _names_a_setting(config, "actor_rollout_ref.rollout.agent.no_such_setting")  # the check can fail


def test_the_reward_code_is_recorded_by_content(tmp_path, monkeypatch):
    """A reward module is recorded by what it holds: another file, or the same file edited in place, is another
    value; a copy elsewhere (a moved run folder) is the same. ``pkg://`` names a module (its file) or a package (every
    file in it)."""
    reward = tmp_path / "reward.py"
    reward.write_text("def compute_score(*args, **kwargs):\n    return 1.0\n")
    copy = tmp_path / "moved" / "reward.py"
    copy.parent.mkdir()
    copy.write_bytes(reward.read_bytes())
    first = module_identity(str(reward))
    assert first.startswith("sha256:") and module_identity(str(copy)) == first == module_identity(f"file://{reward}")
    before = reward.stat().st_mtime_ns
    reward.write_text("def compute_score(*args, **kwargs):\n    return 0.0\n")  # edited in place, same size
    # in one process the digest is cached by size and mtime: the edit's own mtime, past a coarse clock's tick
    os.utime(reward, ns=(before + 10**9, before + 10**9))
    assert module_identity(str(reward)) not in (first, None)

    package = tmp_path / "my_rewards"
    package.mkdir()
    (package / "__init__.py").write_text("from .scorer import compute_score\n")
    (package / "scorer.py").write_text("def compute_score(*args, **kwargs):\n    return 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    whole = module_identity("pkg://my_rewards")
    assert whole.startswith("package:")
    assert module_identity("pkg://my_rewards.scorer").startswith("sha256:")
    (package / "scorer.py").write_text("def compute_score(*args, **kwargs):\n    return 0.5\n")
    assert module_identity("pkg://my_rewards") != whole  # a module the package imports changed
    assert module_identity("pkg://not_installed_here.rewards") == "pkg://not_installed_here.rewards"

    config = _config({"reward.custom_reward_function.path": str(reward)})
    assert experiment_settings(config)["reward.custom_reward_function.path"] == module_identity(str(reward))
    shipped = experiment_settings(_config({"reward.custom_reward_function.path": "pkg://bots_verl.rewards"}))
    assert shipped["reward.custom_reward_function.path"].startswith("package:")


# ------------------------------------------------------------------------------------------------ the resume check
def _driver_fingerprint(config) -> dict:
    """What the driver knows of the run's fingerprint without the dataset (``bots_verl.main``)."""
    bots = read_bots_config(config)
    return run_fingerprint(
        task_ids=None,
        prompts_sha256=None,
        reference_columns=bots.reference_columns,
        reference=None,
        selector=bots.selector,
        hparams=effective_hparams(bots.selector, bots.hparams),
        success_rule=bots.success.rule,
        success_threshold=bots.success.threshold,
    )


def _resume(config, accept=()) -> None:
    """The driver's resume check (``bots_verl.main._check_resume``): fingerprint and training record, before Ray."""
    check_resume(
        config,
        fingerprint=_driver_fingerprint(config),
        accept=accept,
        require_data_pt=False,
        experiment=experiment_settings(config),
    )


def _reward_file(path: Path, score: str = "1.0") -> str:
    body = "def {}(data_source, solution_str, ground_truth, extra_info=None):\n    return {}\n"
    path.write_text(body.format("compute_score", score) + body.format("other_score", score))
    return str(path)


@pytest.fixture()
def started(tmp_path):
    """Run A as the driver starts it: its record in the run folder, then a checkpoint with its fingerprint."""
    config = _config(
        {
            "trainer.default_local_dir": str(tmp_path / "ckpt"),
            "reward.custom_reward_function.path": _reward_file(tmp_path / "reward.py"),
            "reward.custom_reward_function.name": "compute_score",
        }
    )
    record_experiment(config, experiment_settings(config), None)
    save_bots_data_pt(tmp_path / "ckpt" / "global_step_2", 12, _driver_fingerprint(config))
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("2")
    return config


def _edit_reward_in_place(tmp_path: Path) -> dict:
    reward = tmp_path / "reward.py"
    before = reward.stat().st_mtime_ns
    _reward_file(reward, score="0.0")  # the same size: a check by path, size or name would not see it
    os.utime(reward, ns=(before + 10**9, before + 10**9))  # the edit's own mtime, past a coarse clock's tick
    return {}


#: (the change, what the second launch sets, the refusal's line, the override that accepts it alone)
CHANGES = [
    (
        "another reward file",
        lambda t: {"reward.custom_reward_function.path": _reward_file(t / "other.py", "0.5")},
        "training: reward.custom_reward_function.path 'sha256:",
        "training.reward.custom_reward_function.path",
    ),
    (
        "the reward file edited in place",
        _edit_reward_in_place,
        "training: reward.custom_reward_function.path 'sha256:",
        "training.reward.custom_reward_function.path",
    ),
    (
        "another reward function",
        lambda t: {"reward.custom_reward_function.name": "other_score"},
        "training: reward.custom_reward_function.name 'compute_score' -> 'other_score'",
        "training.reward.custom_reward_function.name",
    ),
    (
        "another reward manager",
        lambda t: {"reward.reward_manager.name": "dapo"},
        "training: reward.reward_manager.name 'naive' -> 'dapo'",
        "training.reward.reward_manager.name",
    ),
    (
        "another policy loss",
        lambda t: {"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo"},
        "training: actor_rollout_ref.actor.policy_loss.loss_mode 'vanilla' -> 'gspo'",
        "training.actor_rollout_ref.actor.policy_loss.loss_mode",
    ),
    (
        "another gradient clip",
        lambda t: {"actor_rollout_ref.actor.grad_clip": 0.5},
        "training: actor_rollout_ref.actor.grad_clip 1.0 -> 0.5",
        "training.actor_rollout_ref.actor.grad_clip",
    ),
    (
        "another reward_fn_key",
        lambda t: {"data.reward_fn_key": "ability"},
        "training: data.reward_fn_key 'data_source' -> 'ability'",
        "training.data.reward_fn_key",
    ),
    (
        "another success rule",
        lambda t: {"bots.success.rule": "acc"},
        "success: rule 'auto' threshold 0.0 -> rule 'acc' threshold 0.0",
        "success",
    ),
    (
        "another success threshold",
        lambda t: {"bots.success.threshold": 0.5},
        "success: rule 'auto' threshold 0.0 -> rule 'auto' threshold 0.5",
        "success",
    ),
]


@pytest.mark.parametrize(("what", "change", "refusal", "override"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_changed_reward_loss_or_success_rule_is_refused_naming_it_unless_accepted(
    started, tmp_path, what, change, refusal, override
):
    """Issue 59: each of these resumed without a word (the reward's code, its function and manager, the policy loss,
    gradient clipping, the reward's routing key, the success rule)."""
    _resume(started)  # the same run resumes
    resumed = copy.deepcopy(started)
    for key, value in change(tmp_path).items():
        OmegaConf.update(resumed, key, value)  # as the command line's key=value would set it
    with pytest.raises(ValueError) as refused:
        _resume(resumed)
    message = str(refused.value)
    assert refusal in message and f"(accept with bots.resume.accept_changed=[{override}])" in message
    assert message.count("\n  - ") == 1  # that change alone
    _resume(resumed, accept=[override])
    _resume(resumed, accept=[override.split(".")[0]])  # training (every training setting) or success


def _archived_record() -> dict:
    """The record of a toy benchmark run archived with its checkpoint (written before issue 59: version 1)."""
    archive = ROOT / "recipes/toy/results/claims/full_s2/runs_bots_ref10_bots_ref5_s0-7.tar.gz"
    with tarfile.open(archive, "r|gz") as tar:  # streamed: the record comes before the checkpoint's weights
        for member in tar:
            if member.name.endswith(f"/ckpt/{RECORD_FILE}"):
                handle = tar.extractfile(member)
                assert handle is not None
                return json.loads(handle.read())
    raise AssertionError(f"{archive} holds no {RECORD_FILE}")


def test_a_record_of_an_earlier_version_is_checked_on_what_it_holds_then_rewritten(tmp_path, caplog):
    """Run folders of an earlier bots-verl hold a version-1 record of fewer settings (the toy benchmark's archived
    checkpoints: this is one of theirs). Compared as a whole, every setting it lacks would read as a change and no
    such run could resume, or be extended to a longer horizon."""
    archived = _archived_record()
    assert archived["version"] == 1 and "reward.custom_reward_function.path" not in archived["settings"]
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / RECORD_FILE).write_text(json.dumps(archived))
    record = read_record(folder)
    # this launch: the archived run's settings where the record has them, every later one as verl composes it
    config = _config({"trainer.default_local_dir": str(folder)})
    current = {**experiment_settings(config), **archived["settings"]}
    for key in ("custom_reward_function.path", "custom_reward_function.name"):  # version 1's, not recorded now
        current.pop(key)
    assert experiment_changes(record, current) == []
    assert f"the run folder's {RECORD_FILE} was written by an earlier bots-verl (version 1" in caplog.text
    (change,) = experiment_changes(record, {**current, "data.train_batch_size": 8})  # what it holds is checked
    assert change.what == "data.train_batch_size 16 -> 8"

    record_experiment(config, current, str(folder / "global_step_90"))  # the resume rewrites it
    rewritten = read_record(folder)
    assert rewritten["version"] == 2 and rewritten["settings"] == current
    assert rewritten["history"][-1]["record_version"] == 1 and rewritten["history"][-1]["changed"] == {}
    loss = "actor_rollout_ref.actor.policy_loss.loss_mode"
    (change,) = experiment_changes(rewritten, {**current, loss: "gspo"})  # from now on every setting is checked
    assert change.key == loss


def test_a_record_of_a_later_version_is_refused_naming_the_file(tmp_path):
    (tmp_path / RECORD_FILE).write_text(json.dumps({"format": "bots-verl-experiment", "version": 3, "settings": {}}))
    with pytest.raises(ValueError, match=rf"{tmp_path / RECORD_FILE}: version 3, this bots-verl reads versions 1 to 2"):
        read_record(tmp_path)
