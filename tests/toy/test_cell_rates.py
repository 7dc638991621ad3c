"""``python -m bots_verl.toy.cell_rates`` on the session's ``ci`` benchmark (``tests/conftest.py``, ``bench``): fresh
tasks of every cell, none of them in the pool or the held-out set, and each model's pass rates on them, a trained
checkpoint's apart from the starting policy's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots_verl.toy.arms import PROFILES
from bots_verl.toy.build_stages import split_prompts
from bots_verl.toy.cell_rates import cell_rates, main
from bots_verl.toy.evaluate import load_actor
from bots_verl.toy.likelihood import answer_stats, load_model
from bots_verl.toy.tasks import parse_prompt


def test_fresh_tasks_and_each_models_rates(bench, capsys) -> None:
    root, _ = bench
    data = root / "data"
    ckpt = root / "runs" / "bots_s0" / "ckpt" / f"global_step_{PROFILES['ci'].steps}"
    result = cell_rates(data, {"bots": ckpt}, per_cell=30)
    manifest = json.loads((data / "manifest.json").read_text())
    taken = {q for split in ("train_files", "val_files") for q in split_prompts(Path(manifest["artifacts"][split]))}
    measured = result["rates"]
    assert len(measured) >= 10
    for cell, prompts in result["tasks"].items():
        assert len(prompts) == len(set(prompts)) <= 30 and not set(prompts) & taken
        assert (cell in measured) == (len(prompts) >= 20)
    # a model's rate of a cell is its likelihood on those tasks, recomputed here (the ci run's 2 steps at lr 3e-5
    # move the rates by ~1e-9 only: the checkpoint is told apart by its own weights, not by a difference)
    policy_dir = manifest["artifacts"]["policy_models"]["0"]
    for name, model in (("step0", load_model(policy_dir)), ("bots", load_actor(ckpt, policy_dir))):
        for cell in list(measured)[:3]:
            p, _ = answer_stats(model, [parse_prompt(q) for q in result["tasks"][cell]])
            assert measured[cell][name] == pytest.approx(float(p.mean()), rel=1e-12)
    assert all(0.0 <= v <= 1.0 for r in measured.values() for v in r.values())

    assert main(["--data", str(data), "--per-cell", "20", f"bots={ckpt}"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("| cell | fresh tasks | step0 | bots |") and printed.count("\n") == 2 + len(
        result["tasks"]
    )
    assert main(["--data", str(data), "step0=" + str(ckpt)]) == 2  # step0 is the build's policy
    assert main(["--data", str(data), "--per-cell", "5"]) == 2
    assert main(["--data", str(data), "bots=" + str(root / "runs" / "bots_s0")]) == 1  # not a checkpoint
    assert "cell rates failed" in capsys.readouterr().err
