"""The simulator's output goes through ``analysis.tables`` and agrees with the simulator's own summary."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import paper_tables, tables
from analysis.loader import load_runs

# our column key -> the simulator's summary key (bots_verl/sim/report.py)
SIM_KEYS = {
    "TTB25": "ttb25",
    "TTB50": "ttb50",
    "TTB100": "ttb100",
    "BSF25": "bsf25",
    "BSF50": "bsf50",
    "BSF100": "bsf100",
    "ETR": "etr",
}


def test_sim_cli_output_through_tables(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    methods = "bots,random,bots_rho0.5=bots:rho=0.5"
    cmd = [
        sys.executable,
        "-m",
        "bots_verl.sim",
        "--scenario",
        "math",
        "--methods",
        methods,
        "--seeds",
        "2",
        "--steps",
        "12",
        "--eval-every",
        "3",
        "--pool-size",
        "150",
        "--out",
        str(out),
        "--no-plots",
        "--no-progress",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)

    runs = load_runs([out])
    assert sorted({(r.label, r.seed) for r in runs}) == [
        (m, s) for m in ("bots", "bots_rho0.5", "random") for s in (0, 1)
    ]
    table = paper_tables.main_table(runs)
    assert table.rows == ["random", "bots", "bots_rho0.5"]
    assert table.accuracy["math"].startswith("val-core/sim-math/acc/mean@")
    # 12 steps * 32 tasks * 16 rollouts for every method: the rollout ratio equals TTB(100%)
    assert table.cell("bots", "math", "Roll100").mean == pytest.approx(table.cell("bots", "math", "TTB100").mean)
    assert paper_tables.ablation_table(runs, "rho").rows == ["ρ = 0.1", "ρ = 0.5"]

    # The simulator scores with the same core functions, so where its summary has a number, ours must match.
    summary = json.loads((out / "summary.json").read_text()).get("summary", {})
    compared = 0
    for label in ("bots", "bots_rho0.5"):
        for key, sim_key in SIM_KEYS.items():
            theirs = summary.get(label, {}).get(sim_key)
            if not isinstance(theirs, dict):
                continue
            ours = table.cell(label, "math", key)
            assert ours.n == theirs["n"] and ours.n_missing == theirs["n_missing"], (label, key)
            if ours.n:
                assert math.isclose(ours.mean, theirs["mean"], rel_tol=1e-9), (label, key)
            compared += 1
    assert compared > 0, "the simulator's summary.json has none of the compared metrics"

    tex = tmp_path / "t.tex"
    assert tables.main(["--runs", str(out), "--table", "all", "--format", "latex", "--out", str(tex)]) == 0
    # main + rho (no lambda or selection sweep) + places + overhead
    assert tex.read_text().count(r"\begin{table}") == 4
