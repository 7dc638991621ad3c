"""Figures: the seed bands use the core interval, and the CLI writes PNG and PDF per domain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import figures
from bots_verl.core.selection_metrics import interval


def test_band_on_union_of_steps_and_carry_forward() -> None:
    a = pd.Series([0.1, 0.3], index=[0, 4])
    b = pd.Series([0.2, 0.2, 0.5], index=[0, 2, 4])
    raw = figures.band([a, b])
    assert list(raw.steps) == [0, 2, 4] and list(raw.n) == [2, 1, 2]
    assert raw.mean[1] == pytest.approx(0.2) and np.isnan(raw.lo[1])
    held = figures.band([a, b], carry_forward=True)
    assert list(held.n) == [2, 2, 2] and held.mean[1] == pytest.approx(0.15)
    expected = interval([0.3, 0.5])
    assert (held.mean[2], held.lo[2], held.hi[2]) == pytest.approx((expected.mean, expected.lo, expected.hi))


def test_cli_writes_png_and_pdf(known: Path, tmp_path: Path) -> None:
    out = tmp_path / "fig"
    assert figures.main(["--runs", str(known), "--out", str(out), "--smooth", "3"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["math_accuracy.pdf", "math_accuracy.png", "math_etr.pdf", "math_etr.png"]
    assert all((out / n).stat().st_size > 1000 for n in names)
    assert (out / "math_accuracy.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "math_etr.pdf").read_bytes()[:4] == b"%PDF"


def test_requested_figures_are_required(known: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default draws what the logs allow; a named figure whose metrics are missing is an error naming them."""
    out = tmp_path / "fig"
    assert figures.main(["--runs", str(known), "--out", str(out), "--figures", "accuracy", "--methods", "bots"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["math_accuracy.pdf", "math_accuracy.png"]
    assert figures.main(["--runs", str(known), "--out", str(out), "--figures", "estimator"]) == 2
    assert "domain math: no run logs 'bots/estimator/pearson'" in capsys.readouterr().err
    assert figures.main(["--runs", str(known), "--out", str(out), "--figures", "lambda_bias"]) == 2
    assert "two or more λ values" in capsys.readouterr().err
