"""The simulator version of the paper's experiments runs (tiny settings) and feeds the analysis with the same labels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from analysis import paper_tables, places
from analysis.loader import load_runs
from analysis.table_model import PAPER_LABELS

SCRIPT = Path(__file__).resolve().parents[2] / "recipes" / "sim" / "run_paper_experiments.sh"


def test_sim_paper_experiments(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "SEEDS": "2",
        "STEPS": "10",
        "EVAL_EVERY": "5",
        "PYTHON": sys.executable,
        "SIM_ARGS": "--pool-size 120",
    }
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    main = paper_tables.main_table(
        load_runs([tmp_path / f"paper-{d}" for d in ("math", "code", "logic")]), methods=["paper"]
    )
    assert main.rows == list(PAPER_LABELS) and main.domains == ["code", "logic", "math"]
    assert places.place_counts(main).metrics == {"sim": 18}
    ablations = load_runs([tmp_path / "ablations-math"])
    mopps = next(r for r in load_runs([tmp_path / "paper-math"]) if r.label == "bots_mopps")
    assert (mopps.flat_hparams["lam"], mopps.flat_hparams["rho"], mopps.flat_hparams["evidence"]) == (0, 0, "none")
    assert paper_tables.ablation_table(ablations, "rho").rows == [
        "ρ = 0",
        "ρ = 0.05",
        "ρ = 0.1",
        "ρ = 0.2",
        "ρ = 0.5",
        "ρ = 1",
    ]
    assert paper_tables.ablation_table(ablations, "lam").rows == [
        "λ = 0",
        "λ = 0.05",
        "λ = 0.1",
        "λ = 0.2",
        "λ = 0.5",
        "λ = 1",
    ]
    assert paper_tables.ablation_table(ablations, "selection").rows == ["selection = thompson", "selection = greedy"]
