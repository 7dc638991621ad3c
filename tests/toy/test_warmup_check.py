"""``python -m bots_verl.toy.warmup_check``: a seed's warm-ups and their exact pass rates without a whole build."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from bots_verl.toy.families import family_of
from bots_verl.toy.likelihood import answer_stats, load_model
from bots_verl.toy.tokenizer import vocab_of
from bots_verl.toy.warmup_check import check_warmups, main


def test_the_check_trains_the_warmups_and_reports_their_exact_pass_rates(tmp_path, capsys) -> None:
    out = tmp_path / "logic_ci"
    assert main(["--family", "logic", "--seed", "3", "--profile", "ci", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| policy |" in printed and "| strong |" in printed and "held-out order policy < weak < strong:" in printed
    assert not (out / "refs").exists() and not (out / "calibration.json").exists()  # nothing past the warm-ups
    # a rerun reuses the models (their specs checked) and reports the same figures, recomputed here from the models
    found = check_warmups(out, "logic", 3, "ci")
    fam = family_of("logic")
    pool = [fam.parse_prompt(m[0]["content"]) for m in pq.read_table(out / "pool.parquet").column("prompt").to_pylist()]
    for role in ("policy", "weak", "strong"):
        p = answer_stats(load_model(out / "models" / role), pool, vocab=vocab_of("logic"))[0]
        assert found[role]["pool_mean"] == pytest.approx(float(np.mean(p)), abs=1e-12)
        assert f"{found[role]['pool_mean']:.3f}" in printed
        assert (
            found[role]["stopped_at"]
            == json.loads((out / "models" / role / "warmup.json").read_text())["spec"]["steps"]
        )  # the ci profile's warm-ups train their steps: no target


def test_an_unknown_family_or_profile_is_one_line_and_writes_nothing(tmp_path, capsys) -> None:
    assert main(["--family", "chess", "--seed", "0", "--out", str(tmp_path / "a")]) == 1
    assert main(["--family", "code", "--seed", "0", "--profile", "quick", "--out", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("warmup check failed: ") for line in err)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
