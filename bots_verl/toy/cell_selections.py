"""Where a selector spends its picks: each cell's share of runs' selections, beside what the build knows of the cell.

``python -m bots_verl.toy.cell_selections --data runs/toy_table1/logic/data [LABEL=<run>/ckpt/global_step_<k> ...]``

One row per cell of the build's pool: its tasks, the starting policy's exact pass rate (the calibration's; for code
and logic the canonical answer's, a lower bound), the weak and strong references' columns (the implicit evidence),
the cell's share of the held-out set, and per ``LABEL`` the cell's share of the selections recorded in the checkpoints
given under it (the sampler state's ``times_selected``: every pick up to that step). A label given several checkpoints
(one per seed) pools them, which for runs of one length is the mean share over the seeds. It asks whether a selector
moved its picks to the cells the held-out set measures; :mod:`bots_verl.toy.cell_rates` asks where the policy learnt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.toy.calibrate import per_cell

__all__ = ["cell_selections", "main"]


def cell_selections(data: Path, checkpoints: dict[str, list[Path]]) -> list[dict[str, Any]]:
    """One dict per cell, in the order the pool first holds them (module docstring): ``cell``, ``tasks``,
    ``start_pass_rate``, ``weak``, ``strong``, ``heldout_share`` and ``shares`` (label -> the cell's share of the
    label's selections); ``checkpoints`` maps a label to ``global_step_<k>`` folders of runs on this build.

    Raises:
        ValueError: a checkpoint without a BOTS sampler state, or one whose tasks are not this build's pool (another
            build's run), or a label without selections.
    """
    import pyarrow.parquet as pq

    from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state

    pool = pq.read_table(data / "train.parquet", columns=["task_id", "extra_info"]).to_pylist()
    task_ids = [row["task_id"] for row in pool]
    cells = np.array([row["extra_info"]["cell"] for row in pool])
    references = pq.read_table(data / "calibration.parquet").to_pandas().set_index("task_id").loc[task_ids]
    val = pq.read_table(data / "val.parquet", columns=["extra_info"]).to_pylist()
    heldout = [row["extra_info"]["cell"] for row in val]
    picks = {}
    for label, paths in checkpoints.items():
        total = np.zeros(len(pool))
        for path in paths:
            state = checkpoint_sampler_state(path / "data.pt")
            if list(state["task_ids"]) != task_ids:
                raise ValueError(f"{path}: its run's tasks are not the pool of {data} (a run of another build?)")
            total += np.asarray(state["selector_state"]["times_selected"], dtype=float)
        if total.sum() == 0:
            raise ValueError(f"{label}: its checkpoints record no selection")
        picks[label] = total / total.sum()
    # the calibration's columns, under the names the rows give them
    columns = {
        "start_pass_rate": "policy_exact_pass_rate",
        "weak": "toy_weak_pass_rate",
        "strong": "toy_strong_pass_rate",
    }
    means = per_cell(cells, {name: references[column].to_numpy() for name, column in columns.items()})
    return [
        {
            "cell": cell,
            **means[cell],
            "heldout_share": heldout.count(cell) / len(heldout),
            "shares": {label: float(share[cells == cell].sum()) for label, share in picks.items()},
        }
        for cell in dict.fromkeys(cells.tolist())
    ]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: prints one markdown row per cell, by starting pass rate; returns the exit status."""
    from bots_verl.fileio import markdown_table

    parser = argparse.ArgumentParser(
        prog="python -m bots_verl.toy.cell_selections", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", required=True, help="a toy build (prepare's --out)")
    parser.add_argument(
        "checkpoints", nargs="+", help="LABEL=<run>/ckpt/global_step_<k>; a label given again pools its checkpoints"
    )
    args = parser.parse_args(argv)
    checkpoints: dict[str, list[Path]] = {}
    for item in args.checkpoints:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            print(f"cell selections: {item!r} is not LABEL=CHECKPOINT", file=sys.stderr)
            return 2
        checkpoints.setdefault(label, []).append(Path(path))
    try:
        rows = cell_selections(Path(args.data), checkpoints)
    except (OSError, ValueError, KeyError) as err:
        print(f"cell selections failed: {err}", file=sys.stderr)
        return 1
    header = ["cell", "pool tasks", "start pass rate", "weak", "strong", "held-out share", *checkpoints]
    table = [
        [r["cell"], r["tasks"], *(f"{r[k]:.3f}" for k in ("start_pass_rate", "weak", "strong", "heldout_share"))]
        + [f"{r['shares'][label]:.3f}" for label in checkpoints]
        for r in sorted(rows, key=lambda r: r["start_pass_rate"])
    ]
    print(markdown_table(header, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
