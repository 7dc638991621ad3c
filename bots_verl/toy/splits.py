"""The toy training pool and held-out set as verl RL parquet files, in the layout our GURU preparation writes.

Columns (one row per task): ``data_source`` (``toy__arith``, routed to :mod:`bots_verl.rewards.arith_reward`),
``prompt`` (``[{"role": "user", "content": "12+34"}]``; the tokenizer's chat template adds ``<s>`` and ``=``),
``ability`` (``arith``), ``reward_model`` (``{style: "rule", ground_truth: "46"}``), ``extra_info`` (``split``,
``index`` = the task id, and the difficulty features ``cell``, ``op``, ``digits_a``, ``digits_b``, ``carries``) and
``task_id`` (int64, dense ``0..N-1`` in row order, equal to ``extra_info.index``). ``reference_eval merge`` later adds
the reference pass-rate columns to the training file.

The held-out set is drawn first, from the cells where the starting policy learns, then the pool from all cells with
the held-out prompts excluded, so no held-out problem is ever trained on. Rows are shuffled with the seed, so the
dataset order (what verl's sequential sampler and the ``sequential`` selector see) is not sorted by difficulty.

The code and logic families (:mod:`bots_verl.toy.families`) use the same layout with their own ``data_source``,
``ability``, ground truth (GURU's test JSON; the order as a JSON list) and difficulty features (:func:`schema_of`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bots_verl.fileio import write_table_atomic
from bots_verl.rewards.arith_reward import DATA_SOURCE
from bots_verl.toy.families import family_of
from bots_verl.toy.tasks import Cell, Problem, parse_prompt, sample_unique

logger = logging.getLogger(__name__)

__all__ = ["ABILITY", "SCHEMA", "build_split", "rows_of", "schema_of", "write_split"]

ABILITY = "arith"

SCHEMA = pa.schema(
    [
        pa.field("data_source", pa.string()),
        pa.field("prompt", pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())]))),
        pa.field("ability", pa.string()),
        pa.field("reward_model", pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())])),
        pa.field(
            "extra_info",
            pa.struct(
                [
                    pa.field("split", pa.string()),
                    pa.field("index", pa.int64()),
                    pa.field("cell", pa.string()),
                    pa.field("op", pa.string()),
                    pa.field("digits_a", pa.int64()),
                    pa.field("digits_b", pa.int64()),
                    pa.field("carries", pa.int64()),
                ]
            ),
        ),
        pa.field("task_id", pa.int64()),
    ]
)


def schema_of(family: str = "arith") -> pa.Schema:
    """The parquet schema of a family's rows: :data:`SCHEMA` with the family's ``extra_info`` features."""
    if family == "arith":
        return SCHEMA
    fields = [pa.field("split", pa.string()), pa.field("index", pa.int64()), pa.field("cell", pa.string())]
    fields += [pa.field(name, kind) for name, kind in family_of(family).features]
    i = SCHEMA.get_field_index("extra_info")
    return SCHEMA.set(i, pa.field("extra_info", pa.struct(fields)))


def build_split(
    counts: Mapping[Cell, int], seed: int, stream: int, exclude: Sequence[str] = (), family: str = "arith"
) -> list[Problem]:
    """Distinct problems (``counts`` per cell) in a seeded random order.

    Args:
        counts: problems per cell; a cell smaller than asked gives all of its free problems.
        seed: the benchmark seed.
        stream: which random stream of the seed (so the held-out set and the pool are independent draws).
        exclude: prompts that must not appear.
        family: the task family (:mod:`bots_verl.toy.families`).

    Returns:
        The problems, shuffled.
    """
    rng = np.random.default_rng([seed, stream])
    if family != "arith":
        problems = family_of(family).sample_unique(counts, rng, exclude)
        return [problems[i] for i in rng.permutation(len(problems))]
    excluded = set(exclude)
    taken = Counter(parse_prompt(p).cell for p in excluded)
    capped = {cell: min(n, cell.size - taken[cell]) for cell, n in counts.items()}
    problems = sample_unique(capped, rng, excluded)
    order = rng.permutation(len(problems))
    return [problems[i] for i in order]


def rows_of(problems: Sequence[Problem], split: str, family: str = "arith") -> list[dict[str, Any]]:
    """verl rows for ``problems`` of ``family``; the task id is the row position."""
    if family != "arith":
        fam = family_of(family)
        return [
            {
                "data_source": fam.data_source,
                "prompt": [{"role": "user", "content": problem.prompt}],
                "ability": fam.ability,
                "reward_model": {"style": "rule", "ground_truth": problem.ground_truth},
                "extra_info": {"split": split, "index": index, "cell": problem.cell.name, **problem.features},
                "task_id": index,
            }
            for index, problem in enumerate(problems)
        ]
    rows = []
    for index, problem in enumerate(problems):
        cell = problem.cell
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": problem.prompt}],
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": problem.answer},
                "extra_info": {
                    "split": split,
                    "index": index,
                    "cell": cell.name,
                    "op": cell.op,
                    "digits_a": cell.digits_a,
                    "digits_b": cell.digits_b,
                    "carries": problem.carries,
                },
                "task_id": index,
            }
        )
    return rows


def write_split(problems: Sequence[Problem], split: str, path: str | os.PathLike, family: str = "arith") -> Path:
    """Write ``problems`` of ``family`` as a verl parquet, atomically (temp file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows_of(problems, split, family), schema=schema_of(family))
    write_table_atomic(table, path)
    return path
