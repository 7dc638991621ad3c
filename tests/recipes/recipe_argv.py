"""Run a launch script in recording mode and compose what it would run (shared by the recipe and analysis tests).

With ``RECIPE_ARGV_DIR`` set, ``recipes/common.sh`` writes each run's final ``bots_verl.main`` argv (NUL-separated) to
``<dir>/<experiment>.argv`` instead of starting python, so bash alone records every recipe quickly; the configs are
then composed in-process exactly as ``python -m bots_verl.main <argv>`` would compose them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"


def record(script: Path, out: Path, data_dir: Path, *args: str, **env: str) -> dict[str, list[str]]:
    """Run ``script`` (with ``DRY_RUN=1`` unless ``env`` says otherwise) and return ``{experiment: argv}``.

    Args:
        script: the launch script.
        out: a fresh directory for the recorded argv files (also the working directory).
        data_dir: the prepared data (``DATA_DIR``).
        *args: hydra overrides appended after the script name.
        **env: extra environment variables (knobs such as ``SEED`` or ``RHO``). ``GPU_MEMORY_GIB`` is 80 unless given:
            the GPU memory check then reads the same card on any test machine, not its nvidia-smi.
    """
    out.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "RECIPE_ARGV_DIR": str(out), "DATA_DIR": str(data_dir), "DRY_RUN": "1"}
    full_env = {**full_env, "GPU_MEMORY_GIB": "80", **env}
    proc = subprocess.run(["bash", str(script), *args], env=full_env, cwd=out, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {p.stem: p.read_bytes().decode().split("\0")[:-1] for p in sorted(out.glob("*.argv"))}


def value(argv: list[str], key: str) -> str:
    """The last value given to ``key`` in ``argv`` (the one hydra keeps)."""
    hits = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] == key]
    assert hits, f"{key} not in argv"
    return hits[-1]


def compose(argvs: Iterable[list[str]]):
    """Yield the composed config of each argv (hydra's ``bots_trainer``, the entry point's own config)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        for argv in argvs:
            yield hydra_compose(config_name="bots_trainer", overrides=argv)
