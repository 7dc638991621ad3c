"""Each domain's BOTS recipe trains 2 real steps on CPU (``CPU=1``) from GURU-shaped data, with known answers.

What runs for real: the recipe script and ``recipes/common.sh``, ``bots_verl.main``, verl's trainer, TransferQueue, the
agent loop, verl's reward workers with the BOTS rewards (math-verify, code in bubblewrap, the logic scorers), the replay
buffer, the posterior actor, FSDP2 GRPO updates and checkpoints. (Code on a SandboxFusion server instead, through verl's
reward manager: ``tests/rewards/test_verl_caller.py``.) What is a test double: the model's *text*. A random tiny model
scores 0 everywhere, so the ``hf`` rollout server answers each train prompt from a known-answer script
(:mod:`bots_verl.verl_cpu.known_answers`): per task every rollout right, alternating right and wrong, or every rollout
wrong. The posterior must then hold exactly the scripted successes and attempts of every selected task (checked by
replaying the run in the numpy core, bit for bit), and a wrong expectation must fail that check.

Every run attaches to the session's Ray cluster (``ray_attach``: one cluster start saved per run). An attached run's
workers inherit the cluster's environment, not this process's: a run whose reward workers need a variable of their
own (a missing bubblewrap) passes it through the job's runtime environment
(``+ray_kwargs.ray_init.runtime_env.env_vars.*``, which the CPU backend merges with its own), as a user's run on a
shared cluster would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bots_verl.data.guru import prepare
from bots_verl.data.guru_fixture import build_guru_dir, code_solution
from bots_verl.runlog import iter_metrics
from bots_verl.verl_cpu.known_answers import build_known_answers, check_posterior, check_script

ROOT = Path(__file__).resolve().parents[2]
N = 4  # the CPU mode's rollouts per task (CPU_ROLLOUT_N)
STEPS = 2

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("guru")
    prepare(build_guru_dir(root / "raw"), root / "data")
    return root / "data"


@pytest.fixture(scope="module")
def scripts(data_dir: Path, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("known_answers")
    paths = {}
    for domain in ("math", "code", "logic"):
        rows = pq.read_table(data_dir / domain / "train.parquet").to_pylist()
        script = build_known_answers(rows, solution_for=code_solution)
        check_script(script, rows)  # every scripted response scores as intended with the training reward
        paths[domain] = out / f"{domain}.json"
        paths[domain].write_text(json.dumps(script))
    return paths


def run_recipe(script: str, data_dir: Path, run_root: Path, *overrides: str, **env: str):
    full_env = {
        **os.environ,
        "CPU": "1",
        "DATA_DIR": str(data_dir),
        "RUN_ROOT": str(run_root),
        "PYTHON": sys.executable,
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    return subprocess.run(
        ["bash", str(ROOT / "recipes" / script), f"trainer.total_training_steps={STEPS}", *overrides],
        cwd=run_root.parent,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _checked_run(domain: str, data_dir: Path, script_path: Path, run_root: Path, *overrides: str, **env: str) -> dict:
    proc = run_recipe(
        f"run_{domain}_qwen2.5_1.5b_bots.sh",
        data_dir,
        run_root,
        f"+actor_rollout_ref.rollout.custom.known_answers={script_path}",
        *overrides,
        **env,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    (run_dir,) = [p for p in run_root.iterdir() if p.name.startswith(f"{domain}_")]
    assert run_dir.name == f"{domain}_qwen2.5-1.5b-instruct-cpu_bots_s42"
    script = json.loads(script_path.read_text())
    data_pt = run_dir / "checkpoints" / f"global_step_{STEPS}" / "data.pt"
    received = check_posterior(data_pt, data_dir / domain / "train.parquet", script, N)
    assert received["steps"] == STEPS and received["attempts"] == STEPS * 4 * N
    # the scripted patterns give a known share: successes can be neither 0 nor all of the attempts over 8 tasks
    assert 0 < received["successes"] < received["attempts"]
    # a wrong expectation (successes and failures swapped) fails the same check
    swapped = {**script, "tasks": [{**t, "correct": [not c for c in t["correct"]]} for t in script["tasks"]]}
    with pytest.raises(ValueError, match="differs|dispatched"):
        check_posterior(data_pt, data_dir / domain / "train.parquet", swapped, N)
    metrics = dict(iter_metrics(run_dir))
    assert set(range(1, STEPS + 1)) <= set(metrics)
    last = metrics[STEPS]
    assert last["bots/rollouts"] == 4 * N
    # verl's validation ran on the domain's evaluation sets (the recipe's val files) at the last step
    assert any(k.startswith("val-core/") for k in last), sorted(last)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["domain"] == domain and meta["method"] == "bots"
    return received


@pytest.mark.parametrize("domain", ["math", "code", "logic"])
def test_the_bots_recipe_trains_on_cpu_and_the_posterior_gets_the_known_answers(
    domain, data_dir, scripts, tmp_path, ray_attach
):
    _checked_run(domain, data_dir, scripts[domain], tmp_path / "runs", **ray_attach())


def _worker_env(**env: str) -> list[str]:
    """Overrides that set ``env`` in every Ray worker of the run (its job's runtime environment)."""
    return [f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}={value}" for key, value in env.items()]


def test_a_reward_worker_without_bubblewrap_stops_the_run_and_names_the_package(
    data_dir, scripts, tmp_path, ray_attach
):
    missing = str(tmp_path / "no" / "bwrap")
    proc = run_recipe(
        "run_code_qwen2.5_1.5b_bots.sh",
        data_dir,
        tmp_path / "runs",
        f"+actor_rollout_ref.rollout.custom.known_answers={scripts['code']}",
        *_worker_env(BOTS_BWRAP=missing),
        BOTS_BWRAP=missing,
        **ray_attach(),
    )
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "bubblewrap (bwrap) is not installed" in output and "apt-get install bubblewrap" in output
    # nothing was scored silently: no step reached the posterior
    run_dir = tmp_path / "runs" / "code_qwen2.5-1.5b-instruct-cpu_bots_s42"
    assert not list(run_dir.glob("checkpoints/global_step_*"))


def _swap_train(data_dir: Path, tmp_path: Path, domain: str, source_domain: str, drop: tuple[str, ...] = ()) -> Path:
    """A DATA_DIR whose ``domain`` train file is ``source_domain``'s, less the ``drop`` columns."""
    bad = tmp_path / "bad_data"
    (bad / domain).mkdir(parents=True)
    table = pq.read_table(data_dir / source_domain / "train.parquet")
    pq.write_table(table.drop_columns(list(drop)), bad / domain / "train.parquet")
    for val in (data_dir / domain).glob("val_*.parquet"):
        (bad / domain / val.name).symlink_to(val)
    return bad


def _refused_before_ray(proc: subprocess.CompletedProcess, run_root: Path) -> str:
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "ray.init" not in output and "Started a local Ray instance" not in output, output[-3000:]
    return output


def test_a_recipe_on_another_domains_data_stops_before_ray_and_names_the_domain(data_dir, tmp_path):
    bad = _swap_train(data_dir, tmp_path, "code", "math")
    proc = run_recipe("run_code_qwen2.5_1.5b_bots.sh", bad, tmp_path / "runs")
    output = _refused_before_ray(proc, tmp_path / "runs")
    assert "the recipe's domain is 'code'" in output and "(math)" in output


def test_a_recipe_without_its_reference_columns_stops_before_ray_and_names_the_column(data_dir, tmp_path):
    bad = _swap_train(data_dir, tmp_path, "math", "math", drop=("qwen3_30b_pass_rate",))
    proc = run_recipe("run_math_qwen2.5_1.5b_bots.sh", bad, tmp_path / "runs")
    output = _refused_before_ray(proc, tmp_path / "runs")
    assert "no column 'qwen3_30b_pass_rate'" in output
