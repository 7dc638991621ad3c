"""Issue 59: a recipe whose actor cannot fit its GPUs is refused before Ray, in the dry run too (no GPU needed).

The 7B and 1.5B recipes are recorded with ``GPUS_PER_NODE`` and ``GPU_MEMORY_GIB`` set (``recipe_argv.record``: bash
only), composed, and checked with the entry point's own ``check_config``, which the dry run and the real launch both
run before Ray. The expected verdicts are the table of recipes/results/gpu_h200.md (one H200 measured, FSDP computed).
One 7B recipe also runs its real ``DRY_RUN=1`` path end to end.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from recipe_argv import RECIPES, compose, record

NO_DATA = Path("/nonexistent")  # the data files are not local: the dry run only warns about them
SEVEN_B = RECIPES / "run_math_qwen2.5_7b_bots.sh"
ONE_B = RECIPES / "run_code_qwen2.5_1.5b_random.sh"
# script, GPUs, card GiB, refused (the note's verdicts: 7B needs 4 GPUs of 80 GB, or 2 of 141 GB)
LAYOUTS = [
    (SEVEN_B, 8, 80, False),
    (SEVEN_B, 4, 80, False),
    (SEVEN_B, 2, 80, True),
    (SEVEN_B, 1, 80, True),
    (SEVEN_B, 2, 139, False),
    (SEVEN_B, 1, 139, True),
    (ONE_B, 8, 80, False),
    (ONE_B, 1, 80, False),
]


def _check(tmp_path: Path, script: Path, *overrides: str, **env: str):
    from bots_verl.main import check_config

    (argv,) = record(script, tmp_path, NO_DATA, *overrides, **env).values()
    (config,) = compose([argv])
    return check_config(config).section


@pytest.mark.parametrize(("script", "gpus", "card", "refused"), LAYOUTS)
def test_a_layout_that_cannot_fit_is_refused_naming_the_figures(tmp_path, script, gpus, card, refused):
    env = {"GPUS_PER_NODE": str(gpus), "GPU_MEMORY_GIB": str(card)}
    if not refused:
        assert _check(tmp_path, script, **env).dry_run
        return
    with pytest.raises(ValueError) as refusal:
        _check(tmp_path, script, **env)
    message = str(refusal.value)
    assert (
        f"Qwen2.5-7B on {gpus} GPU" in message and f"{float(card):.1f} GiB cards (bots.gpu_memory.card_gib)" in message
    )
    assert "per GPU the training phase" in message and "recipes/results/gpu_h200.md" in message
    assert "param_offload=true" in message and "GPU_MEMORY_CHECK=0" in message and "GPUS_PER_NODE" in message


def test_offload_an_explicit_override_or_an_unknown_model_start(tmp_path, caplog):
    one_gpu = {"GPUS_PER_NODE": "1"}
    offload = "actor_rollout_ref.actor.fsdp_config.param_offload=true"
    assert _check(tmp_path / "offload", SEVEN_B, offload, **one_gpu).dry_run
    with caplog.at_level(logging.WARNING, logger="bots_verl.config.gpu_memory"):
        assert _check(tmp_path / "override", SEVEN_B, GPU_MEMORY_CHECK="off", **one_gpu).dry_run
    assert "cannot fit" in caplog.text and "starting anyway" in caplog.text
    # a model the measurement does not cover: nothing is said (its activations were never measured)
    assert _check(tmp_path / "other", SEVEN_B, MODEL_PATH="Qwen/Qwen2.5-14B-Instruct", **one_gpu).dry_run


def test_settings_other_than_the_measured_ones_give_a_lower_bound(tmp_path):
    # gradient checkpointing off: the activations were not measured so; without them 7B on 1 GPU still cannot fit
    with pytest.raises(ValueError, match=r"lower bounds: the activations are left out.*checkpointing=False"):
        _check(tmp_path, SEVEN_B, "actor_rollout_ref.model.enable_gradient_checkpointing=False", GPUS_PER_NODE="1")


@pytest.mark.parametrize(
    ("knob", "raw"), [("GPU_MEMORY_GIB", "79.5"), ("GPU_MEMORY_GIB", "0"), ("GPU_MEMORY_CHECK", "n")]
)
def test_a_bad_knob_stops_the_script_naming_it(tmp_path, knob, raw):
    with pytest.raises(RuntimeError, match=rf"{knob}='{raw}'"):
        record(SEVEN_B, tmp_path, NO_DATA, **{knob: raw})


def test_the_real_dry_run_refuses_7b_on_one_gpu(tmp_path):
    env = {**os.environ, "DRY_RUN": "1", "PYTHON": sys.executable, "RUN_ROOT": str(tmp_path), "DATA_DIR": str(NO_DATA)}
    env |= {"GPUS_PER_NODE": "1", "GPU_MEMORY_GIB": "80"}
    proc = subprocess.run(
        ["bash", str(SEVEN_B)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=170, check=False
    )
    assert proc.returncode != 0 and "BOTS dry run: config OK" not in proc.stdout
    assert "GPU memory: Qwen2.5-7B on 1 GPU cannot fit its 80.0 GiB cards" in proc.stderr
    assert not any(tmp_path.iterdir()), "a refused dry run creates nothing"
