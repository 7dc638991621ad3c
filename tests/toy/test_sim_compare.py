"""``bots_verl.toy.sim_compare`` on a synthetic toy benchmark (summary.json + run logs in the benchmark's layout)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fake_benchmark import write_benchmark_run

from bots_verl.runlog import ETR_METRIC
from bots_verl.toy.sim_compare import compare, fit_learning_rate, load_measured, main

# selector, seed, accuracy by step, ETR by step (a subset: bots has one seed, random two)
RUNS = [
    ("random", 0, {0: 0.20, 2: 0.22, 4: 0.24}, [0.25, 0.25, 0.5, 0.25]),
    ("random", 1, {0: 0.20, 2: 0.20, 4: 0.22}, [0.5, 0.25, 0.25, 0.25]),
    ("bots", 0, {0: 0.20, 2: 0.26, 4: 0.30}, [0.5, 0.75, 0.75, 1.0]),
]


def _benchmark(root, with_summary=True, runs=RUNS):
    records = []
    for sel, seed, acc, etr in runs:
        lines = [{ETR_METRIC: value, "actor/lr": 1e-4} for value in etr]
        run = write_benchmark_run(root, sel, seed, lines, run_id=f"{sel}{seed}", source="verl").parent
        record = {"selector": sel, "seed": seed, "steps": 4, "accuracy": {str(k): v for k, v in acc.items()}}
        (run / "done.json").write_text(json.dumps(record))
        records.append(record)
    selectors = list(dict.fromkeys(sel for sel, *_ in runs))
    profile = {"steps": 4, "prompts": 4, "n": 4, "eval_every": 2, "selectors": selectors}
    if with_summary:
        (root / "summary.json").write_text(json.dumps({"profile": profile, "runs": records}))
    return root / "summary.json"


def test_measured_side_from_summary_and_run_logs(tmp_path):
    summary = _benchmark(tmp_path)
    out = compare(summary, tmp_path / "cmp", seeds=2)
    meas = out["measured"]
    assert meas["random"]["gain"]["mean"] == pytest.approx((0.04 + 0.02) / 2)
    assert meas["random"]["gain"]["n"] == 2 and meas["bots"]["gain"]["n"] == 1
    assert meas["bots"]["gain"]["mean"] == pytest.approx(0.10)
    assert meas["bots"]["d_gain"]["mean"] == pytest.approx(0.10 - 0.04)  # paired with random's seed 0 only
    # AUC: trapezoid of the gain curve (0, 0.06, 0.10) over 4 steps / 4
    assert meas["bots"]["auc"]["mean"] == pytest.approx((0.06 / 2 * 2 + (0.06 + 0.10) / 2 * 2) / 4)
    assert meas["bots"]["etr"]["mean"] == pytest.approx(0.75)  # from the run log, not the record
    assert out["rank_measured"] == {"bots": 1, "random": 2}
    assert out["settings"]["steps"] == 4 and out["settings"]["sim_seeds"] == 2
    # the simulated side: the same selectors plus the oracle, 2 seeds each, with its headroom over BOTS
    assert set(out["simulated"]) == {"random", "bots", "oracle"}
    assert out["simulated"]["bots"]["gain"]["n"] == 2
    assert out["oracle_headroom_over_bots"]["gain"]["n"] == 2
    assert out["simulated"]["oracle"]["etr"]["mean"] > out["simulated"]["random"]["etr"]["mean"]
    md = (tmp_path / "cmp" / "toy_compare.md").read_text()
    assert "| bots |" in md and "0.100 |" in md and "Oracle headroom over BOTS" in md
    assert (tmp_path / "cmp" / "sim" / "bots" / "seed1" / "metrics.jsonl").is_file()


def test_a_measured_oracle_gets_its_own_row_and_its_measured_headroom_over_bots(tmp_path):
    # bots gains 0.10 and 0.06 on seeds 0 and 1, the oracle 0.12 and 0.10: headroom 0.02 and 0.04, mean 0.03
    runs = [
        *RUNS,
        ("bots", 1, {0: 0.20, 2: 0.24, 4: 0.26}, [0.5, 0.5, 0.75, 0.75]),
        ("oracle", 0, {0: 0.20, 2: 0.28, 4: 0.32}, [1.0, 1.0, 1.0, 1.0]),
        ("oracle", 1, {0: 0.20, 2: 0.26, 4: 0.30}, [1.0, 1.0, 0.75, 1.0]),
    ]
    out = compare(_benchmark(tmp_path, runs=runs), tmp_path / "cmp", seeds=2)
    assert out["measured"]["oracle"]["gain"]["mean"] == pytest.approx(0.11)
    assert out["oracle_headroom_over_bots_measured"]["gain"]["mean"] == pytest.approx(0.03)
    assert out["oracle_headroom_over_bots_measured"]["gain"]["n"] == 2
    assert out["rank_measured"]["oracle"] == 1
    md = (tmp_path / "cmp" / "toy_compare.md").read_text()
    assert "| oracle |" in md and "oracle (sim only)" not in md
    assert "Oracle headroom over BOTS (measured, paired by seed): gain 0.030" in md
    # without a measured oracle the row stays simulated only and there is no measured headroom
    alone = compare(_benchmark(tmp_path / "no_oracle"), tmp_path / "cmp2", seeds=2)
    assert alone["oracle_headroom_over_bots_measured"] == {}
    assert "oracle (sim only)" in (tmp_path / "cmp2" / "toy_compare.md").read_text()


def test_without_summary_reads_done_records_then_simulates_alone(tmp_path, capsys):
    summary = _benchmark(tmp_path, with_summary=False)
    measured = load_measured(summary)
    assert measured is not None and sorted((r.selector, r.seed) for r in measured.runs) == [
        ("bots", 0),
        ("random", 0),
        ("random", 1),
    ]
    np.testing.assert_array_equal(measured.runs[0].steps, [0, 2, 4])
    empty = tmp_path / "nothing"
    assert main(["--measured", str(empty / "summary.json"), "--out", str(empty / "o"), "--seeds", "2"]) == 0
    text = capsys.readouterr().out
    assert "not available yet" in text and "| mopps |" in text  # the full profile's selectors
    data = json.loads((empty / "o" / "toy_compare.json").read_text())
    from bots_verl.toy.arms import PROFILES

    assert data["measured"] == {} and data["settings"]["steps"] == PROFILES["full"].steps


def test_learning_rate_fit_matches_the_measured_random_gain(tmp_path):
    """The fitted rate reproduces the measured Random gain, and a larger measured gain needs a larger rate."""
    summary = _benchmark(tmp_path, with_summary=True)
    measured = load_measured(summary)
    rand = [r for r in measured.runs if r.selector == "random"]
    target = float(np.mean([r.acc[-1] - r.acc[0] for r in rand]))
    rate, sim_gain, fitted_target = fit_learning_rate(summary, seeds=2, rounds=10)
    assert fitted_target == pytest.approx(target)
    assert abs(sim_gain - target) < 0.01 + 0.1 * abs(target)
    # the same runs with twice Random's gain need a larger learning rate
    data = json.loads(summary.read_text())
    for run in data["runs"]:
        if run["selector"] == "random":
            base = run["accuracy"]["0"]
            run["accuracy"] = {k: base + 2 * (v - base) for k, v in run["accuracy"].items()}
    summary.write_text(json.dumps(data))
    assert fit_learning_rate(summary, seeds=2, rounds=10)[0] > rate
    empty = tmp_path / "none" / "summary.json"
    with pytest.raises(ValueError, match="no measured random runs"):
        fit_learning_rate(empty, seeds=2)


def test_bad_input(tmp_path):
    bad = tmp_path / "summary.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not a toy benchmark summary"):
        load_measured(bad)
    with pytest.raises(SystemExit):
        main(["--measured", str(bad), "--out", str(tmp_path / "o")])
    with pytest.raises(ValueError, match="2 sim seeds"):
        compare(tmp_path / "none.json", tmp_path / "o", seeds=1)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"accuracy": {"0": 0.2, "2": 7.5}}, r"accuracy at step 2: accuracy 7\.5 is outside \[0, 1\]"),
        ({"accuracy": {"0": 0.2, "2": None}}, r"accuracy at step 2: accuracy is null"),
        ({"seed": 0.7}, r"seed must be an integer, got 0\.7"),
        ({"accuracy": {"10.0": 0.2}}, r"step key must be an integer, got '10\.0'"),
    ],
)
def test_a_bad_record_names_the_file(tmp_path, edit, message):
    """The same rule as analysis.paired (issue 34): accuracies in [0, 1], integer seeds and steps; a torn done.json."""
    summary = _benchmark(tmp_path, with_summary=False)
    done = tmp_path / "runs" / "bots_s0" / "done.json"
    done.write_text(json.dumps({**json.loads(done.read_text()), **edit}))
    with pytest.raises(ValueError, match=rf"done.json \(3 finished runs.*malformed run record .*{message}"):
        load_measured(summary)
    done.write_text('{"selector": "bo')
    with pytest.raises(ValueError, match=rf"{done}: not a readable run record"):
        load_measured(summary)
