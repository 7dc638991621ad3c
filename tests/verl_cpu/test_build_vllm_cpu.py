"""``make vllm-cpu`` (bots_verl/verl_cpu/build_vllm_cpu.sh): its switches are read as the recipes read theirs, and a
value it cannot read stops it before it creates a venv or downloads anything. The build itself (tens of minutes of
both cores, a CUDA toolkit's headers) is not run here; bots_verl/verl_cpu/README.md records what it did on this machine.
``make test-vllm-cpu`` with a Python that lacks the build fails instead of passing on skipped tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bots_verl" / "verl_cpu" / "build_vllm_cpu.sh"


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


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_vllm_cpu_fails_on_a_python_without_vllms_cpu_build(tmp_path: Path) -> None:
    """The target's own commands, with this Python (no vLLM here) standing in for .venv-vllm's: the tests must fail,
    saying what is missing, where they used to skip one by one and let the target pass."""
    if _has_vllm():
        pytest.skip("this Python has vLLM: the target would run the real tests")
    stand_in = tmp_path / "python"
    # the target's `pip install -q pytest` is skipped: nothing is installed into this venv
    stand_in.write_text(f'#!/bin/sh\n[ "$1 $2" = "-m pip" ] && exit 0\nexec {sys.executable} "$@"\n')
    stand_in.chmod(0o755)
    proc = subprocess.run(
        ["make", "--no-print-directory", "test-vllm-cpu", f"VLLM_PY={stand_in}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said[-3000:]
    assert "BOTS_REQUIRE_VLLM_CPU=1 but this Python has no vLLM CPU build" in said, said[-3000:]


def _has_vllm() -> bool:
    from importlib import metadata

    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return False
    return True
