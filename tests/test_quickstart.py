"""``make quickstart`` end to end: Random and BOTS train in verl's real trainer on the shipped toy build and report."""

from __future__ import annotations

import json

import pytest

from bots_verl.quickstart import main

pytestmark = pytest.mark.slow


def test_the_quickstart_trains_both_arms_and_reports_the_mixed_share_and_the_posterior(
    tmp_path, capsys, monkeypatch, ray_attach
):
    # each run attaches to the session's Ray cluster (a cluster start and stop saved per run) once the previous run's
    # actors are gone; the training itself is the quickstart's own
    from bots_verl.verl_cpu import smoke

    train = smoke.run_training

    def attached(*args, **kwargs):
        for key, value in ray_attach().items():
            monkeypatch.setenv(key, value)
        return train(*args, **kwargs)

    monkeypatch.setattr(smoke, "run_training", attached)
    assert main(["--steps", "2", "--out", str(tmp_path / "qs")]) == 0
    printed = capsys.readouterr().out
    assert "Share of mixed groups per step" in printed and "BOTS's posterior after the last step" in printed
    result = json.loads((tmp_path / "qs" / "quickstart.json").read_text())
    for arm in ("random", "bots"):
        shares = result["mixed"][arm]
        assert sorted(int(s) for s in shares) == [1, 2]
        assert all(0.0 <= v <= 1.0 for v in shares.values())
        assert (tmp_path / "qs" / arm / "run" / "meta.json").is_file()
    rows = result["posterior"]
    assert [r["digits"] for r in rows] == [1, 2, 3, 4] and sum(r["tasks"] for r in rows) == 2352
    assert sum(r["selected"] for r in rows) == 2 * 16  # two steps of 16 tasks
    # the easiest tasks are the ones the policy solves most often, and the posterior has learnt that ordering
    assert rows[0]["exact_pass_rate"] > rows[-1]["exact_pass_rate"]
    assert rows[0]["posterior_mean"] > rows[-1]["posterior_mean"]
