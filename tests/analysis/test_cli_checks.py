"""The analysis commands refuse a bad ``--out`` before any work and a name no run has (issue 59, item 7's sweep).

Each ``--out`` case points the command at inputs that do not exist: reading them first would give another error, so
the message proves the check came first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import figures, gap, paired, tables


@pytest.mark.parametrize(
    ("main", "args", "kind"),
    [(tables.main, ["--runs", "{missing}"], "folder"), (gap.main, ["{missing}"], "folder")]
    + [(paired.main, ["{missing}"], "file"), (figures.main, ["--runs", "{missing}"], "file")],
    ids=["tables", "gap", "paired", "figures"],
)
def test_an_out_of_the_wrong_kind_is_refused_before_any_work(main, args, kind, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    if kind == "folder":
        out.mkdir()
    else:
        out.write_text("kept\n")
    with pytest.raises(SystemExit) as exc:
        main([a.format(missing=tmp_path / "missing") for a in args] + ["--out", str(out)])
    assert exc.value.code == 2
    assert f"--out {out} is a {kind}" in capsys.readouterr().err
    assert out.is_dir() if kind == "folder" else out.read_text() == "kept\n"  # lost nothing


def test_figures_refuses_a_method_no_run_has(known: Path, tmp_path: Path, capsys) -> None:
    assert figures.main(["--runs", str(known), "--out", str(tmp_path / "f"), "--method", "botz"]) == 2
    err = capsys.readouterr().err
    assert "--method: unknown selector ['botz']; known: [" in err and "'bots'" in err
    assert not (tmp_path / "f").exists()
    assert figures.main(["--runs", str(known), "--out", str(tmp_path / "f"), "--method", "bots"]) == 0
