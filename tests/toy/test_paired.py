"""Paired statistics (``analysis.paired``) on synthetic benchmark records with known answers, and on the committed
toy results (``recipes/toy/results/summary.json``, the headline: 8 seeds, no run logs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from fake_benchmark import write_benchmark_run

from analysis import paired, paired_inputs, paired_relative, paired_report, paired_stats
from analysis.cost_metrics import Curve
from analysis.loader import LoadError
from bots_verl.runlog import ETR_METRIC, ROLLOUTS_METRIC, STEP_TIME_METRIC, TOY_EXACT_METRIC

RESULTS = Path(__file__).resolve().parents[2] / "recipes" / "toy" / "results"
STEPS = 24
EVERY = 2
START = 0.25
# dyadic slopes, so that "twice the slope reaches the baseline's best (last) accuracy at half the steps" holds exactly
SLOPES = {0: 4 / 4096, 1: 6 / 4096, 2: 3 / 4096}


def _linear(slope: float, steps: int = STEPS, every: int = EVERY) -> dict[str, float]:
    return {str(s): START + slope * s for s in range(0, steps + 1, every)}


def _record(selector: str, seed: int, curve: dict[str, float], steps: int = STEPS) -> dict:
    return {"selector": selector, "seed": seed, "steps": steps, "accuracy": curve}


def _summary(runs: list[dict]) -> dict:
    return {"profile": {"steps": STEPS}, "runs": runs}


def _doubling() -> list[paired_inputs.RunRecord]:
    """``random`` at slope a, ``fast`` at 2a and ``flat`` at 0 (it never reaches random's best), per seed."""
    runs = []
    for seed, a in SLOPES.items():
        runs += [_record("random", seed, _linear(a)), _record("fast", seed, _linear(2 * a))]
        runs.append(_record("flat", seed, _linear(0.0)))
    return paired_inputs.records_from_summary(_summary(runs))


def test_twice_the_slope_halves_the_ratio_and_ttb() -> None:
    comp = paired_stats.compare(_doubling(), "fast")
    assert comp.seeds == sorted(SLOPES) and not comp.unpaired
    st = comp.stats
    for seed, a in SLOPES.items():
        assert st["slope_ratio"].values[seed] == pytest.approx(0.5)
        assert st["slope_ratio"].parts[seed] == pytest.approx((2 * a, a))
        # linear gains: the mean gain over [0, T] is slope * T / 2, the final gain slope * T
        assert st["mean_gain_diff"].values[seed] == pytest.approx((2 * a - a) * STEPS / 2)
        assert st["final_gain_diff"].values[seed] == pytest.approx((2 * a - a) * STEPS)
        # random's best within x of the budget is at x*T; twice the slope reaches it at x*T/2
        assert st["ttb100"].values[seed] == pytest.approx(0.5)
        assert st["ttb50"].values[seed] == pytest.approx(0.5)
        assert st["bsf100"].values[seed] == pytest.approx((START + 2 * a * STEPS) / (START + a * STEPS))
    assert st["slope_ratio"].t.mean == pytest.approx(0.5)
    diffs = [a * STEPS for a in SLOPES.values()]
    assert st["final_gain_diff"].t.mean == pytest.approx(np.mean(diffs))
    # the t interval is the core one over the per-seed values; the bootstrap's stays within their range
    lo, hi = st["final_gain_diff"].bootstrap
    assert st["final_gain_diff"].t.lo < lo <= st["final_gain_diff"].t.mean <= hi < st["final_gain_diff"].t.hi
    assert min(diffs) <= lo and hi <= max(diffs)
    # without run logs the log-based statistics are marked, for every seed
    for key in ("etr_diff", "roll100", "time100"):
        assert not st[key].available and st[key].undefined_counts() == {"no run log": len(SLOPES)}


def test_the_baseline_against_itself_is_the_null() -> None:
    records = _doubling()
    same = [
        paired_inputs.RunRecord("copy", r.seed, r.total_steps, r.accuracy) for r in records if r.selector == "random"
    ]
    comp = paired_stats.compare(records + same, "copy")
    for key in ("ttb25", "ttb50", "ttb100", "bsf100", "slope_ratio"):
        assert comp.stats[key].t.mean == pytest.approx(1.0), key
    for key in ("mean_gain_diff", "final_gain_diff"):
        assert comp.stats[key].t.mean == pytest.approx(0.0), key


def test_never_reached_and_non_positive_slopes_are_counted_not_dropped() -> None:
    comp = paired_stats.compare(_doubling(), "flat")
    ttb = comp.stats["ttb100"]
    assert ttb.t.n == 0 and ttb.t.n_missing == len(SLOPES)
    assert set(ttb.reasons.values()) == {"never reached"}
    slope = comp.stats["slope_ratio"]
    assert slope.undefined_counts() == {"selector slope ≤ 0": len(SLOPES)}
    assert all(slope.parts[s][0] == pytest.approx(0.0) for s in SLOPES)  # the slopes are still reported
    assert all(math.isnan(v) for v in slope.values.values())
    # the differences stay defined: flat gains nothing
    assert comp.stats["final_gain_diff"].t.mean == pytest.approx(-np.mean([a * STEPS for a in SLOPES.values()]))
    md = paired_report.to_markdown([comp])
    assert f"{len(SLOPES)} never reached" in md and f"{len(SLOPES)} selector slope ≤ 0" in md
    out = paired_report.to_dict([comp])["comparisons"]["flat"]["statistics"]["ttb100"]
    assert out["mean"] is None and out["n_undefined"] == len(SLOPES)
    assert set(out["undefined"].values()) == {"never reached"}
    json.dumps(out, allow_nan=False)


def test_one_unreached_seed_is_shown_in_the_overview() -> None:
    runs = [_record("random", s, _linear(a)) for s, a in SLOPES.items()]
    runs += [_record("bots", s, _linear(2 * a if s else 0.0)) for s, a in SLOPES.items()]
    (comp,) = paired_stats.compare_all(paired_inputs.records_from_summary(_summary(runs)))
    ttb = comp.stats["ttb100"]
    assert ttb.reasons == {0: "never reached"} and ttb.t.n == len(SLOPES) - 1
    assert ttb.t.mean == pytest.approx(0.5)
    assert f"(1/{len(SLOPES)} —)" in paired_report.to_markdown([comp]).split("\n\n")[1]


def test_only_seeds_both_have_are_paired() -> None:
    runs = [_record("random", s, _linear(SLOPES[s])) for s in (0, 1)] + [_record("random", 3, _linear(1 / 1024))]
    runs += [_record("bots", s, _linear(2 * SLOPES[s])) for s in (0, 1, 2)]
    records = paired_inputs.records_from_summary(_summary(runs))
    comp = paired_stats.compare(records, "bots")
    assert comp.seeds == [0, 1]
    assert comp.unpaired == {"bots": [2], "random": [3]}
    assert set(comp.stats["slope_ratio"].values) == {0, 1} and comp.stats["slope_ratio"].t.n == 2
    assert "bots seeds [2]; random seeds [3]" in paired_report.to_markdown([comp])
    with pytest.raises(ValueError, match="no seed in common"):
        paired_stats.compare([r for r in records if r.seed != 0 and r.seed != 1], "bots")
    with pytest.raises(ValueError, match="no 'uniform' runs"):
        paired_stats.compare_all(records, baseline="uniform")


def test_a_selector_run_longer_than_the_baseline_is_refused() -> None:
    runs = [_record("random", 0, _linear(1 / 1024, steps=12), steps=12), _record("bots", 0, _linear(1 / 512))]
    with pytest.raises(ValueError, match="longer than the baseline's budget"):
        paired_stats.compare(paired_inputs.records_from_summary(_summary(runs)), "bots")


def test_a_shorter_selector_run_is_censored_at_the_baseline_target() -> None:
    """An arm stopped at half the budget: TTB keeps Random's target, gains compare at equal steps."""
    half = STEPS // 2
    a = SLOPES[0]
    runs = [
        _record("random", 0, _linear(a)),
        _record("random", 1, _linear(a)),
        # seed 0: four times the slope reaches random's final best (at T) at T/4; seed 1: the same slope never does
        _record("ds", 0, _linear(4 * a, steps=half), steps=half),
        _record("ds", 1, _linear(a, steps=half), steps=half),
    ]
    st = paired_stats.compare(paired_inputs.records_from_summary(_summary(runs)), "ds").stats
    assert st["ttb100"].values[0] == pytest.approx(0.25)
    assert math.isnan(st["ttb100"].values[1]) and st["ttb100"].reasons[1] == f"not reached in its {half} steps"
    assert st["bsf50"].values[1] == pytest.approx(1.0)  # horizon T/2: covered, same slope
    assert st["bsf100"].reasons[0] == f"horizon past its {half} steps"
    # at equal steps (T/2): seed 1 has random's slope, so no difference
    assert st["final_gain_diff"].values[1] == pytest.approx(0.0)
    assert st["final_gain_diff"].values[0] == pytest.approx(3 * a * half)
    assert st["slope_ratio"].values[0] == pytest.approx(0.25)


def test_curve_helpers_on_uneven_steps() -> None:
    curve = Curve(np.array([0.0, 1.0, 4.0]), np.array([0.2, 0.3, 0.3]))
    # gain (0, 0.1, 0.1): trapezoids 0.05 over [0, 1] and 0.3 over [1, 4], over the 4 steps spanned
    assert paired_stats.mean_gain(curve) == pytest.approx((0.05 + 0.3) / 4)
    assert paired_stats.final_gain(curve) == pytest.approx(0.1)
    assert paired_stats.slope(curve) == pytest.approx(np.polyfit(curve.steps, curve.values, 1)[0])
    assert math.isnan(paired_stats.slope(Curve(np.array([0.0]), np.array([0.2]))))


def test_bootstrap_is_deterministic() -> None:
    values = [0.3, 0.9, 0.5, 0.7]
    first = paired_stats.bootstrap_interval(values)
    assert paired_stats.bootstrap_interval(values) == first
    assert min(values) <= first[0] < np.mean(values) < first[1] <= max(values)
    assert paired_stats.bootstrap_interval(values, seed=1) != first
    assert paired_stats.bootstrap_interval([*values, float("nan")]) == first  # undefined seeds are not resampled
    assert all(math.isnan(x) for x in paired_stats.bootstrap_interval([0.4, float("nan")]))
    a = paired_report.to_dict(paired_stats.compare_all(_doubling()))
    b = paired_report.to_dict(paired_stats.compare_all(_doubling()))
    assert a == b


def _write_log(root: Path, selector: str, seed: int, curve: dict[str, float], rollouts: float, etr: float) -> None:
    line = {ROLLOUTS_METRIC: rollouts, ETR_METRIC: etr, STEP_TIME_METRIC: rollouts / 64}
    write_benchmark_run(root, selector, seed, [line] * STEPS, {s: {TOY_EXACT_METRIC: acc} for s, acc in curve.items()})


def test_run_log_statistics_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for seed, a in SLOPES.items():
        for selector, slope, rollouts, etr in (("random", a, 128.0, 0.25), ("bots", 2 * a, 192.0, 0.5)):
            runs.append(_record(selector, seed, _linear(slope)))
            _write_log(tmp_path, selector, seed, runs[-1]["accuracy"], rollouts, etr)
    (tmp_path / "summary.json").write_text(json.dumps(_summary(runs)))
    records = paired_inputs.load_benchmark(tmp_path)
    assert all(r.log is not None for r in records)
    (comp,) = paired_stats.compare_all(records)
    for seed in SLOPES:
        assert comp.stats["etr_diff"].values[seed] == pytest.approx(0.5 - 0.25)
        # bots reaches random's best (its last) accuracy at T/2 spending 192 a step, random at T spending 128 a step
        assert comp.stats["roll100"].values[seed] == pytest.approx((192 * STEPS / 2) / (128 * STEPS))
        assert comp.stats["time100"].values[seed] == pytest.approx((192 * STEPS / 2) / (128 * STEPS))

    assert paired.main([str(tmp_path / "summary.json"), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert printed == (tmp_path / "out" / "paired.md").read_text()
    overview = printed.split("\n\n")[1]
    assert "ETR Δ↑" in overview and "Time(100%)↓" in overview  # the log-based columns, now that logs exist
    data = json.loads((tmp_path / "out" / "paired.json").read_text())
    assert data["comparisons"]["bots"]["statistics"]["roll100"]["mean"] == pytest.approx(0.75)
    assert (tmp_path / "out" / "figures" / "toy_paired.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a run log of another seed than its record is an error, not a silent mismatch
    meta = tmp_path / "runs" / "bots_s1" / "run" / "meta.json"
    meta.write_text(meta.read_text().replace('"seed": 1', '"seed": 7'))
    with pytest.raises(LoadError, match="seed 7"):
        paired_inputs.load_benchmark(tmp_path)


def test_rollouts_against_a_peer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A selector twice as fast as Random at Random's cost per step, against a peer as fast at 4x the cost: a quarter
    of the peer's rollouts; a peer that never reaches the target leaves the ratio undefined, with its reason."""
    runs = []
    arms = (("random", 1, 128.0), ("fast", 2, 128.0), ("costly", 2, 512.0), ("flat", 0, 128.0))
    for seed, a in SLOPES.items():
        for selector, factor, rollouts in arms:
            runs.append(_record(selector, seed, _linear(factor * a)))
            _write_log(tmp_path, selector, seed, runs[-1]["accuracy"], rollouts, 0.5)
    (tmp_path / "summary.json").write_text(json.dumps(_summary(runs)))
    comparisons = paired_stats.compare_all(paired_inputs.load_benchmark(tmp_path))
    ratios = {(r.selector, r.peer): r for r in paired_relative.peer_ratios(comparisons, ["costly", "flat"])}
    assert set(ratios) == {("fast", "costly"), ("fast", "flat")}
    fast = ratios[("fast", "costly")]
    assert all(v == pytest.approx(0.25) for v in fast.values.values()) and fast.t.mean == pytest.approx(0.25)
    flat = ratios[("fast", "flat")]
    assert flat.t.n == 0 and all("flat" in why for why in flat.reasons.values())
    with pytest.raises(ValueError, match="peers"):
        paired_relative.peer_ratios(comparisons, ["dapo_ds"])

    assert paired.main([str(tmp_path), "--peers", "costly", "--out", str(tmp_path / "out")]) == 0
    # the heading names the target Roll(100%) is measured to: Random's best within the budget, not its last value
    assert "Rollouts to random's best accuracy, selector over peer" in capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "paired.json").read_text())
    assert data["peers"][0]["mean"] == pytest.approx(0.25) and data["peers"][0]["peer"] == "costly"
    assert paired.main([str(tmp_path), "--peers", "nobody"]) == 2


def test_one_seed_has_means_without_intervals(tmp_path: Path) -> None:
    records = [r for r in _doubling() if r.seed == 0]
    (fast, flat) = paired_stats.compare_all(records)
    st = fast.stats["slope_ratio"]
    assert st.t.n == 1 and st.t.mean == pytest.approx(0.5)
    assert math.isnan(st.t.lo) and all(math.isnan(x) for x in st.bootstrap)
    row = next(line for line in paired_report.to_markdown([fast, flat]).splitlines() if line.startswith("| fast |"))
    assert "| 0.50 |" in row and "[" not in row  # a mean, no interval
    assert paired_report.save_figure([fast, flat], tmp_path / "one.png").stat().st_size > 0


def test_figure_is_a_png(tmp_path: Path) -> None:
    comparisons = paired_stats.compare_all(_doubling())
    path = paired_report.save_figure(comparisons, tmp_path / "figs" / "paired.png")
    from matplotlib.image import imread

    image = imread(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.ndim == 3 and image.shape[1] > image.shape[0] > 100  # one wide row of panels
    fig = paired_report.paired_figure(comparisons)
    assert [ax.get_title() for ax in fig.axes] == [paired_stats.SPECS[k].label for k in paired_report.FIGURE_KEYS]


def test_committed_results_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert paired.main([str(RESULTS / "summary.json"), "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "| bots |" in table
    bots = json.loads((tmp_path / "paired.json").read_text())["comparisons"]["bots"]
    runs = json.loads((RESULTS / "summary.json").read_text())["runs"]
    both = sorted(
        {r["seed"] for r in runs if r["selector"] == "bots"} & {r["seed"] for r in runs if r["selector"] == "random"}
    )
    assert len(both) >= 2 and bots["seeds"] == both
    for key in ("ttb100", "bsf100", "slope_ratio", "mean_gain_diff", "final_gain_diff"):
        st = bots["statistics"][key]
        assert st["n"] == len(both), key
        assert all(math.isfinite(x) for x in (st["mean"], st["t"]["lo"], st["t"]["hi"], *st["bootstrap"].values()))
    for key in ("etr_diff", "roll100", "time100"):  # the committed results carry no run logs
        assert bots["statistics"][key]["mean"] is None
        assert set(bots["statistics"][key]["undefined"].values()) == {"no run log"}
    assert (tmp_path / "figures" / "toy_paired.png").stat().st_size > 0


def test_cli_reports_a_missing_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert paired.main([str(tmp_path)]) == 2
    assert "no toy benchmark summary.json" in capsys.readouterr().err


# ---- issue 34: a benchmark record's accuracy outside [0, 1] or not finite, and a seed or step key that is not an
# integer, are errors naming the summary file, the record and the step
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (7.5, r"accuracy 7\.5 is outside \[0, 1\]"),
        (None, r"accuracy is null, not a finite number"),
        (float("nan"), r"accuracy is nan, not a finite number"),
        ("high", r"accuracy 'high' is not a number"),
    ],
)
def test_a_record_accuracy_outside_0_1_or_not_finite_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object, message: str
) -> None:
    runs = [_record("random", 0, _linear(SLOPES[0])), _record("fast", 0, _linear(2 * SLOPES[0]))]
    runs[0]["accuracy"][str(STEPS)] = value  # Random's last evaluation
    (tmp_path / "summary.json").write_text(json.dumps(_summary(runs)))
    where = rf"{tmp_path}/summary.json: benchmark record random seed 0: 'accuracy' at step {STEPS}: {message}"
    with pytest.raises(LoadError, match=where):
        paired_inputs.load_benchmark(tmp_path)
    assert paired.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "summary.json: benchmark record random seed 0" in err


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("seed", 0.7, r"run record 0: seed must be an integer, got 0\.7"),
        ("seed", "zero", r"run record 0: seed must be an integer, got 'zero'"),
        ("step", "10.0", r"benchmark record random seed 0: 'accuracy': step key must be an integer, got '10\.0'"),
    ],
)
def test_a_seed_or_step_that_is_not_an_integer_names_the_file(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    runs = [_record("random", 0, _linear(SLOPES[0])), _record("fast", 0, _linear(2 * SLOPES[0]))]
    if field == "seed":
        runs[0]["seed"] = value
    else:
        runs[0]["accuracy"][value] = 0.5
    (tmp_path / "summary.json").write_text(json.dumps(_summary(runs)))
    with pytest.raises(LoadError, match=rf"{tmp_path}/summary.json: {message}"):
        paired_inputs.load_benchmark(tmp_path)
