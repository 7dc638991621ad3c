"""GPU end-to-end smoke run of ``python -m bots_verl.main`` with vLLM (skipped without CUDA; needs vllm and a local
model). The same flow runs in CI on the CPU backend (``test_e2e_on_cpu.py``); this one covers vLLM's rollout.

Set ``BOTS_SMOKE_MODEL=/path/to/Qwen2.5-0.5B-Instruct``. Trains 2 steps with a checkpoint, then resumes to step 3
and checks the run log and that the resumed run restored the posterior (``bots/steps`` continues at 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from integration_helpers import make_pool

MODEL = os.environ.get("BOTS_SMOKE_MODEL")


@pytest.mark.gpu  # tests/conftest.py skips it without a CUDA GPU
@pytest.mark.slow
@pytest.mark.skipif(not MODEL, reason="set BOTS_SMOKE_MODEL to a local model directory")
def test_smoke_train_and_resume(tmp_path):
    data = tmp_path / "train.parquet"
    make_pool(data, 64)
    common = [
        f"data.train_files={data}",
        f"data.val_files={data}",
        f"actor_rollout_ref.model.path={MODEL}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "data.train_batch_size=8",
        "data.max_prompt_length=64",
        "data.max_response_length=64",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "trainer.n_gpus_per_node=1",
        "trainer.save_freq=2",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        f"trainer.default_local_dir={tmp_path / 'ckpt'}",
        "bots.reference_columns=[weak_pass_rate,strong_pass_rate]",
    ]
    for steps, run in ((2, "a"), (3, "b")):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bots_verl.main",
                *common,
                f"trainer.total_training_steps={steps}",
                f"bots.run_log.dir={tmp_path / run}",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    last = [x for x in lines if "bots/steps" in x["data"]][-1]
    assert last["step"] == 3 and last["data"]["bots/steps"] == 3
    assert (tmp_path / "a" / "meta.json").exists()
