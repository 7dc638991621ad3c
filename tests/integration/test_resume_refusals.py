"""Resumes that would silently restart the BOTS posterior from the prior are refused before any worker starts.

Fast: no Ray, no model. The checkpoints are real ``StatefulDataLoader`` states saved with ``torch.save`` as verl's
``_save_checkpoint`` does: one from plain verl's sampler, one from :class:`BOTSSampler` (with its posterior service
in-process instead of in a Ray actor). ``test_e2e_on_cpu.py`` checks the missing-``data.pt`` refusal in a real run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader

from bots_verl.integration.actor import PosteriorService
from bots_verl.integration.sampler import BOTSSampler
from bots_verl.integration.trainer import BOTSTrainer, check_resume_data_pt

N, B, STEP = 12, 3, 2


class _InProcessSampler(BOTSSampler):
    """BOTSSampler calling a PosteriorService in this process instead of a Ray actor."""

    def _call(self, method: str, *args: Any) -> Any:
        return getattr(self.actor, method)(*args)


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
    sampler = _InProcessSampler(PosteriorService("random", N, seed=1), N, B, [f"t{i}" for i in range(N)])
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
    assert check_resume_data_pt(folder) is None


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
