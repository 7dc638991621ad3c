"""The toy task family: integer ``a+b``, ``a-b`` and ``a*b`` with 1-4-digit operands, generated from a seed.

Why arithmetic: difficulty is graded and controllable (operand digits, operation, carries), the skills are shared
(every multi-digit problem reuses the one-digit facts and the column-wise carry; ``*`` builds on ``+``), the answer is
one integer that a strict scorer checks exactly (:mod:`bots_verl.rewards.arith_reward`), and a 1M-parameter model
learns the easy cells in minutes on a CPU while the 4-digit products stay out of reach: the mix of trivial, learnable
and impossible tasks that makes task selection matter.

A **cell** is ``(op, digits of a, digits of b)``: 3 operations x 4 x 4 digit counts = 48 cells. A problem is drawn
uniformly within its cell (a one-digit operand is 0-9, a d-digit one 10^(d-1) .. 10^d - 1; subtraction may go
negative). Every random choice comes from a :class:`numpy.random.Generator` seeded with ``(seed, stream)``, so the same
seed gives the same problems on any machine, and the streams (held-out set, training pool, warm-up data of each model)
do not depend on each other.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "ALL_CELLS",
    "MAX_DIGITS",
    "OPS",
    "Cell",
    "Problem",
    "ProblemStream",
    "carries",
    "mixture",
    "parse_prompt",
    "sample_unique",
]

OPS = ("+", "-", "*")
OP_NAMES = {"+": "add", "-": "sub", "*": "mul"}
MAX_DIGITS = 4


def _operand_range(digits: int) -> tuple[int, int]:
    """Inclusive range of a ``digits``-digit operand (one digit includes 0)."""
    if not 1 <= digits <= MAX_DIGITS:
        raise ValueError(f"operand digits must be in 1..{MAX_DIGITS}, got {digits}")
    return (0, 9) if digits == 1 else (10 ** (digits - 1), 10**digits - 1)


def _digits(value: int) -> list[int]:
    """Decimal digits of a non-negative int, least significant first."""
    out = []
    while True:
        value, d = divmod(value, 10)
        out.append(d)
        if value == 0:
            return out


def carries(a: int, b: int, op: str) -> int:
    """Carry (or borrow) events of the schoolbook method: a difficulty feature within a cell.

    ``+``: columns where the digit sum plus the incoming carry reaches 10. ``-``: borrows when subtracting the smaller
    from the larger operand. ``*``: columns of the long multiplication whose sum of digit products plus the incoming
    carry reaches 10 (the same rule as for ``+``, with digit products in place of digits).

    Raises:
        ValueError: for a negative operand or an unknown operation.
    """
    if a < 0 or b < 0:
        raise ValueError("operands are non-negative")
    if op == "-":
        hi, lo = _digits(max(a, b)), _digits(min(a, b))
        count, borrow = 0, 0
        for k, d in enumerate(hi):
            diff = d - (lo[k] if k < len(lo) else 0) - borrow
            borrow = int(diff < 0)
            count += borrow
        return count
    da, db = _digits(a), _digits(b)
    if op == "+":
        columns = [(da[k] if k < len(da) else 0) + (db[k] if k < len(db) else 0) for k in range(max(len(da), len(db)))]
    elif op == "*":
        columns = [0] * (len(da) + len(db) - 1)
        for i, x in enumerate(da):
            for j, y in enumerate(db):
                columns[i + j] += x * y
    else:
        raise ValueError(f"unknown operation {op!r}; choose from {OPS}")
    count, carry = 0, 0
    for col in columns:
        total = col + carry
        carry = total // 10
        count += int(carry > 0)
    return count


@dataclass(frozen=True, order=True)
class Cell:
    """A difficulty cell: one operation and the digit counts of both operands.

    Attributes:
        op: ``+``, ``-`` or ``*``.
        digits_a: digits of the left operand (1..4).
        digits_b: digits of the right operand (1..4).
    """

    op: str
    digits_a: int
    digits_b: int

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown operation {self.op!r}; choose from {OPS}")
        _operand_range(self.digits_a)
        _operand_range(self.digits_b)

    @property
    def name(self) -> str:
        """A short stable label, e.g. ``add2x3``."""
        return f"{OP_NAMES[self.op]}{self.digits_a}x{self.digits_b}"

    @property
    def size(self) -> int:
        """Number of distinct problems in the cell."""
        (lo_a, hi_a), (lo_b, hi_b) = _operand_range(self.digits_a), _operand_range(self.digits_b)
        return (hi_a - lo_a + 1) * (hi_b - lo_b + 1)

    def sample(self, rng: np.random.Generator) -> Problem:
        """One problem drawn uniformly from the cell."""
        (lo_a, hi_a), (lo_b, hi_b) = _operand_range(self.digits_a), _operand_range(self.digits_b)
        a = int(rng.integers(lo_a, hi_a + 1))
        b = int(rng.integers(lo_b, hi_b + 1))
        return Problem(a, b, self.op)

    @classmethod
    def from_name(cls, name: str) -> Cell:
        """Inverse of :attr:`name`.

        Raises:
            ValueError: for a malformed name.
        """
        ops = {v: k for k, v in OP_NAMES.items()}
        try:
            op, rest = ops[name[:3]], name[3:]
            a, b = rest.split("x")
            return cls(op, int(a), int(b))
        except (KeyError, ValueError) as err:
            raise ValueError(f"not a cell name: {name!r} (expected e.g. 'add2x3')") from err


ALL_CELLS: tuple[Cell, ...] = tuple(
    Cell(op, a, b) for op in OPS for a in range(1, MAX_DIGITS + 1) for b in range(1, MAX_DIGITS + 1)
)


@dataclass(frozen=True)
class Problem:
    """One task: ``a op b``.

    Attributes:
        a: left operand (non-negative).
        b: right operand (non-negative).
        op: ``+``, ``-`` or ``*``.
    """

    a: int
    b: int
    op: str

    @property
    def prompt(self) -> str:
        """The user message, e.g. ``"12*34"`` (the chat template appends ``=``)."""
        return f"{self.a}{self.op}{self.b}"

    @property
    def answer(self) -> str:
        """The canonical decimal answer (what the scorer compares against)."""
        if self.op == "+":
            return str(self.a + self.b)
        if self.op == "-":
            return str(self.a - self.b)
        return str(self.a * self.b)

    @property
    def cell(self) -> Cell:
        """The problem's difficulty cell."""
        return Cell(self.op, len(str(self.a)), len(str(self.b)))

    @property
    def carries(self) -> int:
        """Carry/borrow events (see :func:`carries`)."""
        return carries(self.a, self.b, self.op)


def parse_prompt(prompt: str) -> Problem:
    """Inverse of :attr:`Problem.prompt`.

    Raises:
        ValueError: for anything that is not ``<digits><op><digits>``.
    """
    for op in OPS:
        left, sep, right = prompt.partition(op)
        if sep and left.isascii() and right.isascii() and left.isdigit() and right.isdigit():
            return Problem(int(left), int(right), op)
    raise ValueError(f"not a toy arithmetic prompt: {prompt!r}")


def mixture(weights: Mapping[Cell, float]) -> tuple[list[Cell], np.ndarray]:
    """Cells and their normalised probabilities, in a fixed (sorted) order so sampling is reproducible.

    Raises:
        ValueError: for an empty mixture or a negative/all-zero weight.
    """
    cells = sorted(c for c, w in weights.items() if w > 0)
    if not cells or any(w < 0 for w in weights.values()):
        raise ValueError("a mixture needs non-negative weights, at least one positive")
    p = np.array([weights[c] for c in cells], dtype=float)
    return cells, p / p.sum()


def sample_unique(counts: Mapping[Cell, int], rng: np.random.Generator, exclude: Iterable[str] = ()) -> list[Problem]:
    """Distinct problems, ``counts[cell]`` from each cell, none of whose prompts is in ``exclude``.

    Cells are visited in sorted order and problems drawn by rejection, so the result depends only on the seed of
    ``rng``, the counts and the excluded set.

    Raises:
        ValueError: if a cell has fewer free problems than asked for.
    """
    taken = set(exclude)
    taken_per_cell = Counter(parse_prompt(p).cell for p in taken)
    out: list[Problem] = []
    for cell in sorted(counts):
        want = counts[cell]
        free = cell.size - taken_per_cell[cell]
        if want > free:
            raise ValueError(f"cell {cell.name} has {free} free problems, {want} asked for")
        got = 0
        while got < want:
            problem = cell.sample(rng)
            if problem.prompt in taken:
                continue
            taken.add(problem.prompt)
            out.append(problem)
            got += 1
    return out


class ProblemStream:
    """An endless, seeded stream of problems from a cell mixture (the warm-up data), skipping excluded prompts.

    Args:
        weights: cell -> relative weight.
        seed: the stream's seed.
        exclude: prompts never emitted (the held-out set and the training pool), except in cells with fewer than
            ``min_cell_size`` problems, where excluding them would remove most of the cell (one-digit facts).
        min_cell_size: see ``exclude``.
    """

    def __init__(
        self, weights: Mapping[Cell, float], seed: int, exclude: Iterable[str] = (), min_cell_size: int = 1000
    ) -> None:
        self.cells, self.probs = mixture(weights)
        self.rng = np.random.default_rng(seed)
        small = {c for c in ALL_CELLS if c.size < min_cell_size}
        self.exclude = {p for p in exclude if parse_prompt(p).cell not in small}

    def __iter__(self) -> Iterator[Problem]:
        return self

    def __next__(self) -> Problem:
        while True:
            cell = self.cells[int(self.rng.choice(len(self.cells), p=self.probs))]
            problem = cell.sample(self.rng)
            if problem.prompt not in self.exclude:
                return problem

    def take(self, n: int) -> list[Problem]:
        """The next ``n`` problems."""
        return [next(self) for _ in range(n)]
