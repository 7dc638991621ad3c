"""``make quickstart``: end to end (Random and BOTS train in verl's real trainer on the shipped toy build and report),
and the ``--out`` guard: a rerun replaces only the run folders a quickstart wrote (issue 47).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots_verl import quickstart
from bots_verl.quickstart import MARKER, check_out_dir, main


@pytest.mark.slow
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
        assert (tmp_path / "qs" / arm / MARKER).is_file()  # a rerun into this --out may replace it
    rows = result["posterior"]
    assert [r["digits"] for r in rows] == [1, 2, 3, 4] and sum(r["tasks"] for r in rows) == 2352
    assert sum(r["selected"] for r in rows) == 2 * 16  # two steps of 16 tasks
    # the easiest tasks are the ones the policy solves most often, and the posterior has learnt that ordering
    assert rows[0]["exact_pass_rate"] > rows[-1]["exact_pass_rate"]
    assert rows[0]["posterior_mean"] > rows[-1]["posterior_mean"]


# ---------------------------------------------------------------------------------------------- the --out guard
@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stand-ins for the testbed build and the training runs (the guard is under test, not them); records calls."""
    from bots_verl.toy import arms, prepare
    from bots_verl.verl_cpu import smoke

    calls: list[str] = []
    monkeypatch.setattr(prepare, "prepare", lambda out, **kw: calls.append(f"prepare {out}") or {})
    monkeypatch.setattr(arms, "training_overrides", lambda *args: [])
    monkeypatch.setattr(smoke, "run_training", lambda overrides, cwd, log, timeout: calls.append(f"train {log}"))
    return calls


def _other_run(folder: Path) -> Path:
    """A folder some other job wrote: a checkpoint the quickstart must not delete."""
    checkpoint = folder / "ckpt" / "global_step_100" / "model.pt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"weights")
    return checkpoint


@pytest.mark.parametrize("arm", ["random", "bots"])
def test_an_out_holding_another_run_is_refused_and_nothing_is_deleted(
    arm: str, tmp_path: Path, capsys: pytest.CaptureFixture, no_training: list[str]
) -> None:
    out = tmp_path / "experiments"
    checkpoint = _other_run(out / arm)
    assert main(["--steps", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{out / arm} was not written by the quickstart" in err and "nothing deleted" in err
    assert checkpoint.read_bytes() == b"weights"
    assert no_training == [] and sorted(p.name for p in out.iterdir()) == [arm]  # nothing built, nothing written


@pytest.mark.parametrize("kind", ["file", "link"])
def test_an_arm_that_is_a_file_or_a_link_is_refused(kind: str, tmp_path: Path, no_training: list[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "elsewhere"
    checkpoint = _other_run(target)
    if kind == "file":
        (out / "bots").write_text("notes")
    else:
        (out / "bots").symlink_to(target, target_is_directory=True)
    with pytest.raises(ValueError, match=f"{out / 'bots'} is a {kind}, not a quickstart run folder"):
        quickstart.run_quickstart(out, steps=1)
    assert checkpoint.read_bytes() == b"weights" and no_training == []
    assert (out / "bots").is_symlink() if kind == "link" else (out / "bots").read_text() == "notes"


def test_a_quickstart_run_folder_is_marked_and_a_rerun_replaces_it(tmp_path: Path, no_training: list[str]) -> None:
    out = tmp_path / "qs"
    check_out_dir(out)  # absent: fine
    (out / "random").mkdir(parents=True)
    check_out_dir(out)  # empty: fine (nothing to lose)
    for arm in ("random", "bots"):
        run_dir = quickstart._train({}, arm, 1, out, 10.0)
        assert (run_dir / MARKER).is_file()
        (run_dir / "ckpt").mkdir()  # what the first run left
    check_out_dir(out)  # an earlier quickstart's runs: accepted
    run_dir = quickstart._train({}, "bots", 1, out, 10.0)
    assert (run_dir / MARKER).is_file() and not (run_dir / "ckpt").exists()  # replaced
    assert no_training == [f"train {out / arm / 'train.log'}" for arm in ("random", "bots", "bots")]
