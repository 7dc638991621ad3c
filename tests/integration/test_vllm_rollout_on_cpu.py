"""BOTS through verl's vLLM rollout, on vLLM's CPU backend (issue 49): the GPU path's rollout engine, run for real.

Needs vLLM's CPU build (``make vllm-cpu``), so it is marked ``vllm_cpu`` and skipped elsewhere (CI); ``make
test-vllm-cpu`` runs it with ``.venv-vllm``'s Python and ``BOTS_REQUIRE_VLLM_CPU=1``, under which a Python without that
build fails every test instead of skipping it (a run that skipped everything would pass and check nothing).

The runs are the toy testbed's (the shipped build ``full_s0``: its trained policy, head size 32, which vLLM's CPU
attention takes), BOTS, seed 0, 2 steps, as ``python -m bots_verl.main trainer.device=cpu ...`` with
``actor_rollout_ref.rollout.name=vllm``: verl's ``vLLMHttpServer`` generates, verl syncs the FSDP actor's weights into
it over shared memory before every step, and the rewards reach the posterior. verl recomputes the old log-probs
(``bypass_mode=false``), so its ``training/rollout_probs_diff_*`` metrics compare the probabilities vLLM sampled with
against the actor's: vLLM starts on random (``dummy``) weights, so a sync that did not happen would show. The same run
with the ``hf`` rollout is the comparison.
"""

from __future__ import annotations

import dataclasses
import json
import os
from importlib import metadata
from pathlib import Path

import pytest
from integration_helpers import read_metrics, run_main, run_python, tail

from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state


def _vllm_cpu_build() -> bool:
    try:
        return metadata.version("vllm").endswith("+cpu")
    except metadata.PackageNotFoundError:
        return False


# set by `make test-vllm-cpu`: there the build is the point, so its absence is a failure, not a skip
REQUIRED = os.environ.get("BOTS_REQUIRE_VLLM_CPU") == "1"

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.slow,
    pytest.mark.skipif(
        not REQUIRED and not _vllm_cpu_build(), reason="needs vLLM's CPU build (make vllm-cpu; .venv-vllm)"
    ),
]


@pytest.fixture(scope="module", autouse=True)
def _the_build_is_here():
    """Under ``BOTS_REQUIRE_VLLM_CPU=1``, fail before any run starts when this Python has no vLLM CPU build."""
    if not _vllm_cpu_build():
        pytest.fail(
            "BOTS_REQUIRE_VLLM_CPU=1 but this Python has no vLLM CPU build (a vllm package whose version ends in "
            "'+cpu'): build it with `make vllm-cpu` and run these tests with .venv-vllm/bin/python",
            pytrace=False,
        )


STEPS = 2


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    from bots_verl.toy.arms import PROFILES
    from bots_verl.toy.prepare import prepare

    manifest = prepare(tmp_path_factory.mktemp("toy") / "data", seed=0, profile="full", jobs=1)
    return manifest, dataclasses.replace(PROFILES["headline"], steps=STEPS, eval_every=STEPS)


def _run(testbed, work: Path, engine: str, *extra: str, env: dict[str, str] | None = None):
    from bots_verl.toy.arms import training_overrides

    manifest, profile = testbed
    overrides = [
        *training_overrides(manifest, profile, "bots", 0, work),
        f"actor_rollout_ref.rollout.name={engine}",
        "algorithm.rollout_correction.bypass_mode=false",
        *extra,
    ]
    return run_main(overrides, cwd=work, timeout=1500, attach=env)


@pytest.fixture(scope="module")
def runs(testbed, tmp_path_factory) -> dict[str, Path]:
    out = {}
    for engine in ("vllm", "hf"):
        work = tmp_path_factory.mktemp(engine)
        proc = _run(testbed, work, engine)
        assert proc.returncode == 0, tail(proc)
        out[engine] = work
    return out


def test_vllm_samples_with_the_actors_weights_at_every_step(runs):
    metrics = read_metrics(runs["vllm"] / "run")
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for step, m in metrics.items():
        # both float32; vLLM on its random start weights would differ from the actor by far more
        assert m["training/rollout_probs_diff_valid"] == 1, m
        assert m["training/rollout_probs_diff_max"] < 0.05, (step, m)
        assert m["training/rollout_actor_probs_pearson_corr"] > 0.99, (step, m)


def test_every_vllm_rollout_reaches_the_posterior_as_its_reward(runs, testbed):
    _, profile = testbed
    rows = profile.prompts * profile.n
    metrics = read_metrics(runs["vllm"] / "run")
    for step, m in metrics.items():
        assert m["bots/rollouts"] == rows and m["bots/posterior_rollouts_total"] == rows * step
        # the toy reward is 0 or 1 and bots.success.rule=acc: the posterior's successes are verl's scores
        assert m["bots/batch/success_rate"] == pytest.approx(m["critic/score/mean"], abs=1e-6), m
    assert 0 < sum(m["bots/batch/success_rate"] for m in metrics.values())  # the trained policy solves some
    state = checkpoint_sampler_state(runs["vllm"] / "ckpt" / f"global_step_{STEPS}" / "data.pt")
    assert state["updates"] == STEPS and state["attempts"] == rows * STEPS


def test_the_first_batch_is_the_same_whichever_engine_generates(runs):
    """Selection reads the posterior and the seed, never the engine: step 1 (before any evidence) agrees exactly."""
    logs = {
        engine: checkpoint_sampler_state(work / "ckpt" / f"global_step_{STEPS}" / "data.pt")["dispatch_log"]
        for engine, work in runs.items()
    }
    assert logs["vllm"][0] == logs["hf"][0]


def test_the_plugin_lets_vllms_cpu_backend_take_new_weights_and_without_it_it_cannot(tmp_path):
    """The defect the plugin fixes, kept visible: vLLM's CPU linear layers drop their weight after loading, so the
    model's ``load_weights`` fails; with the plugin (active under ``VERL_PLATFORM=cpu``) the reload takes the new
    weights: vLLM's greedy tokens then equal those of a transformers model holding the same new weights.

    Run in vLLM alone: through verl the failed sync does not end the run (verl's sender waits on the receiver for good).
    """
    model = Path(__file__).resolve().parents[2] / "recipes" / "toy" / "artifacts" / "full_s0" / "models" / "policy"
    script = [str(Path(__file__).with_name("vllm_reload.py")), str(model)]
    plain = run_python(script, cwd=tmp_path, timeout=600, attach={"VERL_PLATFORM": ""})
    assert plain.returncode != 0
    # which layer meets it first depends on the loader's order: a fused one has lost its weight_loader, a plain one
    # its shape
    said = plain.stdout + plain.stderr
    assert "into parameter (torch.Size([0]))" in said or "has no attribute 'weight_loader'" in said, tail(plain)
    synced = run_python(script, cwd=tmp_path, timeout=600, attach={"VERL_PLATFORM": "cpu"})
    assert synced.returncode == 0, tail(synced)
    tokens = json.loads(synced.stdout.strip().splitlines()[-1])
    # the two engines agree on the original weights, and the halved weights change the reference's tokens (so a
    # reload that took nothing cannot pass), and vLLM after the reload generates what the halved weights generate
    # (so garbled or partly loaded weights cannot pass either)
    assert tokens["before"] == tokens["reference_before"], tokens
    assert tokens["reference_after"] != tokens["reference_before"], tokens
    assert tokens["after"] == tokens["reference_after"], tokens
