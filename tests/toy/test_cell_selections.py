"""``python -m bots_verl.toy.cell_selections`` on the session's ``ci`` benchmark (``tests/conftest.py``, ``bench``):
each cell's share of a run's picks, recomputed here from the checkpoint's sampler state and the pool's cells, beside
the build's calibration and held-out set; a checkpoint of another pool is refused."""

from __future__ import annotations

import shutil
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state
from bots_verl.toy.arms import PROFILES
from bots_verl.toy.cell_selections import cell_selections, main


def test_each_cells_share_of_the_picks_beside_the_build(bench, tmp_path, capsys) -> None:
    root, _ = bench
    data, prof = root / "data", PROFILES["ci"]
    ckpt = {arm: root / "runs" / f"{arm}_s0" / "ckpt" / f"global_step_{prof.steps}" for arm in ("random", "bots")}
    rows = cell_selections(data, {"random": [ckpt["random"]], "bots": [ckpt["bots"]], "both": list(ckpt.values())})
    pool = pq.read_table(data / "train.parquet").to_pylist()
    assert sum(r["tasks"] for r in rows) == len(pool) and len({r["cell"] for r in rows}) == len(rows) >= 2
    assert sum(r["heldout_share"] for r in rows) == pytest.approx(1.0)
    calibration = pq.read_table(data / "calibration.parquet").to_pandas().set_index("task_id")
    for arm, folder in ckpt.items():
        times = np.asarray(checkpoint_sampler_state(folder / "data.pt")["selector_state"]["times_selected"])
        assert times.sum() == prof.steps * prof.prompts
        by_cell = Counter()
        for row, picked in zip(pool, times, strict=True):
            by_cell[row["extra_info"]["cell"]] += int(picked)
        assert {r["cell"]: r["shares"][arm] for r in rows} == pytest.approx(
            {cell: n / times.sum() for cell, n in by_cell.items()}
        )
    for r in rows:
        # two runs of one length pooled: the mean of their shares
        assert r["shares"]["both"] == pytest.approx((r["shares"]["random"] + r["shares"]["bots"]) / 2)
        ids = [row["task_id"] for row in pool if row["extra_info"]["cell"] == r["cell"]]
        assert r["start_pass_rate"] == pytest.approx(calibration.loc[ids, "policy_exact_pass_rate"].mean())
        assert r["strong"] == pytest.approx(calibration.loc[ids, "toy_strong_pass_rate"].mean())

    assert main(["--data", str(data), f"bots={ckpt['bots']}"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| cell | pool tasks |") and printed[0].endswith("| bots |")
    assert len(printed) == 2 + len(rows)

    # a pool that is not the run's (one task fewer) is refused, as is an argument without a label
    other = tmp_path / "other"
    other.mkdir()
    for name in ("calibration.parquet", "val.parquet"):
        shutil.copy(data / name, other / name)
    table = pq.read_table(data / "train.parquet")
    pq.write_table(table.slice(0, table.num_rows - 1), other / "train.parquet")
    with pytest.raises(ValueError, match="not the pool"):
        cell_selections(other, {"bots": [ckpt["bots"]]})
    assert main(["--data", str(other), f"bots={ckpt['bots']}"]) == 1
    assert "not the pool" in capsys.readouterr().err
    assert main(["--data", str(data), str(ckpt["bots"])]) == 2
