"""The per-GPU memory model of verl's FSDP actor (bots_verl/config/gpu_memory.py) against the H200 note's table.

The expected rows are the table of recipes/results/gpu_h200.md as the research note computed it (one H200 measured,
FSDP computed): the model here must give the same verdict for every row, both phases and both cards, and figures
within 0.25 GiB of the note's (its split of the gathered units is not given; ours is 6 bytes x root unit + one layer).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bots_verl.config.gpu_memory import (
    DEFAULT_CARD_GIB,
    QWEN25_1_5B,
    QWEN25_7B,
    card_memory_gib,
    estimate,
    identify_model,
)

H200_GIB = 139.8  # what torch reported for the measured H200 ("141 GB")
CARDS = {"80 GB": 80.0, "141 GB": H200_GIB}
# size, GPUs, training phase GiB, fits 80 GB (training), rollout phase fits 80 GB, rollout phase fits 141 GB
NOTE_ROWS = [
    (QWEN25_1_5B, 8, 17.8, True, True, True),
    (QWEN25_1_5B, 1, 38.0, True, True, True),
    (QWEN25_7B, 8, 37.8, True, True, True),
    (QWEN25_7B, 4, 52.0, True, True, True),
    (QWEN25_7B, 2, 80.3, False, False, True),
    (QWEN25_7B, 1, 137.1, False, False, False),
]


def test_the_shapes_have_the_published_parameter_counts():
    # Qwen2.5-1.5B(-Instruct): 1,543,714,304; Qwen2.5-7B(-Instruct): 7,615,616,512 (their model cards' safetensors)
    assert QWEN25_1_5B.params == 1_543_714_304
    assert QWEN25_7B.params == 7_615_616_512


@pytest.mark.parametrize(("shape", "gpus", "training", "train_fits_80", "rollout_80", "rollout_141"), NOTE_ROWS)
def test_the_model_reproduces_the_notes_verdicts(shape, gpus, training, train_fits_80, rollout_80, rollout_141):
    at_80 = estimate(shape, gpus, CARDS["80 GB"])
    at_141 = estimate(shape, gpus, CARDS["141 GB"])
    assert at_80.training_gib == pytest.approx(training, abs=0.25)
    assert (at_80.training_gib <= 80.0) is train_fits_80
    assert (at_80.rollout_gib <= 80.0) is rollout_80
    assert (at_141.rollout_gib <= H200_GIB) is rollout_141
    # a layout fits where both phases do; the 141 GB card also holds every training phase but the 1-GPU 7B's rollout
    assert at_80.fits is (train_fits_80 and rollout_80)
    assert at_141.fits is rollout_141
    # the same verdicts for 80 GB read as 10^9 bytes (74.5 GiB) and 141 GB as 10^9 bytes (131.3 GiB)
    assert estimate(shape, gpus, 80e9 / 2**30).fits is at_80.fits
    assert estimate(shape, gpus, 141e9 / 2**30).fits is at_141.fits


def test_what_each_setting_moves():
    base = estimate(QWEN25_7B, 8, 80.0)
    # no measured activations: 13.4 GiB less in training, the rollout phase holds none
    bare = estimate(QWEN25_7B, 8, 80.0, activations_gib=0.0)
    assert base.training_gib - bare.training_gib == pytest.approx(13.4)
    assert bare.rollout_gib == base.rollout_gib
    # vLLM awake while the actor trains adds its share of the card; vLLM on other GPUs takes none
    awake = estimate(QWEN25_7B, 8, 80.0, vllm_sleeps=False)
    assert awake.training_gib - base.training_gib == pytest.approx(0.6 * 80.0) and not awake.fits
    assert estimate(QWEN25_7B, 2, 80.0, gpu_memory_utilization=None).rollout_gib is None
    # the sharded state halves with twice the GPUs: 16 bytes/param in training, 12 in the rollout
    half = estimate(QWEN25_7B, 16, 80.0)
    assert base.training_gib - half.training_gib == pytest.approx(16 * QWEN25_7B.params / 16 / 2**30)
    assert base.rollout_gib - half.rollout_gib == pytest.approx(12 * QWEN25_7B.params / 16 / 2**30)


def test_only_the_recipes_models_are_identified(tmp_path: Path):
    for name in ("Qwen/Qwen2.5-7B-Instruct", "qwen/qwen2.5-7b", "/models/Qwen2.5-7B-Instruct/"):
        assert identify_model(name) is QWEN25_7B
    assert identify_model("Qwen/Qwen2.5-1.5B-Instruct") is QWEN25_1_5B
    for name in ("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-Math-7B", "/m/qwen7b", "", None):
        assert identify_model(name) is None
    # a local directory is identified by its config.json, whatever its name
    local = tmp_path / "my_model"
    local.mkdir()
    config = {
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    }
    (local / "config.json").write_text(json.dumps(config))
    assert identify_model(str(local)) is QWEN25_7B
    (local / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 14}))
    assert identify_model(str(local)) is None
    named = tmp_path / "Qwen2.5-7B-Instruct"  # a local copy named like the 7B but holding another model
    named.mkdir()
    (named / "config.json").write_text(json.dumps({**config, "hidden_size": 2048}))
    assert identify_model(str(named)) is None


NVIDIA_SMI = """#!/usr/bin/env bash
[[ "$*" == "--query-gpu=memory.total --format=csv,noheader,nounits" ]] || exit 9
printf '143771\\n81559\\n'
"""


def test_the_card_comes_from_the_setting_then_nvidia_smi_then_the_default(tmp_path: Path, monkeypatch):
    # a stand-in nvidia-smi (this machine has no GPU): two cards, the smaller one counts
    (tmp_path / "nvidia-smi").write_text(NVIDIA_SMI)
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert card_memory_gib(None) == (pytest.approx(81559 / 1024), "nvidia-smi")
    assert card_memory_gib(40.0) == (40.0, "bots.gpu_memory.card_gib")
    (tmp_path / "nvidia-smi").write_text("#!/usr/bin/env bash\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    gib, source = card_memory_gib(None)
    assert gib == DEFAULT_CARD_GIB == 80.0 and "GPU_MEMORY_GIB" in source
