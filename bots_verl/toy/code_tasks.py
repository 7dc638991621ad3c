"""The toy code family: write ``f``, a one-line Python function applying a pipeline of integer operations.

A task is a pipeline of ``k`` operations on an integer ``x``, applied left to right, each an operator and a one-digit
constant: ``+d``, ``-d`` (d = 1..9), ``*d``, ``//d``, ``%d`` (d = 2..9). The prompt is the pipeline as written, e.g.
``+3*2%5``; the response is a fenced program, ``` ```\\nf=lambda x:(x+3)*2%5\\n``` ```. Left-to-right application is
not Python's precedence, so the program must wrap the expression in parentheses wherever a multiplicative operation
follows an additive one: that count, ``p``, is the second difficulty axis beside ``k``.

A **cell** is ``(k, p)``: ``k`` = 1..4 operations, ``p`` = 0..k//2 parenthesised groups (8 cells, ``c2p1`` etc.). The
ground truth is GURU's call-based test JSON (``fn_name`` ``f``, :data:`TEST_INPUTS`), scored by
:mod:`bots_verl.rewards.code_reward` in the bubblewrap sandbox. Many programs pass a task (extra parentheses, another
argument name), so the canonical answer (minimal parentheses) is one right response, not the only one.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["ALL_CELLS", "CodeCell", "CodeProblem", "TEST_INPUTS", "parse_prompt", "run_pipeline"]

ADDITIVE = ("+", "-")
MULTIPLICATIVE = ("*", "//", "%")
CONSTANTS = {"+": range(1, 10), "-": range(1, 10), "*": range(2, 10), "//": range(2, 10), "%": range(2, 10)}
MAX_OPS = 4
#: the arguments every task's function is called with (negative ones check Python's floor division and modulo)
TEST_INPUTS = (-13, -4, 0, 1, 2, 7, 12, 45)
_OP_RE = re.compile(r"(\+|-|\*|//|%)([0-9])")


def run_pipeline(ops: tuple[tuple[str, int], ...], x: int) -> int:
    """The value of the pipeline ``ops`` applied to ``x`` left to right (Python's integer semantics)."""
    for op, d in ops:
        if op == "+":
            x += d
        elif op == "-":
            x -= d
        elif op == "*":
            x *= d
        elif op == "//":
            x //= d
        else:
            x %= d
    return x


def _wraps(classes: tuple[bool, ...]) -> int:
    """Parenthesised groups of a pipeline given whether each op is multiplicative: an additive op then a
    multiplicative one."""
    return sum(1 for prev, cur in itertools.pairwise(classes) if not prev and cur)


@dataclass(frozen=True, order=True)
class CodeCell:
    """A difficulty cell: ``ops`` operations composed, ``wraps`` of them needing parentheses."""

    ops: int
    wraps: int

    def __post_init__(self) -> None:
        if not 1 <= self.ops <= MAX_OPS or not 0 <= self.wraps <= self.ops // 2:
            raise ValueError(f"no code cell with {self.ops} operations and {self.wraps} parenthesised groups")

    @property
    def name(self) -> str:
        """A short stable label, e.g. ``c3p1``."""
        return f"c{self.ops}p{self.wraps}"

    @property
    def level(self) -> int:
        """The difficulty level 1..4 the build profiles size the pool by: the number of operations."""
        return self.ops

    @cached_property
    def _class_sequences(self) -> tuple[tuple[tuple[bool, ...], int], ...]:
        out = []
        for classes in itertools.product((False, True), repeat=self.ops):
            if _wraps(classes) == self.wraps:
                choices = 1
                for mult in classes:
                    ops = MULTIPLICATIVE if mult else ADDITIVE
                    choices *= sum(len(CONSTANTS[o]) for o in ops)
                out.append((classes, choices))
        return tuple(out)

    @property
    def size(self) -> int:
        """Number of distinct pipelines (prompts) in the cell."""
        return sum(n for _, n in self._class_sequences)

    def sample(self, rng: np.random.Generator) -> CodeProblem:
        """One pipeline drawn uniformly from the cell."""
        seqs = self._class_sequences
        weights = np.array([n for _, n in seqs], dtype=float)
        classes = seqs[int(rng.choice(len(seqs), p=weights / weights.sum()))][0]
        ops = []
        for mult in classes:
            pairs = [(o, d) for o in (MULTIPLICATIVE if mult else ADDITIVE) for d in CONSTANTS[o]]
            ops.append(pairs[int(rng.integers(len(pairs)))])
        return CodeProblem(tuple(ops))

    @classmethod
    def from_name(cls, name: str) -> CodeCell:
        """Inverse of :attr:`name`.

        Raises:
            ValueError: for a malformed name.
        """
        match = re.fullmatch(r"c([0-9])p([0-9])", name)
        if match is None:
            raise ValueError(f"not a code cell name: {name!r} (expected e.g. 'c3p1')")
        return cls(int(match.group(1)), int(match.group(2)))


ALL_CELLS: tuple[CodeCell, ...] = tuple(
    CodeCell(k, p) for k in range(1, MAX_OPS + 1) for p in range(k // 2 + 1) if k > 1 or p == 0
)


@dataclass(frozen=True)
class CodeProblem:
    """One task: a pipeline of ``(operator, constant)`` pairs."""

    ops: tuple[tuple[str, int], ...]

    @property
    def prompt(self) -> str:
        """The user message, e.g. ``"+3*2%5"``."""
        return "".join(f"{op}{d}" for op, d in self.ops)

    @property
    def expression(self) -> str:
        """The pipeline as a Python expression in ``x`` with the fewest parentheses."""
        expr, additive = "x", False
        for op, d in self.ops:
            if op in MULTIPLICATIVE and additive:
                expr = f"({expr})"
            expr, additive = f"{expr}{op}{d}", op in ADDITIVE
        return expr

    @property
    def answer(self) -> str:
        """The canonical response: the program in an untagged fence (what the warm-ups are trained on)."""
        return f"```\nf=lambda x:{self.expression}\n```"

    @property
    def ground_truth(self) -> str:
        """GURU's call-based test JSON for :mod:`bots_verl.rewards.code_reward`."""
        outputs = [run_pipeline(self.ops, x) for x in TEST_INPUTS]
        return json.dumps({"fn_name": "f", "inputs": [[x] for x in TEST_INPUTS], "outputs": outputs})

    @property
    def cell(self) -> CodeCell:
        """The problem's difficulty cell."""
        return CodeCell(len(self.ops), _wraps(tuple(op in MULTIPLICATIVE for op, _ in self.ops)))

    @property
    def features(self) -> dict[str, Any]:
        """Difficulty features for ``extra_info``."""
        return {"ops": len(self.ops), "wraps": self.cell.wraps}


def parse_prompt(prompt: str) -> CodeProblem:
    """Inverse of :attr:`CodeProblem.prompt`.

    Raises:
        ValueError: for anything that is not 1..4 ``<op><digit>`` pairs with a valid constant.
    """
    ops = [(m.group(1), int(m.group(2))) for m in _OP_RE.finditer(prompt)]
    if not ops or len(ops) > MAX_OPS or "".join(f"{o}{d}" for o, d in ops) != prompt:
        raise ValueError(f"not a toy code prompt: {prompt!r}")
    if any(d not in CONSTANTS[o] for o, d in ops):
        raise ValueError(f"not a toy code prompt (constant out of range): {prompt!r}")
    return CodeProblem(tuple(ops))
