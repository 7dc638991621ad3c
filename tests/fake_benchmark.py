"""A fabricated toy-benchmark run log, in the benchmark's layout: ``<root>/runs/<arm>_s<seed>/run``.

The analysis and toy tests (paired statistics, the oracle's ceiling, the reference bill, the gap) read such logs;
they all write them through :func:`write_benchmark_run`, so the layout is stated once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bots_verl.runlog import RunWriter


def benchmark_run_dir(root: Path, arm: str, seed: int) -> Path:
    """Where the toy benchmark keeps the run log of ``arm`` at ``seed`` under its output ``root``."""
    return root / "runs" / f"{arm}_s{seed}" / "run"


def write_benchmark_run(
    root: Path,
    arm: str,
    seed: int,
    per_step: Sequence[Mapping[str, float]],
    evals: Mapping[int | str, Mapping[str, float]] | None = None,
    **meta: Any,
) -> Path:
    """Write one run log: ``per_step[t - 1]`` at training step ``t``, each evaluation as a line of its own.

    Args:
        root: the benchmark's output folder.
        arm, seed: which run (the ``method`` and ``seed`` of its ``meta.json``).
        per_step: the training lines, from step 1.
        evals: step -> the metrics of that step's evaluation, logged after the step's training line.
        **meta: more ``meta.json`` fields; ``run_id``, ``domain`` and ``total_steps`` have defaults.

    Returns:
        The run log's folder.
    """
    run = benchmark_run_dir(root, arm, seed)
    evals = {int(step): data for step, data in (evals or {}).items()}
    meta = {"run_id": f"toy_{arm}_s{seed}", "domain": "toy", "total_steps": len(per_step), **meta}
    with RunWriter(run, method=arm, seed=seed, **meta) as writer:
        for step in sorted({*range(1, len(per_step) + 1), *evals}):
            if 1 <= step <= len(per_step):
                writer.log(step, dict(per_step[step - 1]))
            if step in evals:
                writer.log(step, dict(evals[step]))
    return run
