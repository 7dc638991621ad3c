"""The ``toy`` scenario reproduces the toy testbed's starting statistics; the calibration targets are read right."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bots_verl.sim import build_world, get_scenario
from bots_verl.sim.loop import stream
from bots_verl.toy.sim_fit import TOLERANCES, TOY_TARGETS, targets_from_calibration, world_stats


def test_toy_world_reproduces_the_testbed_start():
    cfg = get_scenario("toy")
    worlds = [build_world(cfg, stream(seed, 0)) for seed in range(5)]
    assert len(worlds[0].pool) == 2352 and len(worlds[0].eval) == 600
    stats = [world_stats(w) for w in worlds]
    for key, target in TOY_TARGETS.items():
        mean = float(np.mean([s[key] for s in stats]))
        assert abs(mean - target) <= TOLERANCES[key], f"{key}: simulated {mean:.3f}, measured {target:.3f}"
    # The testbed keeps every task (no GURU filter): tasks no reference solved stay in the pool.
    assert (worlds[0].pool.reference.max(axis=1) == 0).mean() > 0.2
    # Strong far better than weak on the held-out band, weak close to the policy on the pool.
    assert all(s["eval_strong_mean"] > s["eval_weak_mean"] + 0.25 for s in stats)


def test_targets_from_calibration(tmp_path):
    p = np.array([0.0, 0.005, 0.5, 0.995, 0.2])
    weak = np.array([0.0, 0.0, 0.5, 1.0, 0.125])
    strong = np.array([0.0, 0.25, 0.75, 1.0, 0.5])
    path = tmp_path / "calibration.parquet"
    table = {"policy_exact_pass_rate": p, "toy_weak_pass_rate": weak, "toy_strong_pass_rate": strong}
    pq.write_table(pa.table(table), path)
    out = targets_from_calibration(path)
    assert out["share_at_0"] == 0.4 and out["share_at_1"] == 0.2
    assert np.isclose(out["pool_mean"], p.mean())
    assert np.isclose(out["mixed_n8"], np.mean(1 - p**8 - (1 - p) ** 8))
    assert np.isclose(out["weak_corr"], np.corrcoef(weak, p)[0, 1])
    assert "eval_acc0" not in out
    heldout = {m: {"accuracy": a} for m, a in (("policy", 0.2), ("weak", 0.3), ("strong", 0.8))}
    (tmp_path / "calibration.json").write_text(json.dumps({"heldout": heldout}))
    out = targets_from_calibration(path)
    assert (out["eval_acc0"], out["eval_weak_mean"], out["eval_strong_mean"]) == (0.2, 0.3, 0.8)
    pq.write_table(pa.table({"policy_exact_pass_rate": p}), path)
    with pytest.raises(ValueError, match="toy_weak_pass_rate"):
        targets_from_calibration(path)
