"""Beyond the paper in the simulator (issue 24): greso and bots_warm, the toy preset, rollouts to target, allocation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bots_verl.runlog import read_meta
from bots_verl.sim import parse_method, run_experiment
from bots_verl.sim.allocation import allocate_rollouts, mixed_chance
from bots_verl.sim.cli import TOY, main
from bots_verl.sim.report import cumulative_rollouts, rollouts_to_target

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


def _beta_binomial_mixed(a: float, b: float, n: int) -> float:
    """1 - P(S = 0) - P(S = n) for S ~ BetaBinomial(n, a, b), from log-gamma (an independent formula)."""

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    if n == 0:
        return 0.0
    p0 = math.exp(log_beta(a, b + n) - log_beta(a, b))
    pn = math.exp(log_beta(a + n, b) - log_beta(a, b))
    return 1.0 - p0 - pn


def test_mixed_chance_is_the_beta_binomial_chance_of_a_mixed_group():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.2, 30, 12), rng.uniform(0.2, 30, 12)
    got = mixed_chance(a, b, 20)
    want = np.array([[_beta_binomial_mixed(x, y, n) for n in range(21)] for x, y in zip(a, b, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[:, :2], 0.0, atol=1e-15)  # no group of 0 or 1 rollouts is mixed


def _greedy_one_by_one(a, b, budget, floor, cap):
    sizes = np.full(len(a), floor)
    table = mixed_chance(a, b, cap)
    for _ in range(budget - floor * len(a)):
        gain = np.where(
            sizes < cap, table[np.arange(len(a)), np.minimum(sizes + 1, cap)] - table[np.arange(len(a)), sizes], -1
        )
        sizes[np.argmax(gain)] += 1
    return sizes


@pytest.mark.parametrize("seed", range(5))
def test_allocation_is_the_greedy_split_of_the_budget(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.3, 40, 16), rng.uniform(0.3, 40, 16)
    sizes = allocate_rollouts(a, b, 16 * 8, floor=2, cap=32)
    assert sizes.sum() == 128 and sizes.min() >= 2 and sizes.max() <= 32
    want = _greedy_one_by_one(a, b, 128, 2, 32)
    # the same split, or one of equal value where gains tie
    table = mixed_chance(a, b, 32)
    rows = np.arange(16)
    assert table[rows, sizes].sum() == pytest.approx(table[rows, want].sum(), abs=1e-12)


def test_allocation_gives_sharp_extreme_tasks_more_and_respects_floor_and_cap():
    # a sharp p = 0.5 task, a sharp p = 0.05 task, a flat one
    a, b = np.array([500.0, 50.0, 1.0]), np.array([500.0, 950.0, 1.0])
    sizes = allocate_rollouts(a, b, 24, floor=2, cap=16)
    assert sizes.sum() == 24 and sizes[1] > sizes[0]  # 11 rollouts for p = 0.05, 6 for p = 0.5
    assert allocate_rollouts(a, b, 6, floor=2, cap=16).tolist() == [2, 2, 2]
    assert allocate_rollouts(a, b, 100, floor=2, cap=16).tolist() == [16, 16, 16]  # the cap binds
    with pytest.raises(ValueError, match="cannot give"):
        allocate_rollouts(a, b, 5, floor=2, cap=16)
    with pytest.raises(ValueError, match="floor"):
        allocate_rollouts(a, b, 24, floor=3, cap=2)


def test_allocation_in_the_loop():
    kw = dict(seeds=[0], steps=6, batch_size=16, rollouts_per_task=8, scenario_overrides=SMALL, plots=False)
    res = run_experiment(
        "math",
        ["bots", "u=bots:alloc=uniform", "a=bots:alloc=posterior", "t=random:alloc=truth"],
        **kw,
    )
    np.testing.assert_array_equal(res.runs["bots"][0].eval_acc, res.runs["u"][0].eval_acc)  # uniform: unchanged
    for label in ("a", "t"):
        np.testing.assert_array_equal(res.runs[label][0].rollouts, np.full(6, 128.0))  # the same budget per step
    with pytest.raises(ValueError, match="needs a Beta selector"):
        run_experiment("math", ["r=random:alloc=posterior"], **kw)
    with pytest.raises(ValueError, match="do not combine"):
        parse_method("x=bots:alloc=posterior,dapo=true")
    with pytest.raises(ValueError, match="alloc must be one of"):
        parse_method("x=bots:alloc=knapsack")
