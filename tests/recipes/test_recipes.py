"""Every launch script composes and validates a full verl config (the DRY_RUN path), on CPU.

Each script is run with ``RECIPE_ARGV_DIR`` so that it records its final ``bots_verl.main`` argv instead of starting
python (bash only, fast); one python process then composes and validates every recorded config with the entry
point's own ``check_config`` (verl's ``validate_config`` + the ``bots:`` checks). One script also runs its real
``DRY_RUN=1`` path end to end, to prove that the recorded argv is what the dry run executes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from guru_fixtures import build_guru_dir  # noqa: E402

from bots_verl.data.guru import prepare  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
MAIN = sorted(RECIPES.glob("run_*.sh"))
ABLATIONS = sorted((RECIPES / "ablations").glob("run_*.sh"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recipes")
    prepare(build_guru_dir(root / "guru"), root / "data")
    return root / "data"


def _record(script: Path, tmp: Path, data_dir: Path, *args: str, **env: str) -> dict[str, list[str]]:
    out = tmp / script.stem
    full_env = {**os.environ, "RECIPE_ARGV_DIR": str(out), "DATA_DIR": str(data_dir), "DRY_RUN": "1", **env}
    subprocess.run(["bash", str(script), *args], check=True, env=full_env, cwd=tmp, capture_output=True, text=True)
    return {p.stem: p.read_bytes().decode().split("\0")[:-1] for p in sorted(out.glob("*.argv"))}


def _value(argv: list[str], key: str) -> str:
    hits = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] == key]
    assert hits, f"{key} not in argv"
    return hits[-1]


def test_matrix_is_complete() -> None:
    names = {p.name for p in MAIN}
    expected = {
        f"run_{d}_qwen2.5_{m}_{s}.sh"
        for d in ("math", "code", "logic")
        for m in ("1.5b", "7b")
        for s in ("bots", "random")
    }
    assert names == expected
    assert {p.stem.removeprefix("run_math_qwen2.5_1.5b_") for p in ABLATIONS} == {
        "mopps",
        "implicit_only",
        "offline_easy2hard",
        "rho_sweep",
        "lambda_sweep",
    }
    for script in [*MAIN, *ABLATIONS]:
        assert os.access(script, os.X_OK), f"{script} is not executable"


def test_every_recipe_dry_run_validates(tmp_path: Path, data_dir: Path) -> None:
    recorded: dict[str, list[str]] = {}
    for script in [*MAIN, *ABLATIONS]:
        runs = _record(script, tmp_path, data_dir)
        assert runs, f"{script.name} recorded no run"
        recorded.update(runs)
    assert len(recorded) == 12 + 3 + 6 + 6  # matrix, three ablations, rho and lambda sweeps

    for name, argv in recorded.items():
        assert argv[-4:] == [
            "bots.dry_run=true",
            "hydra.run.dir=.",
            "hydra.output_subdir=null",
            "hydra/job_logging=stdout",
        ]
        # The paper's settings, from the one shared file.
        assert _value(argv, "data.train_batch_size") == "32" and _value(argv, "actor_rollout_ref.rollout.n") == "16"
        assert _value(argv, "actor_rollout_ref.actor.optim.lr") == "1e-6"
        assert _value(argv, "data.max_response_length") == "8192"
        assert _value(argv, "bots.reference_columns") == "[qwen2.5_7b_pass_rate,qwen3_30b_pass_rate]"
        assert _value(argv, "trainer.logger") == '["console","file"]'
        assert _value(argv, "bots.run_log.dir").endswith(name)
        if _value(argv, "bots.selector") == "bots":
            assert "+bots.hparams.target=0.5" in argv
    sweep = {name: argv for name, argv in recorded.items() if "_bots_rho" in name}
    assert sorted(_value(a, "+bots.hparams.rho") for a in sweep.values()) == ["0", "0.05", "0.1", "0.2", "0.5", "1.0"]
    lam = [_value(a, "+bots.hparams.lam") for n, a in recorded.items() if "_bots_lambda" in n]
    assert sorted(lam) == ["0", "0.05", "0.1", "0.2", "0.5", "1.0"]

    # Compose and validate every config in one process, exactly as `python -m bots_verl.main ... bots.dry_run=true`.
    from hydra import compose, initialize_config_module

    from bots_verl.main import check_config

    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        for name, argv in recorded.items():
            config = compose(config_name="bots_trainer", overrides=argv)
            settings = check_config(config)
            assert settings.dry_run, name
            assert settings.task_id_field == "task_id"
            assert config.trainer.nnodes == 1 and config.trainer.n_gpus_per_node == 8
            assert config.reward.custom_reward_function.path == "pkg://bots_verl.rewards"


def test_knobs_and_passthrough(tmp_path: Path, data_dir: Path) -> None:
    """Multi-node knobs reach the trainer, the model path is a knob, and "$@" overrides come last (they win)."""
    script = RECIPES / "run_code_qwen2.5_7b_random.sh"
    (argv,) = _record(
        script,
        tmp_path,
        data_dir,
        "trainer.test_freq=5",
        NNODES="4",
        GPUS_PER_NODE="4",
        MODEL_PATH="/m/qwen7b",
        DRY_RUN="0",
    ).values()
    assert _value(argv, "trainer.nnodes") == "4" and _value(argv, "trainer.n_gpus_per_node") == "4"
    assert _value(argv, "actor_rollout_ref.model.path") == "/m/qwen7b"
    assert _value(argv, "trainer.test_freq") == "5" and argv[-2] == "trainer.test_freq=5"
    assert argv[-1] == f"hydra.run.dir={_value(argv, 'bots.run_log.dir')}/hydra"
    assert "bots.dry_run=true" not in argv
    assert _value(argv, "data.train_files") == f"{data_dir}/code/train.parquet"


def test_dry_run_end_to_end(tmp_path: Path, data_dir: Path) -> None:
    env = {**os.environ, "DRY_RUN": "1", "DATA_DIR": str(data_dir), "PYTHON": sys.executable, "RUN_ROOT": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(RECIPES / "run_logic_qwen2.5_1.5b_bots.sh"), "trainer.total_training_steps=3"],
        env=env,
        cwd=tmp_path,  # hydra would create outputs/ here if the dry run let it
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "BOTS dry run: config OK" in proc.stdout
    assert "total_training_steps=3" in proc.stdout
    assert not any(tmp_path.iterdir()), "a dry run must not create run directories (nor hydra's outputs/)"
