"""The tables on hand-made logs with answers worked out by hand (see ``conftest.py`` for the curves).

Budget 8 steps, so the horizons of 25/50/100% are steps 2, 4 and 8. Random's best within them:
seed 0: 0.2, 0.3, 0.5; seed 1: 0.2, 0.4, 0.8, each first reached by Random at step 2, 4 and 8, so TTB's default
denominator (Random's own steps) equals the budget one on these curves.

- bots seed 0 (0.1, 0.3, 0.5, 0.5, 0.6): reaches 0.2 at step 2 (TTB25 = 1), 0.3 at 2 (TTB50 = 0.5), 0.5 at 4
  (TTB100 = 0.5); BSF = 0.3/0.2, 0.5/0.3, 0.6/0.5. At 96 rollouts per step it spends 384 to reach 0.5 against
  Random's 8 * 64 = 512: Roll100 = 0.75.
- bots seed 1 (0.2, 0.2, 0.4, 0.6, 0.7): 0.2 at step 0 (TTB25 = 0), 0.4 at 4 (TTB50 = 1), 0.8 never; BSF = 1, 1, 0.875.
- offline_easy2hard (0.0, 0.1, 0.2, 0.3, 0.4) both seeds: TTB25 = 4/2 = 2; TTB50 = 6/4 and 8/4; 0.5 and 0.8 never ("—").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_fixtures import CURVES, ETR, write_run

from analysis import paper_tables, table_text, tables
from analysis.loader import LoadError, load_runs
from analysis.table_model import PAPER_LABELS, Table
from bots_verl.core.selection_metrics import interval


def _mean(table: Table, row: str, key: str) -> float:
    return table.cell(row, "math", key).mean


def test_main_table_known_answers(known: Path) -> None:
    table = paper_tables.main_table(load_runs([known]))
    assert table.rows == ["random", "offline_easy2hard", "bots"] and table.models == ["test"]
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
    assert _mean(table, "offline_easy2hard", "TTB25") == pytest.approx(2.0)
    assert _mean(table, "offline_easy2hard", "TTB50") == pytest.approx(1.75)
    assert table.cell("offline_easy2hard", "math", "TTB100").n == 0
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
    table = paper_tables.main_table(load_runs([known]))
    md = table_text.to_markdown(table)
    # the paper's row names
    offline = next(line for line in md.splitlines() if line.startswith("| Offline (easy→hard)"))
    cells = [c.strip() for c in offline.strip("|").split("|")]
    assert cells[1] == "2.00 [2.00, 2.00]" and cells[3] == "—" and cells[8] == "—"
    bots = next(line for line in md.splitlines() if line.startswith("| BOTS |"))
    assert "0.50 (1/2 —)" in bots
    assert "math TTB(25%)↓" in md and "seeds: Random 2, Offline (easy→hard) 2, BOTS 2" in md
    assert "over Random's own steps to it (Random = 1)" in md
    tex = table_text.to_latex(table)
    assert r"\multicolumn{8}{c}{math}" in tex and "TTB(25\\%)$\\downarrow$" in tex
    assert r"Offline (easy$\rightarrow$hard) & 2.00 [2.00, 2.00] & " in tex and " & --- & " in tex
    assert "—" not in tex and tex.count(r"\\") == 2 + 3  # two header lines, three rows


def test_wall_clock_column_and_multi_domain(tmp_path: Path) -> None:
    for domain in ("code", "math"):
        for method, seed in (("random", 0), ("random", 1), ("bots", 0), ("bots", 1)):
            # bots: 2 s/step and reaches Random's best at step 4 -> 8 s against Random's 8 steps * 1 s.
            step_seconds = 2.0 if method == "bots" else 1.0 if domain == "math" else None
            write_run(tmp_path, method, seed, CURVES[(method, 0)], domain=domain, step_seconds=step_seconds)
    with pytest.raises(LoadError, match=r"domain code: some runs log 'timing_s/step' and these do not: .*random/seed0"):
        paper_tables.main_table(load_runs([tmp_path]))
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", 0)], domain="code", step_seconds=1.0)
    table = paper_tables.main_table(load_runs([tmp_path]))
    assert table.domains == ["code", "math"]
    assert [c.key for c in table.columns["math"]][-1] == "Time100"
    assert table.cell("bots", "math", "Time100").mean == pytest.approx(1.0)
    assert table.cell("bots", "math", "Roll100").mean == pytest.approx(0.5)
    header = table_text.to_markdown(table).splitlines()[2]
    assert header.index("code TTB(25%)") < header.index("math TTB(25%)")


def test_ablation_tables_group_by_hparams(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", seed)])
        # a ρ sweep at the default λ, a λ sweep at the default ρ, a greedy run, and variants that must enter neither
        for rho, curve in (
            (0.0, CURVES[("offline_easy2hard", seed)]),
            (0.1, CURVES[("bots", seed)]),
            (0.5, CURVES[("bots", 0)]),
        ):
            write_run(tmp_path, f"bots_rho{rho}", seed, curve, hparams={"selector": "bots", "hparams": {"rho": rho}})
        write_run(
            tmp_path, "bots_lam1", seed, CURVES[("random", seed)], hparams={"selector": "bots", "hparams": {"lam": 1.0}}
        )
        greedy = {"selector": "bots", "hparams": {"selection": "greedy"}}
        write_run(tmp_path, "bots_greedy", seed, CURVES[("random", seed)], hparams=greedy)
        # BOTS-DOTS-like: greedy at λ = ρ = 1 belongs to no single-parameter ablation
        dots = {"selector": "bots", "hparams": {"lam": 1.0, "rho": 1.0, "selection": "greedy"}}
        write_run(tmp_path, "bots_dots", seed, CURVES[("bots", 0)], hparams=dots)
        no_plugin = {"selector": "bots", "hparams": {"rho": 0.5, "evidence": "none"}}
        write_run(tmp_path, "bots_noplugin", seed, CURVES[("bots", 0)], hparams=no_plugin)
    runs = load_runs([tmp_path])
    rho = paper_tables.ablation_table(runs, "rho")
    assert rho.rows == ["ρ = 0", "ρ = 0.1", "ρ = 0.5"]
    assert rho.cell("ρ = 0.1", "math", "TTB50").mean == pytest.approx(0.75)
    assert rho.cell("ρ = 0", "math", "TTB100").n == 0
    assert rho.cell("ρ = 0.5", "math", "BSF25").mean == pytest.approx((1.5 + 1.5) / 2)
    lam = paper_tables.ablation_table(runs, "lam")
    # bots_rho0.1 has no λ, so it is the default λ = 0.1 point; bots_lam1 the λ = 1 point
    assert lam.rows == ["λ = 0.1", "λ = 1"]
    assert lam.cell("λ = 1", "math", "BSF100").mean == pytest.approx(1.0)
    selection = paper_tables.ablation_table(runs, "selection")
    assert selection.rows == ["selection = thompson", "selection = greedy"]
    assert selection.cell("selection = greedy", "math", "TTB50").mean == pytest.approx(1.0)
    assert "$\\rho$ = 0.1 &" in table_text.to_latex(rho)
    # labels are unique in the simulator's layout, so the main table keeps them as they are, paper rows first
    assert paper_tables.main_table(runs).rows == [
        "random",
        "bots_dots",
        "bots_greedy",
        "bots_lam1",
        "bots_noplugin",
        "bots_rho0.0",
        "bots_rho0.1",
        "bots_rho0.5",
    ]
    with pytest.raises(LoadError, match="need runs of selector 'nope'"):
        paper_tables.ablation_table(runs, "rho", method="nope")


def test_ablation_cell_shared_by_the_main_run_and_a_sweep_run_takes_the_main_run(tmp_path: Path) -> None:
    """The ρ = 0.1 sweep point and the main BOTS run are the same config: the main run fills the cell, no error."""
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", seed)])
        write_run(tmp_path, "bots", seed, CURVES[("bots", seed)], hparams={"rho": 0.1, "lam": 0.1})
        for rho in (0.1, 0.5):
            hparams = {"selector": "bots", "rho": rho, "lam": 0.1}
            write_run(tmp_path, f"bots_rho{rho}", seed, CURVES[("random", seed)], hparams=hparams)
    rho = paper_tables.ablation_table(load_runs([tmp_path]), "rho")
    assert rho.rows == ["ρ = 0.1", "ρ = 0.5"]
    assert rho.cell("ρ = 0.1", "math", "TTB50").mean == pytest.approx(0.75)  # the bots curves, not Random's


def test_main_table_splits_a_label_by_varying_hparams(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", seed)])
        for rho in (0.1, 0.2):
            write_run(tmp_path / f"rho{rho}", "bots", seed, CURVES[("bots", seed)], hparams={"rho": rho, "lam": 0.1})
    table = paper_tables.main_table(load_runs([tmp_path]))
    assert table.rows == ["random", "bots (rho=0.1)", "bots (rho=0.2)"]


def test_a_path_in_the_hparams_does_not_split_a_label(tmp_path: Path) -> None:
    """The oracle records the train file it reads (``truth_args.data``): runs of one build trained from two
    directories are one row, while a real setting inside the same value still splits it."""
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, CURVES[("random", seed)])
        data = f"/runs/{'first' if seed == 0 else 'moved'}/data/train.parquet"
        write_run(tmp_path, "bots", seed, CURVES[("bots", seed)], hparams={"truth_args": {"data": data, "t": 1.0}})
    assert paper_tables.main_table(load_runs([tmp_path])).rows == ["random", "bots"]
    write_run(tmp_path / "hot", "bots", 0, CURVES[("bots", 0)], hparams={"truth_args": {"data": "/d", "t": 2.0}})
    write_run(tmp_path / "hot", "bots", 1, CURVES[("bots", 1)], hparams={"truth_args": {"data": "/d", "t": 2.0}})
    rows = paper_tables.main_table(load_runs([tmp_path])).rows
    assert len(rows) == 3 and all(r.startswith("bots (truth_args=") for r in rows[1:])


def test_cli_writes_markdown_and_latex(known: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t" / "main.tex"
    assert tables.main(["--runs", str(known), "--format", "latex", "--out", str(out)]) == 0
    assert out.read_text().startswith(r"\begin{table}")
    assert tables.main(["--runs", str(known), "--table", "all", "--digits", "3"]) == 0
    printed = capsys.readouterr().out
    assert "**Main table**" in printed and "0.750 [" in printed and "ablation" not in printed
    assert tables.main(["--runs", str(known), "--table", "rho"]) == 2
    assert "ρ ablation: need runs of selector 'bots'" in capsys.readouterr().err


def test_random_row_is_one_and_the_budget_denominator_is_an_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random peaks early (best within step 4 is 0.4, reached at step 2): its TTB is 1 by default, 2/4 by budget."""
    for seed in (0, 1):
        write_run(tmp_path, "random", seed, (0.1, 0.4, 0.3, 0.3, 0.5))
        write_run(tmp_path, "bots", seed, (0.1, 0.2, 0.4, 0.5, 0.5))
    runs = load_runs([tmp_path])
    table = paper_tables.main_table(runs)
    for key in ("TTB25", "TTB50", "TTB100", "BSF25", "BSF50", "BSF100", "Roll100"):
        assert table.cell("random", "math", key).mean == 1.0, key
    assert table.cell("bots", "math", "TTB50").mean == pytest.approx(4 / 2)
    budget = paper_tables.main_table(runs, ttb_denominator="budget")
    assert budget.cell("random", "math", "TTB50").mean == pytest.approx(2 / 4)
    assert budget.cell("bots", "math", "TTB50").mean == pytest.approx(4 / 4)
    assert budget.cell("random", "math", "Roll100").mean == pytest.approx(1.0)  # 0.5 first at step 8 = the budget
    assert tables.main(["--runs", str(tmp_path), "--ttb-denominator", "budget"]) == 0
    out = capsys.readouterr().out
    assert "| Random | 1.00 [1.00, 1.00] | 0.50 [0.50, 0.50] |" in out and "over x% of the budget" in out
    with pytest.raises(ValueError, match="TTB denominator"):
        paper_tables.main_table(runs, ttb_denominator="steps")


def test_paper_rows_in_the_paper_order_with_its_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = ["bots", "bots_greedy", "bots_dots", "offline_easy2hard", "bots_mopps", "random"]
    for seed in (0, 1):
        for label in labels:
            write_run(tmp_path, label, seed, CURVES[("bots" if label != "random" else "random", seed)])
    runs = load_runs([tmp_path])
    assert paper_tables.main_table(runs).rows == [
        "random",
        "offline_easy2hard",
        "bots_mopps",
        "bots_dots",
        "bots",
        "bots_greedy",
    ]
    assert paper_tables.main_table(runs, methods=["paper"]).rows == list(PAPER_LABELS)
    assert tables.main(["--runs", str(tmp_path), "--methods", "paper"]) == 0
    names = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert names == ["Random", "Offline (easy→hard)", "BOTS-MoPPS", "BOTS-DOTS", "BOTS"]
    with pytest.raises(LoadError, match=r"no runs labelled \['nope'\]"):
        paper_tables.main_table(runs, methods=["nope"])


def test_one_table_holds_both_model_sizes(tmp_path: Path) -> None:
    """Rows are grouped per model (1.5B first), each paired with its own Random; lengths may differ between sizes."""
    small, large = "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct"
    for seed in (0, 1):
        for model, root in ((large, tmp_path / "7b"), (small, tmp_path / "1.5b")):
            write_run(root, "random", seed, CURVES[("random", seed)], model=model)
        write_run(tmp_path / "1.5b", "bots", seed, CURVES[("bots", seed)], model=small)
        # the 7B BOTS run is Random's curve: TTB = 1 exactly, unlike the 1.5B one
        write_run(tmp_path / "7b", "bots", seed, CURVES[("random", seed)], model=large)
    runs = load_runs([tmp_path])
    table = paper_tables.main_table(runs)
    assert table.models == ["Qwen2.5-1.5B-Instruct", "Qwen2.5-7B-Instruct"]
    assert table.rows_of("Qwen2.5-7B-Instruct") == ["random", "bots"]
    assert table.cell("bots", "math", "TTB50", model="Qwen2.5-1.5B-Instruct").mean == pytest.approx(0.75)
    assert table.cell("bots", "math", "TTB50", model="Qwen2.5-7B-Instruct").mean == pytest.approx(1.0)
    with pytest.raises(KeyError, match="pass model="):
        table.cell("bots", "math", "TTB50")
    md = table_text.to_markdown(table).splitlines()
    assert md[2].startswith("| Model | Method | math TTB(25%)↓")
    body = [line.split("|")[1:3] for line in md[4:8]]
    assert [(m.strip(), r.strip()) for m, r in body] == [
        ("Qwen2.5-1.5B-Instruct", "Random"),
        ("Qwen2.5-1.5B-Instruct", "BOTS"),
        ("Qwen2.5-7B-Instruct", "Random"),
        ("Qwen2.5-7B-Instruct", "BOTS"),
    ]
    assert "math (Qwen2.5-7B-Instruct): accuracy" in "\n".join(md)
    # a 7B method without a 7B Random is an error naming the model
    for seed in (0, 1):
        write_run(tmp_path / "3b", "bots", seed, CURVES[("bots", seed)], model="Qwen/Qwen2.5-3B-Instruct")
    with pytest.raises(LoadError, match=r"domain math of Qwen2.5-3B-Instruct: no 'random' baseline runs"):
        paper_tables.main_table(load_runs([tmp_path]))
