"""The toy benchmark's ``oracle`` arm (issue 38, item 1): one real 2-step GRPO run of the ``ci`` profile through
``python -m bots_verl.main`` with the benchmark's own overrides, then checks that every selection saw the weights
that generated its step's rollouts and took the tasks nearest p* = 0.5 of their true pass rates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bots_verl import runlog
from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.toy import rollout_truth
from bots_verl.toy.arms import PROFILES, VARIANTS, arm_settings, training_overrides
from bots_verl.toy.evaluate import load_actor
from bots_verl.toy.likelihood import answer_stats, load_model
from bots_verl.toy.rollout_truth import RolloutServerTruth, exact_pass_rates, pool_problems

pytestmark = pytest.mark.slow

PROFILE = PROFILES["ci"]


@pytest.fixture(scope="module")
def data(ci_data: Path) -> Path:
    return ci_data


@pytest.fixture(scope="module")
def run(data: Path, ray_attach) -> Path:
    """The oracle arm's seed-0 run of the ci profile; every step's checkpoint is kept (the benchmark keeps the last).

    It attaches to the session's Ray cluster (one cluster start and stop saved), as the benchmark's runs attach to
    its own clusters."""
    from bots_verl.verl_cpu.smoke import run_training

    mp = pytest.MonkeyPatch()
    try:
        for key, value in ray_attach().items():
            mp.setenv(key, value)
        manifest = json.loads((data / "manifest.json").read_text())
        run_dir = data.parent / "runs" / "oracle_s0"
        run_dir.mkdir(parents=True)
        run_training(training_overrides(manifest, PROFILE, "oracle", 0, run_dir), run_dir, run_dir / "train.log", 900)
    finally:
        mp.undo()
    return run_dir


def _weights(data: Path, run_dir: Path, step: int):
    model_dir = data / "models" / "policy"
    return load_model(model_dir) if step == 0 else load_actor(run_dir / "ckpt" / f"global_step_{step}", model_dir)


def test_the_arm_is_the_core_oracle_with_the_toy_truth_source() -> None:
    selector, extra = arm_settings("oracle")
    assert selector == "pass_rate_oracle" and VARIANTS["oracle"][1] == extra
    assert any("truth_source=bots_verl.toy.rollout_truth:RolloutServerTruth" in o for o in extra)


def test_exact_pass_rates_are_the_likelihood_evaluation(data: Path) -> None:
    problems = pool_problems(data / "train.parquet", response_length=10)
    model = load_model(data / "models" / "policy")
    reference, _ = answer_stats(model, problems)
    np.testing.assert_allclose(exact_pass_rates(model, problems, batch_size=16), reference, atol=1e-6, rtol=0)
    hot = exact_pass_rates(model, problems, temperature=2.0)
    assert not np.allclose(hot, reference)
    with pytest.raises(ValueError, match="max_response_length"):
        pool_problems(data / "train.parquet", response_length=2)
    with pytest.raises(ValueError, match="the selector's pool has"):
        RolloutServerTruth(len(problems) + 1, data=str(data / "train.parquet"))
    # the per-step cost, measured as the server computes it
    args = ["--data", str(data / "train.parquet"), "--model", str(data / "models" / "policy"), "--repeat", "1"]
    assert rollout_truth.main(args) == 0


def test_every_selection_sees_the_weights_that_generate_its_rollouts(data: Path, run: Path) -> None:
    """At step t the selector's truth is the pass rates of the weights after step t - 1 (the server's weight version
    t - 1), to float rounding; it differs from both neighbours' by far more."""
    metrics = runlog.metrics_by_step(run / "run")
    problems = pool_problems(data / "train.parquet")
    truth_of = {s: exact_pass_rates(_weights(data, run, s), problems) for s in range(PROFILE.steps + 1)}
    for step in range(1, PROFILE.steps + 1):
        logged = metrics[step]
        assert logged["bots/oracle/truth_version"] == step - 1
        assert 0.0 <= logged["bots/batch/effective_task_ratio"] <= 1.0
        assert 0.0 < logged["bots/oracle/truth_ms"] <= logged["bots/select_ms"]
        # the checkpoint of step t holds the truth its selection used
        state = checkpoint_sampler_state(run / "ckpt" / f"global_step_{step}" / "data.pt")
        extra = state["selector_state"]["extra"]
        truth = np.asarray(extra["truth"])
        assert extra["truth_version"] == step - 1
        np.testing.assert_allclose(truth, truth_of[step - 1], atol=1e-7, rtol=0)
        for other in {step - 2, step} & set(truth_of):
            assert np.abs(truth - truth_of[other]).max() > 1e-6, f"step {step} matches the weights of step {other}"
        # the step trained the B tasks nearest 0.5 of that truth
        logged_step, positions = state["dispatch_log"][-1]
        assert logged_step == step and len(positions) == PROFILE.prompts
        gap = np.abs(truth - 0.5)
        assert gap[positions].max() <= np.delete(gap, positions).min()
        assert logged["bots/oracle/selected_pass_rate"] == pytest.approx(truth[positions].mean())
    meta = runlog.read_meta(run / "run")
    assert meta["method"] == "oracle"
