"""BOTS through verl's vLLM rollout, on vLLM's CPU backend (issue 49): the GPU path's rollout engine, run for real.

Needs vLLM's CPU build (``make vllm-cpu``), so it is marked ``vllm_cpu`` and skipped elsewhere (CI):
``.venv-vllm/bin/python -m pytest tests/integration/test_vllm_rollout_on_cpu.py`` (``make test-vllm-cpu``).

Each run is ``python -m bots_verl.main trainer.device=cpu actor_rollout_ref.rollout.name=vllm`` on the toy task, with
a model wide enough for vLLM's CPU attention (head size 32): verl's ``vLLMHttpServer`` generates, verl syncs the FSDP
actor's weights into it over shared memory before every step, and the rewards reach the posterior. verl recomputes
the old log-probs (``bypass_mode=false``) so that its ``training/rollout_probs_diff_*`` metrics compare what vLLM
generated with against the actor: vLLM starts on random (``dummy``) weights, so a sync that did not happen would show.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from integration_helpers import read_metrics, run_main, tail

from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.verl_cpu.addition_task import build_toy, toy_overrides


def _vllm_cpu_build() -> bool:
    try:
        return metadata.version("vllm").endswith("+cpu")
    except metadata.PackageNotFoundError:
        return False


pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.slow,
    pytest.mark.skipif(not _vllm_cpu_build(), reason="needs vLLM's CPU build (make vllm-cpu; .venv-vllm)"),
]

PROMPTS, N, STEPS = 4, 4, 2


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, str]:
    # hidden 128 over 4 heads: head size 32, the smallest vLLM's CPU attention takes
    return build_toy(tmp_path_factory.mktemp("toy"), hidden_size=128)


def _run(toy: dict[str, str], work: Path, steps: int, *extra: str, env: dict[str, str] | None = None):
    overrides = [
        *toy_overrides(toy, prompts=PROMPTS, n=N),
        "actor_rollout_ref.rollout.name=vllm",
        f"trainer.total_training_steps={steps}",
        f"trainer.default_local_dir={work / 'ckpt'}",
        f"bots.run_log.dir={work / 'run'}",
        *extra,
    ]
    return run_main(overrides, cwd=work, timeout=1500, attach=env)


@pytest.fixture(scope="module")
def vllm_run(toy, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("vllm_run")
    proc = _run(toy, work, STEPS, "algorithm.rollout_correction.bypass_mode=false", f"trainer.save_freq={STEPS}")
    assert proc.returncode == 0, tail(proc)
    return work


def test_vllm_generates_with_the_actors_weights_at_every_step(vllm_run):
    metrics = read_metrics(vllm_run / "run")
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for step, m in metrics.items():
        # vLLM's log-probs of its own samples against the FSDP actor's (both float32): random weights differ by far more
        assert m["training/rollout_probs_diff_valid"] == 1, m
        assert m["training/rollout_probs_diff_max"] < 0.05, (step, m)
        assert m["training/rollout_actor_probs_pearson_corr"] > 0.99, (step, m)


def test_every_vllm_rollout_reaches_the_posterior(vllm_run):
    metrics = read_metrics(vllm_run / "run")
    for step, m in metrics.items():
        assert m["bots/rollouts"] == PROMPTS * N and m["bots/posterior_rollouts_total"] == PROMPTS * N * step
        assert m["bots/dispatched"] == PROMPTS
        # successes are the toy reward's: the posterior's share equals verl's mean score of the same rollouts
        assert m["bots/batch/success_rate"] == pytest.approx(m["critic/score/mean"], abs=1e-6), m
    state = checkpoint_sampler_state(vllm_run / "ckpt" / f"global_step_{STEPS}" / "data.pt")
    assert state["updates"] == STEPS and state["attempts"] == PROMPTS * N * STEPS


def test_without_the_weight_sync_plugin_vllms_cpu_backend_cannot_take_verls_weights(toy, tmp_path):
    """The defect the plugin fixes, kept visible: vLLM's CPU linear layers drop their weight after loading."""
    # vLLM loads only the plugins VLLM_PLUGINS names: none
    proc = _run(toy, tmp_path, 1, env={"VLLM_PLUGINS": "none"})
    assert proc.returncode != 0
    assert "has no attribute 'weight_loader'" in proc.stdout + proc.stderr, tail(proc)
