"""Resumes that would silently restart the BOTS posterior from the prior, or resume it for another pool, reference
columns or selector (its fingerprint), are refused before any worker starts.

Fast: no Ray, no model. The checkpoints are real ``StatefulDataLoader`` states saved with ``torch.save`` as verl's
``_save_checkpoint`` does: one from plain verl's sampler, one from :class:`BOTSSampler` (with its posterior service
in-process instead of in a Ray actor). ``test_e2e_on_cpu.py`` checks the missing-``data.pt`` refusal of a real run's
driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader

from bots_verl.core.settings import SelectorSettings, effective_hparams
from bots_verl.integration.hooks.trainer import BOTSTrainer
from bots_verl.integration.safety.fingerprint import run_fingerprint
from bots_verl.integration.safety.resume import check_resume, check_resume_data_pt, check_resume_fingerprint
from bots_verl.integration.transport.sampler import BOTSSampler
from bots_verl.integration.transport.selector_client import InProcessSelectorClient
from bots_verl.integration.transport.selector_service import SelectorService

N, B, STEP = 12, 3, 2


def _in_process_sampler(service: SelectorService, *args: Any) -> BOTSSampler:
    """A BOTSSampler calling a SelectorService in this process instead of a Ray actor."""
    return BOTSSampler(InProcessSelectorClient(service), *args)


def _save_loader_state(loader: StatefulDataLoader, ckpt: Path) -> Path:
    """One step drawn, then the loader state saved where verl's checkpoint of step STEP keeps it."""
    next(iter(loader))
    folder = ckpt / f"global_step_{STEP}"
    folder.mkdir(parents=True)
    torch.save(loader.state_dict(), folder / "data.pt")
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(STEP))
    return folder


def _plain_verl_checkpoint(ckpt: Path) -> Path:
    generator = torch.Generator()
    generator.manual_seed(1)
    sampler = torch.utils.data.RandomSampler(range(N), generator=generator)  # what verl builds without BOTS
    return _save_loader_state(StatefulDataLoader(list(range(N)), batch_size=B, sampler=sampler), ckpt)


def _bots_checkpoint(ckpt: Path) -> Path:
    sampler = _in_process_sampler(
        SelectorService(SelectorSettings("random", seed=1), N), N, B, [f"t{i}" for i in range(N)]
    )
    return _save_loader_state(StatefulDataLoader(list(range(N)), batch_size=B, sampler=sampler), ckpt)


def test_data_pt_without_bots_sampler_state_is_refused(tmp_path):
    folder = _plain_verl_checkpoint(tmp_path)
    with pytest.raises(ValueError) as refused:
        check_resume_data_pt(folder)
    message = str(refused.value)
    assert str(folder / "data.pt") in message
    assert "has no 'sampler_state'" in message and "plain verl or another sampler" in message


def test_data_pt_with_bots_sampler_state_passes(tmp_path):
    folder = _bots_checkpoint(tmp_path)
    assert check_resume_data_pt(folder)["task_ids"] == [f"t{i}" for i in range(N)]


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [(None, FileNotFoundError, "data.pt is missing"), (b"", ValueError, "cannot be read")],
)
def test_missing_or_unreadable_data_pt_is_refused(tmp_path, content, error, message):
    folder = tmp_path / f"global_step_{STEP}"
    folder.mkdir()
    if content is not None:
        (folder / "data.pt").write_bytes(content)
    with pytest.raises(error, match=message):
        check_resume_data_pt(folder)


def test_the_driver_refuses_a_missing_data_pt_when_the_checkpoint_is_here_and_leaves_a_remote_one(tmp_path):
    """The driver (``require_data_pt=False``) refuses a local checkpoint without ``data.pt`` before any worker starts;
    a checkpoint folder that is not on this machine (it may live on the cluster only) is left to the trainer."""
    ckpt = tmp_path / "ckpt"
    folder = _bots_checkpoint(ckpt)
    config = OmegaConf.create({"trainer": {"resume_mode": "auto", "default_local_dir": str(ckpt)}})
    assert check_resume(config, require_data_pt=False).folder == str(folder)
    (folder / "data.pt").unlink()
    with pytest.raises(FileNotFoundError, match="data.pt is missing"):
        check_resume(config, require_data_pt=False)
    remote = OmegaConf.create({"trainer": {"resume_mode": "resume_path", "resume_from_path": str(tmp_path / "gone")}})
    assert check_resume(remote, require_data_pt=False) is None
    with pytest.raises(FileNotFoundError, match="data.pt is missing"):
        check_resume(remote)


@pytest.mark.parametrize("with_bots_state", [False, True])
def test_trainer_init_checks_data_pt_before_verl_starts_workers(tmp_path, monkeypatch, with_bots_state):
    """``BOTSTrainer.init`` refuses a foreign ``data.pt`` before verl's ``init`` (which starts the workers) runs."""
    ckpt = tmp_path / "ckpt"
    (_bots_checkpoint if with_bots_state else _plain_verl_checkpoint)(ckpt)
    started = []
    monkeypatch.setattr(BOTSTrainer.__bases__[0], "init", lambda self: started.append(True))
    trainer = object.__new__(BOTSTrainer)  # only the config is read before verl's init
    trainer.config = OmegaConf.create({"trainer": {"resume_mode": "auto", "default_local_dir": str(ckpt)}})
    if with_bots_state:
        trainer.init()
        assert started == [True]
    else:
        with pytest.raises(ValueError, match="holds no BOTS sampler state"):
            trainer.init()
        assert started == []


# ---------------------------------------------------------------------------------------------------- fingerprints
IDS = [f"t{i}" for i in range(N)]
REF = np.column_stack([np.linspace(0.0, 0.5, N), np.linspace(0.3, 1.0, N)])
COLUMNS = ("weak_pass_rate", "strong_pass_rate")


def _fingerprint(
    *,
    ids=IDS,
    prompts="p" * 64,
    columns=COLUMNS,
    reference=REF,
    selector="bots",
    hparams=None,
    pool=True,
    success=("auto", 0.0),
) -> dict:
    """A run's fingerprint as BOTSTrainer computes it (pool=False: the driver's, without the dataset)."""
    hparams = effective_hparams(selector, hparams or {})
    return run_fingerprint(
        task_ids=list(ids) if pool else None,
        prompts_sha256=prompts if pool else None,
        reference_columns=columns,
        reference=reference if pool else None,
        selector=selector,
        hparams=hparams,
        success_rule=success[0],
        success_threshold=success[1],
    )


def _fingerprinted_checkpoint(ckpt: Path, fingerprint: dict | None) -> Path:
    """A real data.pt (torch.save'd StatefulDataLoader state) of a bots posterior, with ``fingerprint``."""
    service = SelectorService(SelectorSettings("bots", seed=1), N, reference_pass_rates=REF)
    sampler = _in_process_sampler(service, N, B, IDS, fingerprint)
    return _save_loader_state(StatefulDataLoader(list(range(N)), batch_size=B, sampler=sampler), ckpt)


def _resume(folder: Path, current: dict, accept=()) -> None:
    check_resume_fingerprint(folder, check_resume_data_pt(folder), current, accept)


CHANGES = [
    # (what this run has, the part named, the override that accepts it)
    ({"columns": COLUMNS[::-1], "reference": REF[:, ::-1]}, "reference_columns: names", "reference_columns"),
    ({"reference": REF * 0.9}, "reference_columns: values", "reference_columns"),
    ({"prompts": "q" * 64}, f"pool: the same {N} task ids with other prompts", "pool"),
    ({"hparams": {"lam": 0.2}}, "hparams: lam 0.1 -> 0.2", "hparams"),
    # issue 59: the rule that turns a reward into the posterior's success resumed silently
    ({"success": ("acc", 0.0)}, "success: rule 'auto' threshold 0.0 -> rule 'acc' threshold 0.0", "success"),
    ({"success": ("auto", 0.5)}, "success: rule 'auto' threshold 0.0 -> rule 'auto' threshold 0.5", "success"),
]


@pytest.mark.parametrize(("change", "named", "override"), CHANGES)
def test_a_changed_pool_reference_or_hparam_is_refused_naming_the_override_that_accepts_it(
    tmp_path, change, named, override
):
    folder = _fingerprinted_checkpoint(tmp_path, _fingerprint())
    with pytest.raises(ValueError) as refused:
        _resume(folder, _fingerprint(**change))
    message = str(refused.value)
    assert f"resuming from {folder}, but its BOTS posterior was built for another run" in message
    assert named in message and f"accept with bots.resume.accept_changed=[{override}]" in message
    assert "trainer.resume_mode=disable" in message
    _resume(folder, _fingerprint(**change), accept=[override])  # accepted with the override
    with pytest.raises(ValueError, match=named):
        _resume(folder, _fingerprint(**change), accept=[o for o in ("pool", "hparams") if o != override])


def test_the_same_run_resumes_and_the_driver_compares_what_it_knows(tmp_path):
    folder = _fingerprinted_checkpoint(tmp_path, _fingerprint())
    _resume(folder, _fingerprint())
    _resume(folder, _fingerprint(pool=False, prompts="other"))  # the driver has no pool: not compared
    with pytest.raises(ValueError, match="reference_columns: names"):
        _resume(folder, _fingerprint(pool=False, columns=("weak_pass_rate", "other_pass_rate")))


@pytest.mark.parametrize(
    ("change", "named", "why"),
    [
        ({"ids": IDS[::-1]}, f"pool: {N} tasks -> {N} tasks, task ids", "indexed by the pool's positions"),
        ({"ids": IDS[:-1]}, f"pool: {N} tasks -> {N - 1} tasks", "indexed by the pool's positions"),
        ({"hparams": {"alpha0": 2.0}}, "hparams: alpha0 1.0 -> 2.0", "would not apply; set it back to 1.0"),
        ({"selector": "mopps", "hparams": {}}, "selector: 'bots' -> 'mopps'", "another selector's state"),
    ],
)
def test_changes_no_override_can_accept_are_refused_saying_why(tmp_path, change, named, why):
    folder = _fingerprinted_checkpoint(tmp_path, _fingerprint())
    everything = ["pool", "reference_columns", "hparams", "missing_fingerprint"]
    with pytest.raises(ValueError) as refused:
        _resume(folder, _fingerprint(**change), accept=everything)
    message = str(refused.value)
    assert named in message and "no override: " in message and why in message


def test_a_checkpoint_without_a_fingerprint_is_refused_unless_accepted(tmp_path):
    folder = _fingerprinted_checkpoint(tmp_path, None)  # as every checkpoint written before fingerprints
    with pytest.raises(ValueError) as refused:
        _resume(folder, _fingerprint())
    message = str(refused.value)
    assert f"resuming from {folder}, but its data.pt does not record what its BOTS posterior was built for" in message
    assert "fingerprint: the checkpoint has none" in message
    assert "accept with bots.resume.accept_changed=[missing_fingerprint]" in message
    _resume(folder, _fingerprint(), accept=["missing_fingerprint"])


def test_a_checkpoint_written_before_the_success_rule_was_recorded_resumes_saying_so(tmp_path, caplog):
    """Checkpoints of earlier runs (the toy benchmark's archives among them) have no ``success`` part: nothing to
    compare, so the resume goes on with a warning, and the next checkpoint records it."""
    old = _fingerprint()
    del old["success"]
    folder = _fingerprinted_checkpoint(tmp_path, old)
    for current in (_fingerprint(), _fingerprint(pool=False), _fingerprint(success=("acc", 0.0))):
        _resume(folder, current)
    assert "does not record bots.success (written before it was)" in caplog.text


def test_a_resumed_run_writes_its_own_fingerprint(tmp_path):
    """After an accepted change the next checkpoint records the run as it now is, so the next resume is clean."""
    folder = _fingerprinted_checkpoint(tmp_path / "a", _fingerprint())
    state = check_resume_data_pt(folder)
    changed = _fingerprint(hparams={"lam": 0.2})
    sampler = _in_process_sampler(
        SelectorService(SelectorSettings("bots", seed=1), N, reference_pass_rates=REF), N, B, IDS, changed
    )
    sampler.load_state_dict(torch.load(folder / "data.pt", weights_only=False)["_sampler_iter_state"]["sampler_state"])
    assert state["fingerprint"] == _fingerprint() and sampler.state_dict()["fingerprint"] == changed


def test_the_prompt_digest_depends_on_the_rows_not_on_how_the_dataset_holds_them(caplog):
    import datasets

    from bots_verl.integration.safety.fingerprint import dataset_prompts_digest

    rows = [{"prompt": [{"role": "user", "content": f"q{i}"}], "extra_info": {"index": i}} for i in range(20)]

    def dataset(frame):
        return type("Dataset", (), {"dataframe": frame})()

    whole = datasets.Dataset.from_list(rows)
    # verl's train_max_samples and filtering leave an indices mapping over the full table
    subset = datasets.Dataset.from_list(rows[::-1] + rows).select(range(20, 40))
    assert dataset_prompts_digest(dataset(subset), "prompt") == dataset_prompts_digest(dataset(whole), "prompt")
    edited = datasets.Dataset.from_list([*rows[:-1], {**rows[-1], "prompt": [{"role": "user", "content": "x"}]}])
    assert dataset_prompts_digest(dataset(edited), "prompt") != dataset_prompts_digest(dataset(whole), "prompt")
    assert dataset_prompts_digest(dataset(whole), "question") is None
    assert "no 'question' column (data.prompt_key)" in caplog.text


# ---- issue 34: a cut data.pt and a hand-edited fingerprint are ValueErrors naming the checkpoint
def test_a_truncated_data_pt_is_a_value_error_naming_the_file_at_every_cut(tmp_path):
    """About 40% of cut points used to raise a bare ``OSError: [Errno 22] Invalid argument`` (a seek in the zip)."""
    whole = (_bots_checkpoint(tmp_path / "ckpt") / "data.pt").read_bytes()
    folder = tmp_path / f"cut/global_step_{STEP}"
    folder.mkdir(parents=True)
    cuts = sorted({*range(1, len(whole), max(1, len(whole) // 97)), len(whole) - 1, len(whole) - 22})
    for cut in cuts:
        (folder / "data.pt").write_bytes(whole[:cut])
        with pytest.raises(ValueError) as refused:
            check_resume_data_pt(folder)
        assert f"resuming from {folder}, but {folder / 'data.pt'} cannot be read as a torch checkpoint" in str(
            refused.value
        ), cut


@pytest.mark.parametrize(
    "error", [OSError(22, "Invalid argument"), ValueError("bad"), IndexError("out of range"), KeyError("x")]
)
def test_any_error_reading_data_pt_names_the_file(tmp_path, monkeypatch, error):
    """What the probe saw (``OSError: [Errno 22] Invalid argument`` from a seek in a cut zip) and its siblings."""
    folder = _bots_checkpoint(tmp_path)

    def load(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(torch, "load", load)
    with pytest.raises(ValueError) as refused:
        check_resume_data_pt(folder)
    message = str(refused.value)
    assert f"resuming from {folder}, but {folder / 'data.pt'} cannot be read as a torch checkpoint" in message
    assert type(error).__name__ in message


def _edited(fingerprint: dict, path: str, value: Any) -> dict:
    keys = path.split(".")
    out = {**fingerprint}
    node = out
    for key in keys[:-1]:
        node[key] = {**node[key]}
        node = node[key]
    node[keys[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("selector", ["bots"], "'selector' is a list, not an object"),
        ("selector.hparams", "lam=0.1", "'selector.hparams' is 'lam=0.1' (a str), not an object"),
        ("selector.name", 7, "'selector.name' is 7 (a int), not a string"),
        ("reference_columns", None, "'reference_columns' is a NoneType, not an object"),
        ("reference_columns.names", "weak_pass_rate", "'reference_columns.names' is 'weak_pass_rate'"),
        ("reference_columns.names", [1, 2], "'reference_columns.names' holds something other than names"),
        ("pool", [N], "'pool' is a list, not an object"),
        ("pool.size", "12", "'pool.size' is '12' (a str), not an integer"),
        ("pool.task_ids_sha256", 5, "'pool.task_ids_sha256' is 5 (a int), not a string"),
        ("success", "acc", "'success' is a str, not an object"),
        ("success.threshold", "0.5", "'success.threshold' is '0.5' (a str), not a number"),
    ],
)
def test_a_hand_edited_fingerprint_is_a_value_error_naming_the_checkpoint(tmp_path, path, value, named):
    folder = _fingerprinted_checkpoint(tmp_path, _edited(_fingerprint(), path, value))
    everything = ["pool", "reference_columns", "hparams", "missing_fingerprint"]
    for current in (_fingerprint(), _fingerprint(pool=False)):  # the worker's check and the driver's
        with pytest.raises(ValueError) as refused:
            _resume(folder, current, accept=everything)
        message = str(refused.value)
        assert f"resuming from {folder}, but the fingerprint in its data.pt is malformed" in message
        assert f"fingerprint: malformed: {named}" in message and "no override: " in message


def test_a_fingerprint_that_is_not_an_object_is_named(tmp_path):
    folder = _fingerprinted_checkpoint(tmp_path, None)
    state = torch.load(folder / "data.pt", weights_only=False)
    state["_sampler_iter_state"]["sampler_state"]["fingerprint"] = "v1"
    torch.save(state, folder / "data.pt")
    with pytest.raises(ValueError, match=r"fingerprint: malformed: the fingerprint is a str, not an object"):
        _resume(folder, _fingerprint())
