"""What a toy build makes: its profiles (model sizes, warm-up mixtures, pool and held-out sizes) and their seeds.

:data:`BUILD_PROFILES` are the arithmetic family's; :data:`FAMILY_PROFILES` holds every family's
(:mod:`bots_verl.toy.families`), looked up by :func:`build_profile`. :mod:`bots_verl.toy.prepare` builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bots_verl.toy.families import family_of
from bots_verl.toy.model import ModelSpec
from bots_verl.toy.tasks import ALL_CELLS
from bots_verl.toy.warmup import WarmupSpec

__all__ = [
    "BUILD_PROFILES",
    "FAMILY_PROFILES",
    "REFERENCE_COLUMNS",
    "STRONG_COLUMN",
    "WEAK_COLUMN",
    "BuildProfile",
    "PrepareError",
    "build_profile",
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
        pool_per_cell: training tasks per cell by the cell's difficulty level 1..4 (arithmetic: the larger operand
            digit count; code: operations; logic: objects - 2); a cell smaller than asked gives all of its free
            problems.
        heldout_cells: the held-out set's cells (where the starting policy learns).
        heldout_size: held-out prompts, spread evenly over ``heldout_cells``.
        policy: the policy's warm-up (seeds are filled in from the benchmark seed).
        weak: the weak reference's warm-up.
        strong: the strong reference's warm-up.
        reference_n: responses per prompt for the reference columns.
        max_tokens: response budget (the longest answer, ``7006652``, plus ``</s>`` is 8 tokens).
        reference_batch_size: prompts per ``reference_eval collect`` batch (its unit of durability).
        family: the task family (:mod:`bots_verl.toy.families`); its warm-up specs carry it too.
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
    family: str = "arith"

    def __post_init__(self) -> None:
        fam = family_of(self.family)
        for spec in (self.policy, self.weak, self.strong):
            if spec.family != self.family:
                raise ValueError(f"profile {self.name!r} of family {self.family!r} has a {spec.family!r} warm-up")
        for name in self.heldout_cells:
            fam.cell_from_name(name)

    def pool_counts(self) -> dict[Any, int]:
        """Training tasks per cell."""
        fam = family_of(self.family)
        return {c: self.pool_per_cell[fam.level(c)] for c in fam.cells}

    def heldout_counts(self) -> dict[Any, int]:
        """Held-out prompts per cell (the remainder goes to the first cells)."""
        cells = [family_of(self.family).cell_from_name(n) for n in self.heldout_cells]
        base, extra = divmod(self.heldout_size, len(cells))
        return {c: base + (1 if i < extra else 0) for i, c in enumerate(cells)}

    def data_settings(self, seed: int) -> dict[str, Any]:
        """What determines the data files (compared on resume; an arithmetic build's settings name no family)."""
        family = {} if self.family == "arith" else {"family": self.family}
        return {
            **family,
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


def _by_level(family: str, weights: Mapping[int, float]) -> dict[str, float]:
    """A mixture over all of ``family``'s cells with the weight of each cell's difficulty level."""
    fam = family_of(family)
    return {c.name: float(weights[fam.level(c)]) for c in fam.cells}


# The code and logic families have only their `ci` builds so far: their full builds come with their calibration
# (issue 60). The `ci` policies train long enough to write the family's format (a fence and "f=lambda x:", answer
# tags), so that a 2-step fit's rollouts reach the domain reward's checks, not only its "no answer" branch.
_CODE_CI_MODEL = ModelSpec(hidden=32, layers=2, heads=2, intermediate=64)
_LOGIC_CI_MODEL = ModelSpec(hidden=32, layers=2, heads=2, intermediate=64, max_positions=96)


def _ci_profile(family: str, model: ModelSpec, heldout_cells: tuple[str, ...], max_tokens: int) -> BuildProfile:
    def spec(mixture: Mapping[int, float], steps: int, slip: float = 0.0) -> WarmupSpec:
        mix = _by_level(family, mixture)
        return WarmupSpec(model=model, mixture=mix, steps=steps, batch_size=16, lr=1e-2, slip=slip, family=family)

    return BuildProfile(
        name="ci",
        pool_per_cell={1: 3, 2: 3, 3: 3, 4: 3},
        heldout_cells=heldout_cells,
        heldout_size=16,
        policy=spec({1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0}, steps=200, slip=0.5),
        # the references' ci warm-ups are short (CI time): what the ci build checks is their columns' plumbing
        weak=spec({1: 2.0, 2: 8.0, 3: 2.0, 4: 0.25}, steps=60),
        strong=spec({1: 2.0, 2: 6.0, 3: 4.0, 4: 0.5}, steps=100),
        reference_n=4,
        max_tokens=max_tokens,
        reference_batch_size=32,
        family=family,
    )


def _full_profile(
    family: str,
    model: ModelSpec,
    pool_per_cell: Mapping[int, int],
    heldout_cells: tuple[str, ...],
    steps: tuple[int, int, int],
    stop_at: tuple[float, float, float],
    max_tokens: int,
    heldout_size: int,
) -> BuildProfile:
    """A family's full build: arithmetic's mixtures and learning rate; warm-ups (policy, weak, strong) on schedules of
    ``steps`` that stop where their pool pass rate reaches ``stop_at`` (:attr:`WarmupSpec.stop_at`).

    The code and logic warm-ups are stopped early, not run to convergence: these families' skills are shared by every
    cell (copying a pipeline, placing an object), so a warm-up run long enough solves every cell and leaves nothing
    out of reach. They stop at a pass rate, not a step: where they stop their curves are steep and move with the seed
    (code's policy at 160 steps: pool pass rate 0.054 on seed 1, held-out 0.176 on seed 0, above that seed's weak
    reference). ``steps`` and ``stop_at`` are where the first calibrated builds stopped: each target lies between the
    last two checks of its model, which therefore stops exactly where it did (families.md); logic's second build, on
    other held-out cells, kept them and stopped at 310, 510 and 1530 steps. A warm-up stops at its first check past
    the target, on or after its schedule's end (then at the floor rate) up to 3x ``steps``.
    """

    def spec(mixture: Mapping[int, float], n: int, target: float, slip: float = 0.0) -> WarmupSpec:
        return WarmupSpec(
            model=model,
            mixture=_by_level(family, mixture),
            steps=n,
            batch_size=128,
            lr=2e-3,
            slip=slip,
            family=family,
            stop_at=target,
            check_every=10,
            max_steps=3 * n,
        )

    return BuildProfile(
        name="full",
        pool_per_cell=pool_per_cell,
        heldout_cells=heldout_cells,
        heldout_size=heldout_size,
        policy=spec({1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0}, steps[0], stop_at[0], slip=0.5),
        weak=spec({1: 2.0, 2: 8.0, 3: 2.0, 4: 0.25}, steps[1], stop_at[1]),
        strong=spec({1: 2.0, 2: 6.0, 3: 4.0, 4: 0.5}, steps[2], stop_at[2]),
        max_tokens=max_tokens,
        family=family,
    )


_CODE_MODEL = dataclasses.replace(_POLICY_MODEL, max_positions=64)
_LOGIC_MODEL = dataclasses.replace(_POLICY_MODEL, max_positions=96)

FAMILY_PROFILES: dict[str, dict[str, BuildProfile]] = {
    "arith": BUILD_PROFILES,
    # the longest program, "```\nf=lambda x:((x-4)*9+9)*5\n```", and </s>: 35 tokens
    "code": {
        # c1p0 has 42 distinct one-operation tasks: the pool takes 40 of them
        "full": _full_profile(
            "code",
            _CODE_MODEL,
            {1: 40, 2: 80, 3: 64, 4: 48},
            ("c2p0", "c2p1", "c3p0", "c3p1"),
            (160, 110, 160),
            (0.052, 0.18, 0.36),
            40,
            600,
        ),
        "ci": _ci_profile("code", _CODE_CI_MODEL, ("c2p0", "c2p1", "c3p0", "c3p1"), max_tokens=40),
    },
    # the longest answer, six objects in tags, and </s>: 43 tokens
    "logic": {
        "full": _full_profile(
            "logic",
            _LOGIC_MODEL,
            {1: 40, 2: 48, 3: 40, 4: 32},
            # where Random's policy learns within 90 steps: on the first build, whose held-out also held o5pos and
            # o5mix, Random gained 0.03-0.06 (under issue 60's floor of 0.05), +0.08 and +0.12 on fresh o4pos and
            # o4mix tasks but +0.01 on the five-object cells (recipes/toy/results/families.md). o4pos has 576
            # distinct puzzles: 200 held out leave the pool and the warm-ups about as many as before
            ("o4pos", "o4mix"),
            (300, 450, 800),
            (0.10, 0.295, 0.45),
            48,
            400,
        ),
        "ci": _ci_profile("logic", _LOGIC_CI_MODEL, ("o3mix", "o4pos", "o4mix", "o5pos"), max_tokens=48),
    },
}


def build_profile(family: str, profile: str) -> BuildProfile:
    """The build profile ``profile`` of task family ``family``.

    Raises:
        PrepareError: for an unknown family, or a profile the family does not have (naming the ones it has).
    """
    try:
        family_of(family)
    except ValueError as err:
        raise PrepareError(str(err)) from err
    profiles = FAMILY_PROFILES[family]
    if profile not in profiles:
        raise PrepareError(
            f"the {family} family has no {profile!r} build profile (it has {sorted(profiles)}); "
            "its full builds come with its calibration"
        )
    return profiles[profile]
