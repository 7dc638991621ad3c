"""Label only a subset: which tasks get reference evaluations when the labelling budget is a fraction of the pool.

``collect --label-fraction F --label-by uniform|spread [--embeddings FILE]`` evaluates only the chosen tasks; ``merge``
then leaves every other row NaN, and BOTS infers those rows through the task-similarity graph
(``+bots.hparams.reference_nan=neighbours`` with ``bots.task_embeddings``). The choice is
:func:`bots_verl.core.task_graph.choose_labelled`: ``uniform`` draws the fraction at random, ``spread`` spreads it over
the embedding space (needs the embedding file). The same data, fraction, method, seed and embeddings give the same
subset, so the two reference models' ``collect`` runs (and every shard) label the same tasks.

The plan states what the subset saves: the skipped tasks x samples per task x reference models, the generations a
full ``collect`` of both references would have made and this one does not.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["LABEL_METHODS", "LabelPlan", "choose_subset", "write_masked_columns"]

LABEL_METHODS = ("uniform", "spread")


@dataclass(frozen=True)
class LabelPlan:
    """A labelled subset and what it saves.

    Attributes:
        tasks: tasks in the pool.
        labelled: tasks that get reference evaluations.
        fraction: the requested fraction.
        method: ``uniform`` or ``spread``.
        seed: the choice's seed.
        embeddings: the embedding file (``spread``), or None.
        samples: responses per task and reference model (``-n``).
        models: reference models the columns need (BOTS: 2).
        task_ids: the labelled tasks' ids, in pool order.
    """

    tasks: int
    labelled: int
    fraction: float
    method: str
    seed: int
    embeddings: str | None
    samples: int
    models: int
    task_ids: tuple[int | str, ...]

    @property
    def skipped(self) -> int:
        """Tasks left without reference evaluations (NaN in the merged column)."""
        return self.tasks - self.labelled

    @property
    def generations(self) -> int:
        """Generations the subset costs: labelled x samples x models."""
        return self.labelled * self.samples * self.models

    @property
    def saved_generations(self) -> int:
        """Generations a full labelling would cost on top: skipped x samples x models."""
        return self.skipped * self.samples * self.models

    def summary(self) -> str:
        """One line for the user: the subset and the generations it saves."""
        return (
            f"reference labels on {self.labelled} of {self.tasks} tasks ({self.method}, fraction {self.fraction:g}, "
            f"seed {self.seed}): {self.labelled} x {self.samples} samples x {self.models} models = "
            f"{self.generations:,} generations; saves {self.skipped} x {self.samples} x {self.models} = "
            f"{self.saved_generations:,} generations ({self.skipped / self.tasks:.1%} of a full labelling)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (without the id list), with the derived counts."""
        out = asdict(self)
        out.pop("task_ids")
        out.update(skipped=self.skipped, generations=self.generations, saved_generations=self.saved_generations)
        return out


def choose_subset(
    task_ids: Sequence[int | str],
    fraction: float,
    method: str,
    *,
    seed: int = 0,
    embeddings: str | os.PathLike | None = None,
    samples: int = 16,
    models: int = 2,
) -> LabelPlan:
    """Choose the tasks to label.

    Args:
        task_ids: every task of the pool, in file order.
        fraction: the share to label, in (0, 1].
        method: ``uniform`` or ``spread``.
        seed: seed of the choice.
        embeddings: the pool's embedding file (``python -m reference_eval embed``); required by ``spread``, and
            checked against the pool's ids whenever given.
        samples: responses per task and model, for the accounting.
        models: reference models, for the accounting.

    Raises:
        ValueError: a fraction outside (0, 1] (0 would leave BOTS without any reference, which is ``bots_noref``, not
            a labelling), an unknown method, ``spread`` without embeddings, an embedding file that does not match.
    """
    from bots_verl.core.task_graph import choose_labelled
    from bots_verl.integration.evidence.embeddings import load_task_embeddings

    if not 0.0 < fraction <= 1.0 or not np.isfinite(fraction):
        raise ValueError(
            f"--label-fraction must be in (0, 1], got {fraction}; with no references at all train bots_noref instead"
        )
    if method not in LABEL_METHODS:
        raise ValueError(f"--label-by must be one of {LABEL_METHODS}, got {method!r}")
    if method == "spread" and embeddings is None:
        raise ValueError("--label-by spread needs --embeddings (python -m reference_eval embed --data ... --out ...)")
    ids = list(task_ids)
    if embeddings is not None:
        vectors = load_task_embeddings(embeddings, ids).vectors
    else:
        vectors = np.ones((len(ids), 1), dtype=np.float32)  # uniform reads only the pool size
    chosen = np.asarray(choose_labelled(vectors, fraction, method, seed), dtype=np.int64)
    plan = LabelPlan(
        tasks=len(ids),
        labelled=int(chosen.size),
        fraction=float(fraction),
        method=method,
        seed=int(seed),
        embeddings=None if embeddings is None else str(embeddings),
        samples=int(samples),
        models=int(models),
        task_ids=tuple(ids[i] for i in chosen),
    )
    logger.info("%s", plan.summary())
    return plan


def write_masked_columns(
    data: str | os.PathLike,
    out: str | os.PathLike,
    plan: LabelPlan,
    columns: Sequence[str],
    suffix: str,
    id_column: str = "task_id",
) -> list[str]:
    """Write ``data`` plus, per column, a copy restricted to the plan's tasks (NaN elsewhere) named ``<col><suffix>``.

    Returns:
        The new column names.

    Raises:
        ValueError: a missing column, a name that exists already, or a plan for another pool.
    """
    import pyarrow as pa

    from bots_verl.fileio import write_table_atomic

    from .data import read_table, task_ids

    table = read_table(data)
    ids = task_ids(table, id_column)
    if len(ids) != plan.tasks:
        raise ValueError(f"the label plan covers {plan.tasks} tasks, {data} has {len(ids)}")
    chosen = set(plan.task_ids)
    mask = np.fromiter((t in chosen for t in ids), dtype=bool, count=len(ids))
    names = []
    for column in columns:
        if column not in table.column_names:
            raise ValueError(f"{data} has no column {column!r}")
        name = f"{column}{suffix}"
        if name in table.column_names:
            raise ValueError(f"{data} already has a column {name!r}; choose another --suffix")
        values = table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
        table = table.append_column(name, pa.array(np.where(mask, values, np.nan), pa.float64()))
        names.append(name)
    write_table_atomic(table, out)
    return names
