"""Beyond the paper in the simulator (issue 24): greso and bots_warm, the toy preset, rollouts to target."""

from __future__ import annotations

import numpy as np
import pytest

from bots_verl.runlog import read_meta
from bots_verl.sim import run_experiment
from bots_verl.sim.report import cumulative_rollouts, rollouts_to_target
from bots_verl.sim.sim_cli import TOY, main

SMALL = {"pool_size": 600, "eval_size": 100}


def test_greso_and_the_warm_start_run_as_simulator_methods():
    res = run_experiment(
        "math",
        ["random", "greso", "bots_warm", "greso+dapo=greso:dapo=true", "random+dapo=random:dapo=true"],
        seeds=2,
        steps=60,
        batch_size=16,
        rollouts_per_task=8,
        scenario_overrides=SMALL,
        plots=False,
    )
    s = res.summary
    # the warm start lifts the ETR from the first steps; GRESO skips zero-variance tasks once they are revisited
    assert s["bots_warm"]["etr"].mean > s["random"]["etr"].mean
    assert s["greso"]["etr"].mean > s["random"]["etr"].mean
    # GRESO's skips save DAPO rounds: fewer rollouts for the same number of trained groups
    assert s["greso+dapo"]["rollouts"].mean < s["random+dapo"]["rollouts"].mean
    for label in res.runs:
        assert np.isfinite(s[label]["rtt100"].mean) or s[label]["rtt100"].n < 2


def test_rollouts_to_target_is_ttb_on_the_rollout_axis():
    res = run_experiment(
        "math",
        ["random", "bots", "random+dapo=random:dapo=true"],
        seeds=[0],
        steps=40,
        batch_size=16,
        rollouts_per_task=8,
        scenario_overrides=SMALL,
        plots=False,
    )
    base, dapo = res.runs["random"][0], res.runs["random+dapo"][0]
    np.testing.assert_array_equal(cumulative_rollouts(base), base.eval_steps * 16 * 8)
    assert rollouts_to_target(base, base) == 1.0
    # the same rollouts per step: RTT equals TTB(100%)
    assert res.summary["bots"]["rtt100"].mean == pytest.approx(res.summary["bots"]["ttb100"].mean)
    # DAPO pays for its extra rounds: its RTT exceeds its TTB
    assert rollouts_to_target(dapo, base) > res.summary["random+dapo"]["ttb100"].mean


def test_toy_preset_runs_the_beyond_the_paper_methods_on_the_testbeds_shape(tmp_path, capsys):
    out = tmp_path / "toy"
    args = ["--preset", "toy", "--seeds", "2", "--steps", "3", "--out", str(out), "--no-plots", "--no-progress"]
    assert main(args) == 0
    text = capsys.readouterr().out
    for label in TOY["methods"].split(","):
        assert f"| {label} |" in text
    meta = read_meta(out / "greso" / "seed1")
    assert meta["extra"]["batch_size"] == 16 and meta["extra"]["rollouts_per_task"] == 8
    assert meta["extra"]["scenario"]["name"] == "toy"
    assert "RTT(100%)" in text
