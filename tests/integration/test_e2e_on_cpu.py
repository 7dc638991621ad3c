"""BOTS inside verl's real trainer, end to end on the CPU backend: nothing faked.

Every run is ``python -m bots_verl.main trainer.device=cpu ...`` on the toy task (``bots_verl.verl_cpu.addition_task``):
verl's real ``init()`` and ``fit()`` with Ray, TransferQueue, an FSDP2 actor and reference model, the ``hf`` rollout
server, the reward loop, the replay buffer and checkpoints. The runs are shared between the assertions (module fixtures)
and attach to the session's Ray cluster (``ray_attach``) to keep CI time modest:

- **D**: 2 GRPO steps of 6 prompts x 4 rollouts with a mini-batch of 4 prompts, so verl pads every step with 8
  synthetic rows; KL loss against a reference model; DAPO (``algorithm.filter_groups`` on ``acc``: the toy
  benchmark's ``bots_ds`` arm) refilling the groups it discards; checkpoints at both steps.
- **K**: D's settings, its posterior actor killed once the step-1 checkpoint is written; a relative
  ``bots.run_log.dir``.
- **M**: K's checkpoint with ``data.pt`` removed, resumed: refused by the driver before Ray starts.
- **R**: K's step-1 checkpoint resumed in a new process to step 2, compared with D bit for bit (selections,
  posterior, weights): the resume-identity check across a kill, on the path with padding, a reference model and
  refills; and every rollout generated across the kill reached the posterior once, no padding row. (R was two runs
  before: a 4-step K resumed to step 4, and D resumed in a new process, each a minute of CI's two cores.)
- **DX**: D's step-1 checkpoint resumed with DAPO capped at 2 generation batches per step
  (``algorithm.filter_groups.max_num_gen_batches=2``) on the same pool with answers no response can hold, so every
  group comes back all-0: step 2 must stop the run with the cap's error (verl 0.9.1 alone refills it for ever), and
  leave step 1's checkpoint and posterior as they were.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from integration_helpers import ROOT, read_metrics, run_main, run_python, tail

from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.verl_cpu.addition_task import build_toy, toy_overrides
from bots_verl.verl_cpu.smoke import compare_checkpoints

pytestmark = pytest.mark.slow

PROMPTS, N, STEPS = 6, 4, 2
ROWS = PROMPTS * N
# mini-batch of 4 prompts -> verl needs a multiple of 4 * N = 16 rows: 24 rollouts + 8 padding rows per step
PADDING = 8


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, str]:
    return build_toy(tmp_path_factory.mktemp("toy"))


def _overrides(toy: dict[str, str], *extra: str) -> list[str]:
    return [
        *toy_overrides(toy, prompts=PROMPTS, n=N),
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        *extra,
    ]


DAPO = ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=acc")


def _dapo_overrides(toy: dict[str, str], ckpt: Path, run_log: str | None) -> list[str]:
    """D's settings, checkpointed into ``ckpt`` at every step, its run log in ``run_log`` (None: none)."""
    log = [] if run_log is None else [f"bots.run_log.dir={run_log}"]
    return _overrides(
        toy,
        *DAPO,
        f"trainer.total_training_steps={STEPS}",
        "trainer.save_freq=1",
        f"trainer.default_local_dir={ckpt}",
        *log,
    )


@pytest.fixture(scope="module")
def dapo_run(toy, tmp_path_factory, ray_attach) -> Path:
    """Run D: ``work/ckpt`` and the run log ``work/run``."""
    work = tmp_path_factory.mktemp("run_d")
    proc = run_main(_dapo_overrides(toy, work / "ckpt", str(work / "run")), cwd=work, attach=ray_attach())
    assert proc.returncode == 0, tail(proc)
    return work


@pytest.fixture(scope="module")
def kill_and_resume(toy, tmp_path_factory, ray_attach) -> dict:
    """Runs K (posterior killed after the step-1 checkpoint; run log ``runs/k`` relative to its launch directory),
    M (data.pt missing) and R (K resumed to step 2; run log ``runs/r``)."""
    work = tmp_path_factory.mktemp("run_k")
    ckpt = work / "ckpt"
    killed = run_python(
        [str(ROOT / "tests" / "integration" / "kill_posterior_run.py"), "1", str(ckpt)]
        + _dapo_overrides(toy, ckpt, "runs/k"),
        cwd=work,
        attach=ray_attach(),
    )
    latest_after_kill = (ckpt / "latest_checkpointed_iteration.txt").read_text().strip()
    missing_dir = work / "ckpt_without_data_pt"
    shutil.copytree(ckpt, missing_dir)
    (missing_dir / "global_step_1" / "data.pt").unlink()
    missing = run_main(_dapo_overrides(toy, missing_dir, None), cwd=work)
    resumed = run_main(_dapo_overrides(toy, ckpt, str(work / "runs" / "r")), work, attach=ray_attach())
    return {"work": work, "killed": killed, "latest": latest_after_kill, "missing": missing, "resumed": resumed}


def test_killed_posterior_actor_stops_the_run_with_posterior_lost_error(kill_and_resume):
    killed = kill_and_resume["killed"]
    assert killed.returncode != 0
    assert "killed posterior actor" in killed.stdout, tail(killed)
    assert "PosteriorLostError" in killed.stdout + killed.stderr, tail(killed)
    # nothing after the kill was checkpointed: a resume starts from step 1
    assert kill_and_resume["latest"] == "1"


def test_missing_data_pt_at_resume_is_a_loud_error(kill_and_resume):
    missing = kill_and_resume["missing"]
    assert missing.returncode != 0
    assert "data.pt is missing" in missing.stdout + missing.stderr, tail(missing)
    # the driver saw the checkpoint folder without its data.pt: no Ray, no worker, no model loaded to then stop
    assert "Started a local Ray instance" not in missing.stdout + missing.stderr, tail(missing)


def test_relative_run_log_dir_is_resolved_once_in_the_launch_directory(kill_and_resume):
    run_dir = kill_and_resume["work"] / "runs" / "k"
    assert (run_dir / "meta.json").is_file() and (run_dir / "metrics.jsonl").is_file()


def test_posterior_sees_every_rollout_once_and_no_padding_across_the_kill_and_the_resume(kill_and_resume):
    work = kill_and_resume["work"]
    resumed = kill_and_resume["resumed"]
    assert resumed.returncode == 0, tail(resumed)
    killed = read_metrics(work / "runs" / "k")
    # K logs step 1 at most (the kill may come between step 1's checkpoint and its metrics line), never step 2
    assert STEPS not in killed
    resumed_metrics = read_metrics(work / "runs" / "r")
    assert sorted(resumed_metrics) == [STEPS]  # from the step-1 checkpoint's posterior, not the prior
    for m in [*killed.values(), *resumed_metrics.values()]:
        # verl padded the trained batch (8 synthetic rows copying the first sample's task id), and none reached the
        # posterior: it got every dispatched prompt's rollouts (trained, evicted by DAPO or discarded as surplus)
        assert m["bots/padding_rows"] == PADDING
        assert m["bots/rollouts"] == N * m["bots/dispatched"] and m["bots/dispatched"] >= PROMPTS
        assert m["bots/stale_dispatches"] == 0 and m["bots/repeat_dispatches"] == 0
        assert "actor/kl_loss" in m  # the reference model ran (unpinned offload on CPU)
    # every generated rollout counted once across the kill: no step's evidence lost or counted twice
    state = checkpoint_sampler_state(work / "ckpt" / f"global_step_{STEPS}" / "data.pt")
    generated = sum(N * len(positions) for _, positions in state["dispatch_log"])
    assert state["attempts"] == generated == resumed_metrics[STEPS]["bots/posterior_rollouts_total"]
    assert sorted({s for s, _ in state["dispatch_log"]}) == list(range(1, STEPS + 1))


def test_dapo_refills_are_fresh_and_never_repeat_a_task_within_a_step(dapo_run):
    metrics = read_metrics(dapo_run / "run")
    assert sorted(metrics) == [1, 2]
    evicted = 0.0
    for m in metrics.values():
        assert m["bots/stale_dispatches"] == 0 and m["bots/repeat_dispatches"] == 0
        # every dispatched prompt's rollouts reached the posterior: trained, evicted by DAPO or discarded as surplus
        assert m["bots/rollouts"] == N * m["bots/dispatched"]
        evicted += m["bots/evicted_rollouts"]
    assert evicted > 0  # DAPO did evict and refill
    state = checkpoint_sampler_state(dapo_run / "ckpt" / "global_step_2" / "data.pt")
    for step, positions in state["dispatch_log"]:
        assert len(positions) == len(set(positions)) >= PROMPTS, (step, positions)


def test_dapo_posterior_counts_every_generated_rollout_once(dapo_run):
    """The posterior's attempts are every rollout generated (the trained groups and the discarded ones), each once."""
    metrics = read_metrics(dapo_run / "run")
    state = checkpoint_sampler_state(dapo_run / "ckpt" / "global_step_2" / "data.pt")
    # the sampler's own log of every prompt it handed to verl, N rollouts each
    generated = sum(N * len(positions) for _, positions in state["dispatch_log"])
    assert state["attempts"] == generated == sum(m["bots/rollouts"] for m in metrics.values())
    assert metrics[2]["bots/posterior_rollouts_total"] == generated
    assert generated > 2 * ROWS  # more than the trained rollouts: the discarded groups count too


def test_a_resume_after_the_kill_gives_identical_selections_posterior_and_weights(dapo_run, kill_and_resume):
    assert kill_and_resume["resumed"].returncode == 0, tail(kill_and_resume["resumed"])
    result = compare_checkpoints(dapo_run / "ckpt", kill_and_resume["work"] / "ckpt", STEPS)
    assert result["selections"] == [] and result["posterior"] == [] and result["weights"] == [], result


#: DX's bound: a resume and one refused step take about a minute on 2 cores; before the cap, step 2 never ended
REFUSED_RUN_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def dapo_refused(dapo_run, toy, tmp_path_factory, ray_attach) -> dict:
    """Run DX: D's step-1 checkpoint resumed, capped at 2 generation batches, on a pool no response can solve."""
    work = tmp_path_factory.mktemp("run_dx")
    shutil.copytree(dapo_run / "ckpt" / "global_step_1", work / "ckpt" / "global_step_1")
    (work / "ckpt" / "latest_checkpointed_iteration.txt").write_text("1")
    # the same tasks and prompts (the checkpoint's pool), answers that are no token of the toy vocabulary: all-0 groups
    frame = pd.read_parquet(toy["train"])
    frame["reward_model"] = [{**rm, "ground_truth": "never"} for rm in frame["reward_model"]]
    unsolvable = work / "unsolvable.parquet"
    frame.to_parquet(unsolvable)
    proc = run_main(
        _overrides(
            {**toy, "train": str(unsolvable)},
            *DAPO,
            "algorithm.filter_groups.max_num_gen_batches=2",
            "trainer.total_training_steps=2",
            "trainer.save_freq=1",
            f"trainer.default_local_dir={work / 'ckpt'}",
            f"bots.run_log.dir={work / 'run'}",
        ),
        cwd=work,
        timeout=REFUSED_RUN_TIMEOUT_S,
        attach=ray_attach(),
    )
    return {"work": work, "proc": proc}


def test_a_step_past_the_generation_batch_cap_stops_the_run_and_keeps_the_last_checkpoint(dapo_run, dapo_refused):
    proc, work = dapo_refused["proc"], dapo_refused["work"]
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, tail(proc)
    assert "TooManyGenBatchesError" in out and "algorithm.filter_groups.max_num_gen_batches=2" in out, tail(proc)
    # verl asked for more after batch 1 (all 6 groups evicted) and was refused once 2 x 6 prompts would be passed
    dispatched = int(re.search(r"step 2 dispatched (\d+) prompts", out).group(1))
    assert PROMPTS < dispatched <= 2 * PROMPTS, tail(proc)
    # nothing of step 2 was saved or logged: the posterior and the checkpoint are step 1's, as D wrote them
    ckpt = work / "ckpt"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    assert not (ckpt / "global_step_2").exists()
    assert (ckpt / "global_step_1" / "data.pt").read_bytes() == (
        dapo_run / "ckpt" / "global_step_1" / "data.pt"
    ).read_bytes()
    assert 2 not in read_metrics(work / "run")
