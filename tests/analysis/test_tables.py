"""The tables on hand-made logs with answers worked out by hand (see ``conftest.py`` for the curves).

Budget 8 steps, so the horizons of 25/50/100% are steps 2, 4 and 8. Random's best within them:
seed 0: 0.2, 0.3, 0.5; seed 1: 0.2, 0.4, 0.8.

- bots seed 0 (0.1, 0.3, 0.5, 0.5, 0.6): reaches 0.2 at step 2 (TTB25 = 1), 0.3 at 2 (TTB50 = 0.5), 0.5 at 4
  (TTB100 = 0.5); BSF = 0.3/0.2, 0.5/0.3, 0.6/0.5. At 96 rollouts per step it spends 384 to reach 0.5 against
  Random's 8 * 64 = 512: Roll100 = 0.75.
- bots seed 1 (0.2, 0.2, 0.4, 0.6, 0.7): 0.2 at step 0 (TTB25 = 0), 0.4 at 4 (TTB50 = 1), 0.8 never; BSF = 1, 1, 0.875.
- offline (0.0, 0.1, 0.2, 0.3, 0.4) both seeds: TTB25 = 4/2 = 2; TTB50 = 6/4 and 8/4; 0.5 and 0.8 never ("—").
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from analysis_fixtures import CURVES, ETR, write_run

from analysis import tables
from analysis.loader import LoadError, load_runs
from bots_verl.core.metrics import interval


def _mean(table: tables.Table, row: str, key: str) -> float:
    return table.cell(row, "math", key).mean


def test_main_table_known_answers(known: Path) -> None:
    table = tables.main_table(load_runs([known]))
    assert table.rows == ["random", "offline", "bots"]
    expected_bots = {
        "TTB25": 0.5,
        "TTB50": 0.75,
        "TTB100": 0.5,
        "BSF25": (1.5 + 1.0) / 2,
        "BSF50": (0.5 / 0.3 + 1.0) / 2,
        "BSF100": (1.2 + 0.875) / 2,
        "ETR": 0.7,
        "Roll100": 0.75,
    }
    for key, value in expected_bots.items():
        assert _mean(table, "bots", key) == pytest.approx(value), key
    # TTB100 and Roll100: seed 1 never reaches Random's 0.8, so one of two seeds is missing.
    assert table.cell("bots", "math", "TTB100").n_missing == 1
    assert _mean(table, "offline", "TTB25") == pytest.approx(2.0)
    assert _mean(table, "offline", "TTB50") == pytest.approx(1.75)
    assert table.cell("offline", "math", "TTB100").n == 0
    # Random against itself: its curves rise monotonically here, so every ratio is exactly 1.
    for key in ("TTB25", "TTB50", "TTB100", "BSF25", "BSF50", "BSF100", "Roll100"):
        assert _mean(table, "random", key) == pytest.approx(1.0), key
    # The intervals are the core's Student-t intervals over the two seeds.
    assert table.cell("bots", "math", "TTB25") == interval([1.0, 0.0])
    assert table.cell("random", "math", "ETR") == interval([ETR[("random", 0)], ETR[("random", 1)]])
    assert [c.key for c in table.columns["math"]] == [
        "TTB25",
        "TTB50",
        "TTB100",
        "BSF25",
        "BSF50",
        "BSF100",
        "ETR",
        "Roll100",
    ]


def test_markdown_and_latex_render_never_reached(known: Path) -> None:
    table = tables.main_table(load_runs([known]))
    md = tables.to_markdown(table)
    offline = next(line for line in md.splitlines() if line.startswith("| offline"))
    cells = [c.strip() for c in offline.strip("|").split("|")]
    assert cells[0] == "offline" and cells[1] == "2.00 [2.00, 2.00]" and cells[3] == "—" and cells[8] == "—"
    bots = next(line for line in md.splitlines() if line.startswith("| bots"))
    assert "0.50 (1/2 —)" in bots
    assert "math TTB(25%)↓" in md and "seeds: random 2, offline 2, bots 2" in md
    tex = tables.to_latex(table)
    assert r"\multicolumn{8}{c}{math}" in tex and "TTB(25\\%)$\\downarrow$" in tex
    assert "offline & 2.00 [2.00, 2.00] & " in tex and " & --- & " in tex
    assert "—" not in tex and tex.count(r"\\") == 2 + 3  # two header lines, three rows


def test_wall_clock_column_and_multi_domain(tmp_path: Path) -> None:
    for domain in ("code", "math"):
        for method, seed in (("random", 0), ("random", 1), ("bots", 0), ("bots", 1)):
            # bots: 2 s/step and reaches Random's best at step 4 -> 8 s against Random's 8 steps * 1 s.
            step_seconds = 2.0 if method == "bots" else 1.0 if domain == "math" else None
            write_run(tmp_path, method, seed, CURVES[(method, 0)], domain=domain, step_seconds=step_seconds)
    with pytest.raises(LoadError, match=r"domain code: some runs log 'timing_s/step' and these do not: .*random/seed0"):
        tables.main_table(load_runs([tmp_path]))
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", 0)], domain="code", step_seconds=1.0)
    table = tables.main_table(load_runs([tmp_path]))
    assert table.domains == ["code", "math"]
    assert [c.key for c in table.columns["math"]][-1] == "Time100"
    assert table.cell("bots", "math", "Time100").mean == pytest.approx(1.0)
    assert table.cell("bots", "math", "Roll100").mean == pytest.approx(0.5)
    header = tables.to_markdown(table).splitlines()[2]
    assert header.index("code TTB(25%)") < header.index("math TTB(25%)")


def test_ablation_tables_group_by_hparams(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", seed)])
        # a ρ sweep at the default λ, a λ sweep at the default ρ, and a variant that must not enter either table
        for rho, curve in ((0.0, CURVES[("offline", seed)]), (0.1, CURVES[("bots", seed)]), (0.5, CURVES[("bots", 0)])):
            write_run(tmp_path, f"bots_rho{rho}", seed, curve, hparams={"selector": "bots", "hparams": {"rho": rho}})
        write_run(
            tmp_path, "bots_lam1", seed, CURVES[("random", seed)], hparams={"selector": "bots", "hparams": {"lam": 1.0}}
        )
        write_run(
            tmp_path,
            "bots_greedy",
            seed,
            CURVES[("random", seed)],
            hparams={"selector": "bots", "hparams": {"do_sample": False}},
        )
    runs = load_runs([tmp_path])
    rho = tables.ablation_table(runs, "rho")
    assert rho.rows == ["ρ = 0", "ρ = 0.1", "ρ = 0.5"]
    assert rho.cell("ρ = 0.1", "math", "TTB50").mean == pytest.approx(0.75)
    assert rho.cell("ρ = 0", "math", "TTB100").n == 0
    assert rho.cell("ρ = 0.5", "math", "BSF25").mean == pytest.approx((1.5 + 1.5) / 2)
    lam = tables.ablation_table(runs, "lam")
    # bots_rho0.1 has no λ, so it is the default λ = 0.1 point; bots_lam1 the λ = 1 point
    assert lam.rows == ["λ = 0.1", "λ = 1"]
    assert lam.cell("λ = 1", "math", "BSF100").mean == pytest.approx(1.0)
    assert "$\\rho$ = 0.1 &" in tables.to_latex(rho)
    # labels are unique in the simulator's layout, so the main table keeps them as they are
    assert tables.main_table(runs).rows == [
        "random",
        "bots_greedy",
        "bots_lam1",
        "bots_rho0.0",
        "bots_rho0.1",
        "bots_rho0.5",
    ]
    with pytest.raises(LoadError, match="need runs of selector 'nope'"):
        tables.ablation_table(runs, "rho", method="nope")


def test_main_table_splits_a_label_by_varying_hparams(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", seed)])
        for rho in (0.1, 0.2):
            write_run(tmp_path / f"rho{rho}", "bots", seed, CURVES[("bots", seed)], hparams={"rho": rho, "lam": 0.1})
    table = tables.main_table(load_runs([tmp_path]))
    assert table.rows == ["random", "bots (rho=0.1)", "bots (rho=0.2)"]


def test_cli_writes_markdown_and_latex(known: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t" / "main.tex"
    assert tables.main(["--runs", str(known), "--format", "latex", "--out", str(out)]) == 0
    assert out.read_text().startswith(r"\begin{table}")
    assert tables.main(["--runs", str(known), "--table", "all", "--digits", "3"]) == 0
    printed = capsys.readouterr().out
    assert "**Main table**" in printed and "0.750 [" in printed and "ablation" not in printed
    assert tables.main(["--runs", str(known), "--table", "rho"]) == 2
    assert "ρ ablation: need runs of selector 'bots'" in capsys.readouterr().err


def test_random_row_scores_itself_honestly(tmp_path: Path) -> None:
    """Random's TTB against itself is below 1 when its best within the horizon came before the horizon."""
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, (0.1, 0.4, 0.3, 0.3, 0.5))
    table = tables.main_table(load_runs([tmp_path]))
    # best within step 4 is 0.4, first reached at step 2: 2 / 4
    assert table.cell("random", "math", "TTB50").mean == pytest.approx(0.5)
    assert math.isclose(table.cell("random", "math", "BSF50").mean, 1.0)
