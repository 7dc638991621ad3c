"""``make vllm-cpu`` (bots_verl/verl_cpu/build_vllm_cpu.sh): its switches are read as the recipes read theirs, and a
value it cannot read stops it before it creates a venv or downloads anything. The build itself (tens of minutes of
both cores, a CUDA toolkit's headers) is not run here; bots_verl/verl_cpu/README.md records what it did on this machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bots_verl" / "verl_cpu" / "build_vllm_cpu.sh"


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    settings = {"VLLM_VENV": str(tmp_path / "venv"), "VLLM_WORK": str(tmp_path / "work"), **env}
    return subprocess.run(
        ["bash", str(SCRIPT)], env={**os.environ, **settings}, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("name", "raw"),
    [("ALLOW_GCC_12_2", "maybe"), ("ALLOW_GCC_12_2", "2"), ("MAX_JOBS", "two"), ("MAX_JOBS", "0"), ("MAX_JOBS", "-1")],
)
def test_an_unreadable_setting_is_refused_before_anything_is_created(tmp_path: Path, name: str, raw: str) -> None:
    proc = _run(tmp_path, **{name: raw})
    assert proc.returncode == 2
    assert f"{name}='{raw}'" in proc.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "work").exists()
