"""What a toy build makes: its profiles (model sizes, warm-up mixtures, pool and held-out sizes) and their seeds.

:mod:`bots_verl.toy.prepare` builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bots_verl.toy.model import ModelSpec
from bots_verl.toy.tasks import ALL_CELLS, Cell
from bots_verl.toy.warmup import WarmupSpec

__all__ = [
    "BUILD_PROFILES",
    "REFERENCE_COLUMNS",
    "STRONG_COLUMN",
    "WEAK_COLUMN",
    "BuildProfile",
    "PrepareError",
    "seeded",
]

WEAK_COLUMN = "toy_weak_pass_rate"
STRONG_COLUMN = "toy_strong_pass_rate"
REFERENCE_COLUMNS = (WEAK_COLUMN, STRONG_COLUMN)
HELDOUT_STREAM, POOL_STREAM = 1, 2
ROLE_IDS = {"policy": 1, "weak": 2, "strong": 3}


class PrepareError(RuntimeError):
    """An artifact cannot be built as asked (a conflicting existing output, a failed subprocess)."""


def _by_max_digits(weights: Mapping[int, float]) -> dict[str, float]:
    """A mixture over all cells with the weight of each cell's larger operand digit count."""
    return {c.name: float(weights[max(c.digits_a, c.digits_b)]) for c in ALL_CELLS}


@dataclass(frozen=True)
class BuildProfile:
    """Sizes and settings of one build.

    Attributes:
        name: ``full``, ``quick`` or ``ci``.
        pool_per_cell: training tasks per cell by the cell's larger operand digit count (1..4); a cell smaller than
            asked gives all of its free problems.
        heldout_cells: the held-out set's cells (where the starting policy learns).
        heldout_size: held-out prompts, spread evenly over ``heldout_cells``.
        policy: the policy's warm-up (seeds are filled in from the benchmark seed).
        weak: the weak reference's warm-up.
        strong: the strong reference's warm-up.
        reference_n: responses per prompt for the reference columns.
        max_tokens: response budget (the longest answer, ``7006652``, plus ``</s>`` is 8 tokens).
        reference_batch_size: prompts per ``reference_eval collect`` batch (its unit of durability).
    """

    name: str
    pool_per_cell: Mapping[int, int]
    heldout_cells: tuple[str, ...]
    heldout_size: int
    policy: WarmupSpec
    weak: WarmupSpec
    strong: WarmupSpec
    reference_n: int = 16
    max_tokens: int = 12
    reference_batch_size: int = 64

    def pool_counts(self) -> dict[Cell, int]:
        """Training tasks per cell."""
        return {c: self.pool_per_cell[max(c.digits_a, c.digits_b)] for c in ALL_CELLS}

    def heldout_counts(self) -> dict[Cell, int]:
        """Held-out prompts per cell (the remainder goes to the first cells)."""
        cells = [Cell.from_name(n) for n in self.heldout_cells]
        base, extra = divmod(self.heldout_size, len(cells))
        return {c: base + (1 if i < extra else 0) for i, c in enumerate(cells)}

    def data_settings(self, seed: int) -> dict[str, Any]:
        """What determines the data files (compared on resume)."""
        return {
            "seed": seed,
            "pool_per_cell": {str(k): v for k, v in sorted(self.pool_per_cell.items())},
            "heldout_cells": list(self.heldout_cells),
            "heldout_size": self.heldout_size,
        }


_POLICY_MODEL = ModelSpec(hidden=128, layers=4, heads=4, intermediate=512)
# The policy's warm-up data: every cell, skewed to easy ones. The references see the same family with more weight on
# the 2- and 3-digit cells where the policy is neither right nor wrong (their "pretraining" differs from the
# policy's, as a larger model's does); a wider reference (hidden 192) trained for 1300 steps ended below the policy.
_EASY_SKEW = _by_max_digits({1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0})
_WEAK_SKEW = _by_max_digits({1: 2.0, 2: 8.0, 3: 2.0, 4: 0.25})
_STRONG_SKEW = _by_max_digits({1: 2.0, 2: 6.0, 3: 4.0, 4: 0.5})
# The 2-digit +/- cells and the 1-digit-by-2-digit products: where a warmed-up policy is neither right nor wrong.
_HELDOUT_CELLS = ("add2x2", "sub2x2", "add2x1", "add1x2", "sub2x1", "sub1x2", "mul2x1", "mul1x2")
_CI_MODEL = ModelSpec(hidden=32, layers=2, heads=2, intermediate=64)

BUILD_PROFILES: dict[str, BuildProfile] = {
    "full": BuildProfile(
        name="full",
        pool_per_cell={1: 80, 2: 80, 3: 48, 4: 32},
        heldout_cells=_HELDOUT_CELLS,
        heldout_size=600,
        # half of the policy's warm-up responses open with a stray "=" (WarmupSpec.slip): a policy that knows more
        # than it delivers, so GRPO has a behaviour to learn that transfers across tasks. Without it this policy's
        # GRPO memorised the batch's tasks and moved held-out accuracy by +0.01-0.02 at best (calibration.md,
        # "Why Random did not learn"); the references stay clean, as other models would be.
        policy=WarmupSpec(model=_POLICY_MODEL, mixture=_EASY_SKEW, steps=1000, batch_size=128, lr=2e-3, slip=0.5),
        weak=WarmupSpec(model=_POLICY_MODEL, mixture=_WEAK_SKEW, steps=1000, batch_size=128, lr=2e-3),
        strong=WarmupSpec(model=_POLICY_MODEL, mixture=_STRONG_SKEW, steps=2000, batch_size=128, lr=2e-3),
    ),
    # `make toy-quick`: the full pool's proportions (80/80/48/32 per cell) at 735 tasks, and warm-ups long enough
    # that the policy starts where selection matters (pool mean and mixed groups near the full policy's; probes in
    # recipes/toy/results/calibration.md, "quick profile"). The old 150-step policy started at pool mean 0.013 on a
    # pool of 16 tasks in every cell (75% of them 3- and 4-digit): nothing for a selector to find.
    "quick": BuildProfile(
        name="quick",
        pool_per_cell={1: 25, 2: 25, 3: 15, 4: 10},
        heldout_cells=_HELDOUT_CELLS,
        heldout_size=200,
        policy=WarmupSpec(model=_POLICY_MODEL, mixture=_EASY_SKEW, steps=600, batch_size=64, lr=3e-3),
        weak=WarmupSpec(model=_POLICY_MODEL, mixture=_WEAK_SKEW, steps=300, batch_size=64, lr=3e-3),
        strong=WarmupSpec(model=_POLICY_MODEL, mixture=_STRONG_SKEW, steps=700, batch_size=64, lr=3e-3),
        reference_n=8,
    ),
    "ci": BuildProfile(
        name="ci",
        pool_per_cell={1: 2, 2: 2, 3: 2, 4: 2},
        heldout_cells=_HELDOUT_CELLS,
        heldout_size=24,
        policy=WarmupSpec(model=_CI_MODEL, mixture=_EASY_SKEW, steps=10, batch_size=16),
        weak=WarmupSpec(model=_CI_MODEL, mixture=_WEAK_SKEW, steps=15, batch_size=16),
        strong=WarmupSpec(model=_CI_MODEL, mixture=_STRONG_SKEW, steps=20, batch_size=16),
        reference_n=4,
        max_tokens=10,
        reference_batch_size=32,
    ),
}


def seeded(spec: WarmupSpec, seed: int, role: str, index: int = 0) -> WarmupSpec:
    """``spec`` with the initial-weight and data seeds of ``role`` under benchmark ``seed`` (distinct per role)."""
    base = 1000 * seed + 100 * ROLE_IDS[role] + 10 * index
    return dataclasses.replace(spec, init_seed=base + 1, data_seed=base + 2)
