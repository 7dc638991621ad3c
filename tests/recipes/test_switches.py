"""The recipes' environment switches and integer knobs (issue 47): one reading of ``DRY_RUN=true`` everywhere.

``recipes/switches.sh`` holds the one implementation (``bool_switch``, ``int_knob``); ``common.sh`` and the scripts
that do not source it (the toy scripts, ``cpu_recipes.sh``, ``cpu_pipeline.sh``) call it. The recipes run here for real
with ``PYTHON`` pointing at a stub that records each command it is given instead of running it: what the script would
launch, and whether it created a run folder, is then visible in milliseconds, without verl or GPUs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from recipe_argv import RECIPES

ON = ["1", "true", "TRUE", "True", "yes", "Yes", "on", "ON"]
OFF = ["0", "false", "False", "no", "NO", "off", "Off"]
REFUSED = ["maybe", "2", "y", "n", "tru", " 1", "1 ", "-1", "enable", "dry"]
ACCEPTED_VALUES = "1/true/yes/on or 0/false/no/off"


def _bash(script: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "CPU")}
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {RECIPES}/switches.sh; {script}"],
        env={**full_env, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("raw", ON + OFF + ["", None])
def test_bool_switch_accepts_the_documented_values(raw: str | None) -> None:
    env = {} if raw is None else {"SWITCH": raw}
    proc = _bash('bool_switch SWITCH 0; echo "[$SWITCH]"', **env)
    assert proc.returncode == 0, proc.stderr
    expected = "1" if raw in ON else "0"  # unset and empty: the default
    assert proc.stdout.strip() == f"[{expected}]"
    default_on = _bash('bool_switch SWITCH 1; echo "[$SWITCH]"', **env)
    assert default_on.stdout.strip() == f"[{'0' if raw in OFF else '1'}]"


@pytest.mark.parametrize("raw", REFUSED)
def test_bool_switch_refuses_anything_else_naming_the_variable(raw: str) -> None:
    proc = _bash('bool_switch MY_SWITCH 0; echo "went on"', MY_SWITCH=raw)
    assert proc.returncode == 2
    assert "went on" not in proc.stdout
    assert f"MY_SWITCH='{raw}'" in proc.stderr and ACCEPTED_VALUES in proc.stderr


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("1", True), ("32", True), ("", False), ("0", False), ("-1", False), ("abc", False), ("1.5", False)]
    + [("08", False), ("1e3", False), (" 4", False), ("4 ", False), ("+4", False), ("9" * 20, False)],
)
def test_int_knob_takes_plain_integers_at_or_above_the_minimum(raw: str, ok: bool) -> None:
    proc = _bash("int_knob KNOB 1", KNOB=raw)
    assert (proc.returncode == 0) is ok, proc.stderr
    if not ok:
        assert proc.returncode == 2 and f"KNOB='{raw}' must be an integer >= 1" in proc.stderr
    # the extra literal values a knob documents ('' = unset, -1 = verl's "never")
    assert _bash("int_knob KNOB 1 '' -1", KNOB=raw).returncode == (0 if ok or raw in ("", "-1") else 2)
    assert _bash("int_knob KNOB 0", KNOB="0").returncode == 0


# ---------------------------------------------------------------------------------------------- the recipes for real
STUB = """#!/usr/bin/env bash
# a stand-in for python: records the command it was given (one file per call) and succeeds
printf '%s\\0' "$@" >"$(mktemp "$STUB_CALLS/call.XXXXXX")"
"""


@pytest.fixture
def stub(tmp_path: Path) -> dict[str, str]:
    """The environment of a recipe whose ``PYTHON`` records its commands into ``tmp_path/calls``."""
    (tmp_path / "calls").mkdir()
    python = tmp_path / "python"
    python.write_text(STUB)
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "CPU", "RECIPE_ARGV_DIR")}
    return {
        **env,
        "PYTHON": str(python),
        "STUB_CALLS": str(tmp_path / "calls"),
        "RUN_ROOT": str(tmp_path / "runs"),
        "DATA_DIR": str(tmp_path / "data"),
    }


def _calls(env: dict[str, str]) -> list[list[str]]:
    return [p.read_bytes().decode().split("\0")[:-1] for p in sorted(Path(env["STUB_CALLS"]).iterdir())]


def _run(script: Path, env: dict[str, str], cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(script), *args], env={**env, **extra}, cwd=cwd, capture_output=True, text=True, timeout=60
    )


MAIN_SCRIPT = RECIPES / "run_math_qwen2.5_1.5b_bots.sh"


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "True", "YES"])
def test_dry_run_true_is_a_dry_run_nothing_launched_no_run_folder(value: str, stub: dict, tmp_path: Path) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, DRY_RUN=value)
    assert proc.returncode == 0, proc.stderr
    (argv,) = _calls(stub)
    assert argv[:2] == ["-m", "bots_verl.main"]
    assert "bots.dry_run=true" in argv and "hydra.run.dir=." in argv  # validate only, hydra writes nothing
    assert not any(a.startswith("hydra.run.dir=") and a != "hydra.run.dir=." for a in argv)
    assert not (tmp_path / "runs").exists(), "a dry run must not create the run folder"
    assert "dry_run=1" in proc.stderr and "cpu=0" in proc.stderr


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "OFF", ""])
def test_dry_run_off_launches_the_real_run(value: str, stub: dict, tmp_path: Path) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, DRY_RUN=value)
    assert proc.returncode == 0, proc.stderr
    (argv,) = _calls(stub)
    assert "bots.dry_run=true" not in argv
    run_dir = tmp_path / "runs" / "math_qwen2.5-1.5b-instruct_bots_s42"
    assert f"hydra.run.dir={run_dir}/hydra" in argv and run_dir.is_dir()


@pytest.mark.parametrize("switch", ["DRY_RUN", "CPU"])
@pytest.mark.parametrize("value", ["maybe", "2", "dry"])
def test_a_bad_switch_value_stops_the_recipe_before_anything_starts(
    switch: str, value: str, stub: dict, tmp_path: Path
) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, **{switch: value})
    assert proc.returncode != 0
    assert f"{switch}='{value}' is not a switch value" in proc.stderr and ACCEPTED_VALUES in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("value", ["1", "yes", "true", "On"])
def test_cpu_yes_runs_the_cpu_recipe(value: str, stub: dict, tmp_path: Path) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU=value, DRY_RUN="yes")
    assert proc.returncode == 0, proc.stderr
    (argv,) = _calls(stub)  # a dry run builds no tiny model either
    assert "trainer.device=cpu" in argv and "actor_rollout_ref.rollout.name=hf" in argv
    assert argv[argv.index("actor_rollout_ref.rollout.name=hf") - 1 :].count("actor_rollout_ref.rollout.name=vllm") == 0
    assert "trainer.n_gpus_per_node=1" in argv and "bots.dry_run=true" in argv
    assert "cpu=1" in proc.stderr and not (tmp_path / "runs").exists()


def test_cpu_real_run_builds_the_tiny_model_then_trains(stub: dict, tmp_path: Path) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU="true", DRY_RUN="false")
    assert proc.returncode == 0, proc.stderr
    model, train = _calls(stub)
    if model[1] != "bots_verl.verl_cpu.tiny_model":
        model, train = train, model
    assert model[:2] == ["-m", "bots_verl.verl_cpu.tiny_model"]
    assert train[:2] == ["-m", "bots_verl.main"] and "trainer.device=cpu" in train
    assert (tmp_path / "runs" / "math_qwen2.5-1.5b-instruct-cpu_bots_s42").is_dir()


def test_a_switch_set_on_the_launch_call_is_checked_too(stub: dict, tmp_path: Path) -> None:
    script = tmp_path / "run_custom.sh"
    lines = ["set -euo pipefail", "DOMAIN=math MODEL_PATH=m METHOD=random", f"source {RECIPES}/common.sh"]
    script.write_text("\n".join([*lines, "DRY_RUN=sure bots_launch"]) + "\n")
    proc = _run(script, stub, tmp_path)
    assert proc.returncode != 0 and "DRY_RUN='sure'" in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "runs").exists()
    script.write_text("\n".join([*lines, "DRY_RUN=On bots_launch"]) + "\n")
    proc = _run(script, stub, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "bots.dry_run=true" in _calls(stub)[0] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("name", "value"),
    [("TOTAL_STEPS", "abc"), ("TOTAL_STEPS", "-1"), ("TOTAL_STEPS", "0"), ("TOTAL_STEPS", "2.5")]
    + [("TRAIN_BATCH_SIZE", "0"), ("ROLLOUT_N", "sixteen"), ("TOTAL_EPOCHS", "-1"), ("NNODES", "1.0")]
    + [("GPUS_PER_NODE", "0"), ("MAX_RESPONSE_LENGTH", "8k"), ("TEST_FREQ", "0"), ("SAVE_FREQ", "-2")]
    + [("SEED", "-1"), ("SEED", "x"), ("PPO_MINI_BATCH_SIZE", "1e3"), ("ROLLOUT_TP", "two")],
)
@pytest.mark.parametrize("dry_run", ["0", "1"])
def test_a_bad_integer_knob_stops_the_recipe_naming_it(
    name: str, value: str, dry_run: str, stub: dict, tmp_path: Path
) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, DRY_RUN=dry_run, **{name: value})
    assert proc.returncode != 0
    assert f"{name}='{value}' must be an integer >=" in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "knobs",
    [{"TOTAL_STEPS": "3"}, {"TOTAL_STEPS": ""}, {"TEST_FREQ": "-1", "SAVE_FREQ": "-1"}, {"SEED": "0"}],
)
def test_the_documented_integer_values_pass(knobs: dict, stub: dict, tmp_path: Path) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, DRY_RUN="1", **knobs)
    assert proc.returncode == 0, proc.stderr
    (argv,) = _calls(stub)
    if knobs.get("TOTAL_STEPS"):
        assert "trainer.total_training_steps=3" in argv
    if "TOTAL_STEPS" in knobs and not knobs["TOTAL_STEPS"]:
        assert not any(a.startswith("trainer.total_training_steps=") for a in argv)


@pytest.mark.parametrize("name", ["CPU_ROLLOUT_N", "CPU_TRAIN_BATCH_SIZE", "CPU_MAX_RESPONSE_LENGTH"])
def test_a_bad_cpu_knob_stops_the_recipe_before_the_tiny_model_is_built(name: str, stub: dict, tmp_path: Path) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU="1", **{name: "four"})
    assert proc.returncode != 0 and f"{name}='four'" in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "runs").exists()


def test_cpu_rollout_picks_the_cpu_modes_engine_and_refuses_any_other(stub: dict, tmp_path: Path) -> None:
    """Issue 49: CPU_ROLLOUT=vllm keeps the recipe's vLLM rollout in CPU mode (vLLM's CPU build); hf by default."""
    # vLLM's CPU attention needs heads of 32 or more: the vllm engine gets a tiny model of its own, twice as wide
    cases = [({}, "hf", "cpu_tiny_model"), ({"CPU_ROLLOUT": "vllm"}, "vllm", "cpu_tiny_model_h128")]
    for setting, engine, model in cases:
        for call in Path(stub["STUB_CALLS"]).iterdir():
            call.unlink()
        proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU="1", DRY_RUN="1", **setting)
        assert proc.returncode == 0, proc.stderr
        (argv,) = _calls(stub)
        given = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if "=" in a}  # the last value, as hydra's
        assert given["actor_rollout_ref.rollout.name"] == engine
        assert Path(given["actor_rollout_ref.model.path"]).name == model
    for call in Path(stub["STUB_CALLS"]).iterdir():
        call.unlink()
    proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU="1", CPU_ROLLOUT="sglang")
    assert proc.returncode != 0 and "CPU_ROLLOUT='sglang'" in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "runs").exists()


def test_a_sweep_with_a_bad_switch_launches_none_of_its_runs(stub: dict, tmp_path: Path) -> None:
    script = RECIPES / "ablations" / "run_math_qwen2.5_1.5b_rho_sweep.sh"
    proc = _run(script, stub, tmp_path, DRY_RUN="y", RHO_VALUES="0 1.0")
    assert proc.returncode != 0 and "DRY_RUN='y'" in proc.stderr and _calls(stub) == []
    proc = _run(script, stub, tmp_path, DRY_RUN="Yes", RHO_VALUES="0 1.0")
    assert proc.returncode == 0, proc.stderr
    assert [("bots.dry_run=true" in argv) for argv in _calls(stub)] == [True, True]
    assert not (tmp_path / "runs").exists()


TOY = [RECIPES / "toy" / "prepare.sh", RECIPES / "toy" / "run_benchmark.sh"]


@pytest.mark.parametrize("script", TOY, ids=lambda p: p.name)
def test_the_toy_scripts_read_dry_run_the_same_way(script: Path, stub: dict, tmp_path: Path) -> None:
    for value, dry in [("true", True), ("ON", True), ("1", True), ("no", False), ("", False)]:
        for call in Path(stub["STUB_CALLS"]).iterdir():
            call.unlink()
        proc = _run(script, stub, tmp_path, DRY_RUN=value, NICE="0")
        assert proc.returncode == 0, proc.stderr
        (argv,) = _calls(stub)
        assert ("--dry-run" in argv) is dry, (value, argv)
    refused = _run(script, stub, tmp_path, DRY_RUN="maybe", NICE="0")
    assert refused.returncode != 0 and "DRY_RUN='maybe'" in refused.stderr


@pytest.mark.parametrize(
    ("script", "name", "value"),
    [("cpu_recipes.sh", "STEPS", "abc"), ("cpu_recipes.sh", "STEPS", "0"), ("cpu_pipeline.sh", "STEPS", "two")]
    + [("cpu_pipeline.sh", "SAMPLES", "-4")],
)
def test_the_cpu_checks_refuse_a_bad_count_before_creating_their_work_folder(
    script: str, name: str, value: str, stub: dict, tmp_path: Path
) -> None:
    proc = _run(RECIPES / script, stub, tmp_path, WORK=str(tmp_path / "work"), **{name: value})
    assert proc.returncode != 0 and f"{name}='{value}' must be an integer >= 1" in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "work").exists()


# --------------------------------------------------------------------- CPU mode: a size the user typed wins (issue 59)
CPU_DEFAULTS = {"TRAIN_BATCH_SIZE": "4", "ROLLOUT_N": "4", "PPO_MINI_BATCH_SIZE": "4", "MAX_PROMPT_LENGTH": "1024"}
CPU_DEFAULTS |= {"MAX_RESPONSE_LENGTH": "192", "MAX_TOKENS_PER_GPU": "8192", "TOTAL_STEPS": "2", "GPUS_PER_NODE": "1"}
# knob -> the keys of the command it sets
KNOB_KEYS = {
    "TRAIN_BATCH_SIZE": ["data.train_batch_size"],
    "ROLLOUT_N": ["actor_rollout_ref.rollout.n"],
    "PPO_MINI_BATCH_SIZE": ["actor_rollout_ref.actor.ppo_mini_batch_size"],
    "MAX_PROMPT_LENGTH": ["data.max_prompt_length"],
    "MAX_RESPONSE_LENGTH": ["data.max_response_length"],
    "MAX_TOKENS_PER_GPU": ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"],
    "TOTAL_STEPS": ["trainer.total_training_steps"],
    "GPUS_PER_NODE": ["trainer.n_gpus_per_node"],
}


def _cpu_command(stub: dict, tmp_path: Path, **knobs: str) -> dict[str, str]:
    """The dry run's command in CPU mode, as ``{key: the value hydra keeps}``."""
    proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU="1", DRY_RUN="1", **knobs)
    assert proc.returncode == 0, proc.stderr
    (argv,) = _calls(stub)
    return {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if "=" in a}


def test_cpu_mode_sizes_what_the_user_did_not_set(stub: dict, tmp_path: Path) -> None:
    given = _cpu_command(stub, tmp_path)
    for knob, default in CPU_DEFAULTS.items():
        assert [given[key] for key in KNOB_KEYS[knob]] == [default], knob
    assert given["trainer.nnodes"] == "1" and given["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"


@pytest.mark.parametrize(
    "typed",
    [{"TRAIN_BATCH_SIZE": "8", "ROLLOUT_N": "8", "MAX_RESPONSE_LENGTH": "64"}]
    + [{"PPO_MINI_BATCH_SIZE": "2", "MAX_PROMPT_LENGTH": "512", "MAX_TOKENS_PER_GPU": "4096"}]
    + [{"TOTAL_STEPS": "3", "GPUS_PER_NODE": "2"}, {"NNODES": "1", "ROLLOUT_TP": "1"}],
)
def test_cpu_mode_keeps_a_size_the_user_typed(typed: dict, stub: dict, tmp_path: Path) -> None:
    given = _cpu_command(stub, tmp_path, **typed)
    for knob, default in CPU_DEFAULTS.items():
        expected = typed.get(knob, default)
        assert [given[key] for key in KNOB_KEYS[knob]] == [expected], knob


def test_a_cpu_knob_is_the_cpu_modes_own_value_and_wins_over_the_gpu_one(stub: dict, tmp_path: Path) -> None:
    given = _cpu_command(stub, tmp_path, ROLLOUT_N="16", CPU_ROLLOUT_N="2", TRAIN_BATCH_SIZE="8")
    assert given["actor_rollout_ref.rollout.n"] == "2" and given["data.train_batch_size"] == "8"


@pytest.mark.parametrize(
    ("typed", "message"),
    [({"NNODES": "2"}, "NNODES='2' cannot run in CPU mode"), ({"ROLLOUT_TP": "2"}, "ROLLOUT_TP='2' cannot run in CPU")]
    + [({"MAX_RESPONSE_LENGTH": "8192"}, "1024 + 8192 is longer than the CPU mode's tiny model takes (4096 positions)")]
    + [({"MAX_PROMPT_LENGTH": "4000", "CPU_MAX_RESPONSE_LENGTH": "100"}, "4000 + 100 is longer")],
)
@pytest.mark.parametrize("dry_run", ["0", "1"])
def test_cpu_mode_refuses_a_typed_value_it_cannot_run_with_the_reason(
    typed: dict, message: str, dry_run: str, stub: dict, tmp_path: Path
) -> None:
    proc = _run(MAIN_SCRIPT, stub, tmp_path, CPU="1", DRY_RUN=dry_run, **typed)
    assert proc.returncode != 0 and message in proc.stderr
    assert _calls(stub) == [] and not (tmp_path / "runs").exists()  # no tiny model built, no run folder


def test_the_cpu_modes_length_limit_is_the_tiny_models() -> None:
    from bots_verl.verl_cpu.tiny_model import MAX_POSITIONS

    proc = _bash(f'DOMAIN=math MODEL_PATH=m METHOD=random; source {RECIPES}/common.sh; echo "$CPU_MAX_POSITIONS"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(MAX_POSITIONS)


def test_a_typed_cpu_model_dir_is_kept_for_the_vllm_engine(stub: dict, tmp_path: Path) -> None:
    given = _cpu_command(stub, tmp_path, CPU_ROLLOUT="vllm", CPU_MODEL_DIR=str(tmp_path / "mine"))
    assert given["actor_rollout_ref.model.path"] == str(tmp_path / "mine")


@pytest.mark.parametrize(
    ("script", "graph"),
    [
        ("ablations/run_math_qwen2.5_1.5b_bots_noref.sh", True),
        ("ablations/run_math_qwen2.5_1.5b_bots_ref10.sh", True),
        ("run_math_qwen2.5_1.5b_bots.sh", False),
    ],
)
def test_the_cpu_mode_fits_the_task_graph_to_the_fixtures_pool(script: str, graph: bool, stub: dict, tmp_path: Path):
    """The graph methods' 16 neighbours per task need 17 tasks; the fixture's math pool has 12. The CPU mode gives
    them CPU_GRAPH_K (4) neighbours; off CPU, and for the methods without a graph, nothing changes."""
    for cpu, extra, expected in (("1", {}, "4"), ("1", {"CPU_GRAPH_K": "6"}, "6"), ("0", {}, None)):
        proc = _run(RECIPES / script, stub, tmp_path, CPU=cpu, DRY_RUN="1", **extra)
        assert proc.returncode == 0, proc.stderr
        argv = _calls(stub)[-1]
        for call in Path(stub["STUB_CALLS"]).iterdir():
            call.unlink()
        graph_k = [a for a in argv if a.startswith("+bots.hparams.graph_k=")]
        assert graph_k == ([f"+bots.hparams.graph_k={expected}"] if graph and expected else []), (cpu, extra, argv)
    proc = _run(RECIPES / script, stub, tmp_path, CPU="1", DRY_RUN="1", CPU_GRAPH_K="four")
    assert proc.returncode != 0 and "CPU_GRAPH_K='four'" in proc.stderr
