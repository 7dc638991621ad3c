"""The jupytext notebooks execute headlessly on fixture logs (jupytext -> nbformat -> nbclient), so they never rot.

The kernel is this interpreter, registered in a temporary kernelspec directory: nothing has to be installed by hand
and a fresh ``make test`` venv works.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from analysis_fixtures import CURVES, write_run

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "analysis" / "notebooks").glob("*.py"))
KERNEL = "bots-analysis-test"


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, known: Path) -> Path:
    """A kernelspec running ``sys.executable``, and BOTS_RUNS pointing at fixture logs with a ρ sweep."""
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    # ipykernel picks matplotlib's inline backend unless MPLBACKEND says otherwise; the figures must come back as PNG.
    monkeypatch.delenv("MPLBACKEND", raising=False)
    for seed in (0, 1):
        hparams = {"selector": "bots", "hparams": {"rho": 0.5}}
        write_run(known, "bots_rho0.5", seed, CURVES[("offline_easy2hard", seed)], hparams=hparams)
    monkeypatch.setenv("BOTS_RUNS", str(known))
    return known


def test_notebooks_exist() -> None:
    assert {p.name for p in NOTEBOOKS} >= {"overview.py", "ablations.py"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, kernel_env: Path, tmp_path: Path) -> None:
    nb = jupytext.read(path)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name=KERNEL, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = json.dumps(outputs, ensure_ascii=False)
    if path.name == "overview.py":
        assert "**Main table**" in text and "**First and second places**" in text and "image/png" in text
        assert "no overhead table" in text and "no estimator figure" in text  # the fixture logs neither
    if path.name == "ablations.py":
        assert "ρ ablation (bots)" in text and "no lam ablation" in text and "no selection ablation" in text
        assert "no λ figure" in text
