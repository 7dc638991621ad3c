"""``analysis.builds``: the claims of two testbed builds side by side, on the shipped build's real paired.json."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from analysis.builds import agreement, build_statistics, main, render
from bots_verl.core.selection_metrics import Interval

ROOT = Path(__file__).resolve().parents[2]
EVERY_ARM = ROOT / "recipes" / "toy" / "results" / "ceiling" / "every_arm_vs_oracle.json"


@pytest.fixture(scope="module")
def paired() -> dict:
    return json.loads(EVERY_ARM.read_text())


def test_statistics_are_read_per_seed_and_the_step_ratio_over_dapo_ds_is_derived(paired) -> None:
    stats = build_statistics(paired)
    bots, dapo = stats["bots"], stats["dapo_ds"]
    assert bots["ttb100"]["7"] == pytest.approx(0.85)
    # Random's steps cancel: the arm's steps to Random's best over dapo_ds's, seed by seed
    for seed, value in bots["steps_over_dapo_ds"].items():
        assert value == pytest.approx(bots["ttb100"][seed] / dapo["ttb100"][seed])
    assert dapo["steps_over_dapo_ds"] == {}
    assert bots["rollouts_over_dapo_ds"]["0"] == pytest.approx(0.2515, abs=1e-4)
    assert bots["oracle_share"]["7"] == pytest.approx(1 / 3)


def test_agreement_says_which_side_of_the_null_every_build_is_on() -> None:
    below, holds, above = Interval(0.5, 0.4, 0.6, 8, 0), Interval(1.0, 0.8, 1.2, 8, 0), Interval(1.5, 1.2, 1.8, 8, 0)
    assert agreement([below, below], 1.0) == "agree (below 1)"
    assert agreement([above, above], 1.0) == "agree (above 1)"
    assert agreement([holds, holds], 1.0) == "null on every build"
    assert agreement([below, holds], 1.0) == "build-dependent"
    assert agreement([below, above], 1.0) == "build-dependent"
    assert agreement([below, Interval(0.5, float("nan"), float("nan"), 1, 0)], 1.0) == "—"
    assert agreement([below], 1.0) == "one build"


def test_render_puts_builds_side_by_side_and_flags_a_disagreement(paired, tmp_path) -> None:
    other = copy.deepcopy(paired)
    # on the second build, bots_ref5 learns as fast as Random: its TTB interval now holds 1
    ttb = other["comparisons"]["bots_ref5"]["statistics"]["ttb100"]["per_seed"]
    for i, seed in enumerate(sorted(ttb)):
        ttb[seed] = 0.6 if i % 2 else 1.4
    (tmp_path / "b2").mkdir()
    (tmp_path / "b2" / "paired.json").write_text(json.dumps(other))
    text = render({"full_s0": paired, "full_s2": other}, ["bots", "bots_ref5", "dapo_ds"])
    section = text.split("## TTB(100%) vs Random")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in section.splitlines() if line.startswith("| bots")}
    assert "0.56 [0.45, 0.68] (n=8)" in rows["bots"] and rows["bots"].endswith("agree (below 1) |")
    assert rows["bots_ref5"].endswith("build-dependent |")
    out = tmp_path / "builds.md"
    assert main(["--build", f"full_s0={EVERY_ARM}", "--build", f"full_s2={tmp_path / 'b2'}", "--out", str(out)]) == 0
    assert "| arm | full_s0 | full_s2 | agreement |" in out.read_text()


def test_a_file_that_is_not_a_paired_json_is_refused_naming_it(tmp_path, capsys) -> None:
    bad = tmp_path / "paired.json"
    bad.write_text(json.dumps({"baseline": "bots"}))
    assert main(["--build", f"x={bad}"]) == 2
    assert str(bad) in capsys.readouterr().err


# ------------------------------------------------------------------------------------ bad input (issue 59, item 7)
def test_a_build_name_given_twice_is_refused(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--build", f"full_s0={EVERY_ARM}", "--build", f"full_s0={EVERY_ARM}", "--out", str(tmp_path / "o.md")])
    assert exc.value.code == 2 and "--build 'full_s0' is given twice" in capsys.readouterr().err
    assert not (tmp_path / "o.md").exists()


@pytest.mark.parametrize("payload", [[1, 2], "paired", 3])
def test_a_paired_json_that_is_not_an_object_is_refused_naming_the_file(payload, tmp_path, capsys) -> None:
    bad = tmp_path / "paired.json"
    bad.write_text(json.dumps(payload))
    assert main(["--build", f"x={bad}"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: holds a JSON {type(payload).__name__}, not the object analysis.paired writes" in err


def test_an_out_that_is_a_folder_is_refused_before_any_work(tmp_path, capsys) -> None:
    missing = tmp_path / "no_such_build"  # would fail if the builds were read first
    with pytest.raises(SystemExit) as exc:
        main(["--build", f"x={missing}", "--out", str(tmp_path)])
    assert exc.value.code == 2 and f"--out {tmp_path} is a folder" in capsys.readouterr().err


def test_an_unknown_arm_is_refused_naming_the_known_ones(paired, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--build", f"full_s0={EVERY_ARM}", "--arms", "bots", "botz", "--out", str(tmp_path / "o.md")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--arms: unknown arms ['botz']; known: [" in err and "'bots'" in err
    assert not (tmp_path / "o.md").exists()
    with pytest.raises(ValueError, match=r"unknown arms \['botz'\]"):
        render({"full_s0": paired}, ["botz"])
