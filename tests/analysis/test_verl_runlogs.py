"""Tables and figures from run logs shaped exactly as ``python -m bots_verl.main`` writes them (see ``verl_runlogs``).

Math, Qwen2.5-1.5B-Instruct, 8 steps, evaluations every 2 steps, seeds 0 and 1, from the recipes themselves: Random,
Offline, BOTS-MoPPS, BOTS-DOTS, BOTS, the ρ sweep at ρ = 0 and 0.1 (0.1 duplicates the main BOTS run on purpose),
the λ sweep at 0 and 1, and the greedy run. Accuracy curves (steps 0, 2, 4, 6, 8), Random's best within 2/4/8 steps
being 0.2/0.3/0.5, first reached at steps 2/4/8:

- BOTS (.1, .3, .4, .5, .6): TTB 1, 2/4, 6/8; BSF .3/.2, .4/.3, .6/.5
- BOTS-MoPPS, bots_rho0.1 and bots_lambda0: Random's curve (every ratio 1)
- BOTS-DOTS, bots_rho0 and greedy (.1, .2, .2, .3, .4): TTB 1, 6/4, never; BSF 1, .2/.3, .4/.5
- Offline (.1, .2, .35, .4, .45): TTB 1, 1, never; BSF 1, .35/.3, .45/.5
- bots_lambda1.0: BOTS' curve
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verl_runlogs import recipe_runs, write_verl_run

from analysis import figures, overhead, paper_tables, places, tables
from analysis.loader import LoadError, load_run, load_runs

RANDOM = {0: 0.1, 2: 0.2, 4: 0.3, 6: 0.4, 8: 0.5}
BOTS = {0: 0.1, 2: 0.3, 4: 0.4, 6: 0.5, 8: 0.6}
SLOW = {0: 0.1, 2: 0.2, 4: 0.2, 6: 0.3, 8: 0.4}
OFFLINE = {0: 0.1, 2: 0.2, 4: 0.35, 6: 0.4, 8: 0.45}
CURVES = {
    "random": RANDOM,
    "offline_easy2hard": OFFLINE,
    "bots_mopps": RANDOM,
    "bots_dots": SLOW,
    "bots": BOTS,
    "bots_rho0": SLOW,
    "bots_rho0.1": RANDOM,
    "bots_lambda0": RANDOM,
    "bots_lambda1.0": BOTS,
    "bots_greedy": SLOW,
}
#: (script, environment) for every run above
SCRIPTS = [
    *(f"run_math_qwen2.5_1.5b_{m}.sh" for m in ("random", "offline_easy2hard", "bots_mopps", "bots_dots", "bots")),
    ("ablations/run_math_qwen2.5_1.5b_rho_sweep.sh", {"RHO_VALUES": "0 0.1"}),
    ("ablations/run_math_qwen2.5_1.5b_lambda_sweep.sh", {"LAMBDA_VALUES": "0 1.0"}),
    "ablations/run_math_qwen2.5_1.5b_greedy.sh",
]
# per step: selection 2 ms + update 1 ms in the actor, 8 ms as the trainer waits, 10 s per step
TIMINGS = {
    "bots/select_ms": 2.0,
    "bots/update_ms": 1.0,
    "bots/select_roundtrip_ms": 4.0,
    "bots/update_roundtrip_ms": 3.0,
    "bots/read_ms": 1.0,
    "timing_s/step": 10.0,
}


def _method(experiment: str) -> str:
    return experiment.split("-instruct_", 1)[1].rsplit("_s", 1)[0]


def _per_step(method: str, lam: float, interpolation: bool):
    def metrics(step: int) -> dict[str, float]:
        data = {"bots/batch/effective_task_ratio": 0.5, "bots/rollouts": 512.0, **TIMINGS}
        if interpolation:
            data.update({"bots/estimator/pearson": 0.45 + 0.01 * step, "bots/estimator/auc": 0.7})
        if method != "random":
            sampled = 0.5 + 0.2 * (lam - 0.1)  # small lambda samples below the observed rate, large above
            data.update(
                {
                    "bots/selection/sampled_p_mean": sampled,
                    "bots/selection/observed_p_mean": 0.5,
                    "bots/selection/sampled_p_bias": sampled - 0.5,
                }
            )
        return data

    return metrics


@pytest.fixture(scope="module")
def verl_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("verl_runs")
    root = tmp / "runs"
    with pytest.MonkeyPatch.context() as monkeypatch:
        for item in SCRIPTS:
            script, env = (item, {}) if isinstance(item, str) else item
            for experiment, seed, config, argv in recipe_runs(script, tmp / Path(script).stem, (0, 1), **env):
                method = _method(experiment)
                # the yaml declares the paper's keys as null: the selector's own default (lam 0.1 for these methods)
                hparams = {k: v for k, v in config.bots.get("hparams", {}).items() if v is not None}
                per_step = _per_step(method, float(hparams.get("lam", 0.1)), hparams.get("evidence") == "interpolation")
                # seed 1 of BOTS crashed after step 5 and resumed from its step-4 checkpoint
                resume = 4 if (method, seed) == ("bots", 1) else None
                write_verl_run(config, root, CURVES[method], per_step, 8, monkeypatch, argv, resume_from=resume)
    return root


def test_meta_json_is_what_the_entry_point_writes(verl_runs: Path) -> None:
    runs = {(r.label, r.seed): r for r in load_runs([verl_runs])}
    assert len(runs) == 2 * len(CURVES)
    dots = runs[("bots_dots", 0)]
    meta = json.loads((dots.path / "meta.json").read_text())
    assert (meta["source"], meta["domain"], meta["model"], meta["method"], meta["seed"]) == (
        "verl",
        "math",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "bots_dots",
        0,
    )
    assert meta["extra"]["selector"] == "bots" and "selector" not in meta["hparams"]
    effective = meta["extra"]["effective_hparams"]
    assert (effective["lam"], effective["rho"], effective["selection"], effective["evidence"]) == (
        1.0,
        1.0,
        "greedy",
        "interpolation",
    )
    # the recipe sets these as overrides (recipes/common.sh); bots_trainer.yaml sets none; the prior is bots' default
    sources = meta["extra"]["hparam_sources"]
    assert (sources["lam"], sources["rho"], sources["selection"], sources["alpha0"]) == (
        "override",
        "override",
        "override",
        "default",
    )
    assert "yaml" not in sources.values()
    assert dots.selector == "bots" and dots.total_steps == 8 and dots.model_name == "Qwen2.5-1.5B-Instruct"
    assert runs[("bots_mopps", 1)].flat_hparams["evidence"] == "none"
    # the resumed run: the crashed attempt's file kept as a part, the repeated step 5 from the second attempt
    resumed = runs[("bots", 1)]
    assert sorted(p.name for p in resumed.path.glob("metrics*.jsonl")) == ["metrics.jsonl", "metrics.part0.jsonl"]
    assert resumed.metrics.loc[5, "bots/select_ms"] == 2.0 and resumed.last_step == 8
    assert load_run(resumed.path).metrics.loc[4, "val-core/math500/acc/mean@1"] == pytest.approx(0.4)


def test_rho_lambda_and_selection_ablations(verl_runs: Path) -> None:
    runs = load_runs([verl_runs])
    rho = paper_tables.ablation_table(runs, "rho")
    # BOTS-MoPPS (ρ = 0 but λ = 0) and BOTS-DOTS (ρ = 1 but λ = 1, greedy) are baselines, not sweep points
    assert rho.rows == ["ρ = 0", "ρ = 0.1"]
    # ρ = 0.1 is the main BOTS run (bots_rho0.1, the same config, has Random's curve and would give 1)
    assert rho.cell("ρ = 0.1", "math", "TTB50").mean == pytest.approx(0.5)
    assert rho.cell("ρ = 0", "math", "TTB50").mean == pytest.approx(1.5)
    assert rho.cell("ρ = 0", "math", "TTB100").n == 0
    lam = paper_tables.ablation_table(runs, "lam")
    assert lam.rows == ["λ = 0", "λ = 0.1", "λ = 1"]
    assert lam.cell("λ = 0", "math", "TTB100").mean == pytest.approx(1.0)
    assert lam.cell("λ = 1", "math", "TTB100").mean == pytest.approx(0.75)
    selection = paper_tables.ablation_table(runs, "selection")
    assert selection.rows == ["selection = thompson", "selection = greedy"]
    assert selection.cell("selection = greedy", "math", "BSF50").mean == pytest.approx(0.2 / 0.3)


def test_main_table_and_places(verl_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = load_runs([verl_runs])
    main = paper_tables.main_table(runs, methods=["paper"])
    assert main.rows == ["random", "offline_easy2hard", "bots_mopps", "bots_dots", "bots"]
    expected = {"TTB25": 1.0, "TTB50": 0.5, "TTB100": 0.75, "BSF25": 1.5, "BSF50": 0.4 / 0.3, "BSF100": 1.2}
    for key, value in expected.items():
        assert main.cell("bots", "math", key).mean == pytest.approx(value), key
        assert main.cell("random", "math", key).mean == 1.0, key
    # ranked by hand from the module docstring's curves (ties share the place: 1, 1, 3)
    counts = places.place_counts(main)
    model = "Qwen2.5-1.5B-Instruct"
    got = {row: (counts.first[(model, row)], counts.second[(model, row)]) for row in main.rows}
    assert got == {
        "random": (1, 4),
        "offline_easy2hard": (1, 3),
        "bots_mopps": (1, 4),
        "bots_dots": (1, 1),
        "bots": (6, 0),
    }
    assert counts.metrics[model] == 6
    assert tables.main(["--runs", str(verl_runs), "--methods", "paper", "--table", "places"]) == 0
    assert "| Qwen2.5-1.5B-Instruct | BOTS | 6 | 0 | 6 |" in capsys.readouterr().out


def test_overhead_share_per_run(verl_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = load_runs([verl_runs])
    resumed = next(r for r in runs if (r.label, r.seed) == ("bots", 1))
    one = overhead.run_overhead(resumed)  # the crashed attempt's step 5 (+1000 ms) must not count
    assert (one.select_ms, one.update_ms, one.trainer_ms, one.step_s) == (2.0, 1.0, 8.0, 10.0)
    assert one.share == pytest.approx(3 / 10_000) and one.trainer_share == pytest.approx(8 / 10_000)
    table = overhead.overhead_table(runs)
    cell = table.cells[("Qwen2.5-1.5B-Instruct", "math", "bots")]
    assert cell["share"].mean == pytest.approx(0.03) and cell["trainer_share"].mean == pytest.approx(0.08)
    assert tables.main(["--runs", str(verl_runs), "--table", "overhead"]) == 0
    assert "| Qwen2.5-1.5B-Instruct | math | BOTS-DOTS | 2.00 [2.00, 2.00] |" in capsys.readouterr().out


def test_estimator_and_lambda_figures(verl_runs: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    runs = load_runs([verl_runs])
    written = figures.save_all(runs, tmp_path / "fig")
    names = sorted(p.name for p in written)
    assert names == sorted(f"math_{k}.{e}" for k in figures.FIGURES for e in ("png", "pdf"))
    assert all(p.stat().st_size > 1000 for p in written)
    fig = figures.lambda_bias_figure(runs, "math")
    bias_ax, level_ax = fig.axes
    legend = [t.get_text() for t in bias_ax.get_legend().get_texts()]
    assert legend == ["λ = 0 (n=2)", "λ = 0.1 (n=2)", "λ = 1 (n=2)"]  # λ = 0.1: the main run, not both
    assert [t.get_text() for t in level_ax.get_xticklabels()] == ["λ = 0", "λ = 0.1", "λ = 1"]
    estimator = figures.estimator_figure(runs, "math")
    lines = [t.get_text() for t in estimator.axes[0].get_legend().get_texts()]
    assert "BOTS-MoPPS" not in " ".join(lines) and any(line.startswith("BOTS, mean 0.") for line in lines)
    no_estimator = [r for r in runs if r.label in ("random", "bots_mopps")]
    with pytest.raises(LoadError, match=r"domain math: no run logs 'bots/estimator/pearson'"):
        figures.estimator_figure(no_estimator, "math")
    with pytest.raises(LoadError, match=r"two or more λ values"):
        figures.lambda_bias_figure(
            [r for r in runs if r.label != "bots_lambda0" and r.label != "bots_lambda1.0"], "math"
        )
