"""The GPU actor benchmark (bots_verl/speed/gpu_actor_memory.py): its CPU parts here, the measurement on a GPU.

On CPU: the models it builds have the recipes' parameter counts (built on the meta device, no memory), its chunked
in-place log-softmax gives log_softmax's values and gradients, and its FSDP table from the measured inputs gives the
verdicts of recipes/results/gpu_h200.md. The ``gpu`` test runs the benchmark itself (skipped without CUDA).
"""

from __future__ import annotations

import pytest
import torch

from bots_verl.config.gpu_memory import MEASURED, QWEN25_1_5B, QWEN25_7B, ModelShape
from bots_verl.speed import gpu_actor_memory as bench


@pytest.mark.parametrize("shape", [QWEN25_1_5B, QWEN25_7B], ids=lambda s: s.name)
def test_the_built_models_are_the_recipes_models(shape):
    model = bench.build_model(shape, "meta")
    assert sum(p.numel() for p in model.parameters()) == shape.params
    assert model.config._attn_implementation == "sdpa" and model.model.gradient_checkpointing
    assert model.lm_head.weight.dtype == torch.bfloat16 and model.training
    assert (model.lm_head.weight is model.model.embed_tokens.weight) is shape.tie_word_embeddings


def test_the_chunked_log_softmax_matches_log_softmax_and_its_gradient(monkeypatch):
    monkeypatch.setattr(bench, "CHUNK", 7)  # several chunks and a ragged last one
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(30, 16, generator=gen)
    weight = torch.randn(50, 16, generator=gen, requires_grad=True)
    targets = torch.randint(0, 50, (30,), generator=gen)
    coef = torch.randn(30, generator=gen)

    ours = bench.token_log_probs(hidden @ weight.T, targets)
    (ours * coef).sum().backward()
    ours_grad, weight.grad = weight.grad.clone(), None
    reference = torch.log_softmax(hidden @ weight.T, dim=-1).gather(1, targets[:, None]).squeeze(1)
    (reference * coef).sum().backward()
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours_grad, weight.grad, rtol=1e-4, atol=1e-4)


def test_the_fsdp_table_from_the_measured_inputs_gives_the_notes_verdicts():
    lines = bench.fsdp_table(dict(MEASURED), (80.0, 139.8))
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in lines[2:]}
    assert len(rows) == 8
    # the note's table: everything fits but 7B on 2 GPUs (80 GB: no; 141 GB: yes) and on 1 (no, no)
    for (size, gpus), line in rows.items():
        cells = [c.strip() for c in line.strip("|").split("|")]
        train_fits, rollout_fits = cells[3], cells[5]
        if size == "Qwen2.5-7B" and gpus == "2":
            assert (train_fits, rollout_fits) == ("no", "no / yes")
        elif size == "Qwen2.5-7B" and gpus == "1":
            assert (train_fits, rollout_fits) == ("no", "no / no")
        else:
            assert (train_fits, rollout_fits) == ("yes", "yes / yes"), line


def test_the_measurement_runs_its_steps_on_a_tiny_model_on_cpu():
    # the GPU run's code path (build, train step with the in-place gradient, log-prob pass, timing) at a tiny size;
    # activations are read from CUDA's allocator only, so None here
    tiny = ModelShape("tiny", 64, 128, 2, 4, 2, 300, False)
    (row,) = bench.measure(tiny, "cpu", [(2, 16)], warmup=0, repeat=1)
    assert row["case"] == "2 x 16" and row["train_s"] > 0 and row["log_prob_s"] > 0
    assert row["activations_gib"] is None


@pytest.mark.gpu  # tests/conftest.py skips it without a CUDA GPU
def test_the_benchmark_measures_on_a_gpu(capsys):
    bench.main(["--sizes", "1.5b", "--warmup", "1", "--repeat", "1"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| Qwen2.5-1.5B | ")]
    measured = [r for r in rows if " x " in r]
    assert [r.split("|")[2].strip() for r in measured] == ["2 x 12,288", "6 x 4,096"]
    assert all(float(r.split("|")[5]) > 0 for r in measured)  # activations, GiB
    assert len(rows) - len(measured) == 4  # the FSDP table at 8/4/2/1 GPUs
