"""The toy testbed's task families as data: arithmetic (the original), code and logic, one build machinery for all.

A :class:`TaskFamily` says everything the build needs of a family: its cells and their difficulty level (what the
build profiles size the pool by), how to read a prompt back into a problem, the ``data_source`` that routes its
rollouts to the project's reward for the domain (``toy__arith``: :mod:`bots_verl.rewards.arith_reward`;
``codegen__toy``: :mod:`bots_verl.rewards.code_reward` in the bubblewrap sandbox; ``logic__ordering_puzzle_toy``:
:func:`bots_verl.rewards.logic_reward.score_ordering`), the characters its tokenizer adds to arithmetic's, the extra
``extra_info`` features, and the warm-up's format slip (a response the reward rejects although it holds the answer).

A problem of any family has ``prompt``, ``answer`` (the canonical response, what warm-ups train on and the exact
likelihood scores), ``ground_truth`` (the reward's) and ``cell`` (with ``name``, ``sample(rng)``).
:mod:`bots_verl.toy.prepare` takes ``--family``; the arithmetic family's builds are unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from bots_verl.toy import code_tasks, logic_tasks, tasks

logger = logging.getLogger(__name__)

__all__ = ["FAMILIES", "TaskFamily", "family_of"]


def _arith_slip(answer: str) -> str:
    return "=" + answer  # the reward takes the answer alone: a stray "=" fails


def _code_slip(answer: str) -> str:
    return answer.replace("```\n", "```", 1)  # no newline after the opening fence: no code block, status no_code


def _logic_slip(answer: str) -> str:
    return answer[1:]  # "answer>[...]</answer>": no opening tag, no answer


@dataclass(frozen=True)
class TaskFamily:
    """One task family of the toy testbed.

    Attributes:
        name: ``arith``, ``code`` or ``logic`` (``--family``).
        data_source: the rows' ``data_source``; :mod:`bots_verl.rewards` routes it to the domain's reward.
        ability: the rows' ``ability``.
        extra_chars: characters the family's tokenizer adds after arithmetic's (one token each).
        cells: every difficulty cell, in a fixed order.
        cell_from_name: a cell from its name (``add2x3``, ``c3p1``, ``o4mix``).
        level: a cell's difficulty level 1..4 (:attr:`BuildProfile.pool_per_cell` is keyed by it).
        parse_prompt: a problem from its prompt (raises ``ValueError`` for anything else).
        features: the family's ``extra_info`` difficulty features and their arrow types.
        slip: the warm-up's format slip of a canonical answer (a response the reward rejects).
        single_answer: whether the reward accepts one response string per task in the tokenizer's alphabet, so
            the canonical answer's likelihood is the exact pass rate (else it is a lower bound).
        max_prompt_length: tokens of the longest prompt with ``<s>`` and ``=`` (verl's ``data.max_prompt_length``).
    """

    name: str
    data_source: str
    ability: str
    extra_chars: tuple[str, ...]
    cells: tuple[Any, ...]
    cell_from_name: Callable[[str], Any]
    level: Callable[[Any], int]
    parse_prompt: Callable[[str], Any]
    features: tuple[tuple[str, pa.DataType], ...]
    slip: Callable[[str], str]
    single_answer: bool
    max_prompt_length: int

    def sample_unique(self, counts: Mapping[Any, int], rng: np.random.Generator, exclude: Iterable[str]) -> list:
        """Distinct problems, up to ``counts[cell]`` per cell, none of whose prompts is in ``exclude``.

        Arithmetic's cells have exact sizes (:func:`bots_verl.toy.tasks.sample_unique`); a code or logic cell gives
        what ``100 x`` its count of draws finds, fewer than asked only in a cell with fewer free problems (logged).
        """
        if self.name == "arith":
            return tasks.sample_unique(counts, rng, exclude)
        taken = set(exclude)
        out: list = []
        for cell in sorted(counts):
            want, got = counts[cell], 0
            for _ in range(100 * want):
                if got == want:
                    break
                problem = cell.sample(rng)
                if problem.prompt not in taken:
                    taken.add(problem.prompt)
                    out.append(problem)
                    got += 1
            if got < want:
                logger.info("cell %s: %d free problems found, %d asked for", cell.name, got, want)
        return out

    def stream(self, weights: Mapping[str, float], seed: int, exclude: Iterable[str]) -> Iterator:
        """An endless seeded stream of problems from a mixture over cell names (the warm-up data).

        Arithmetic's is :class:`bots_verl.toy.tasks.ProblemStream` (unchanged). For code and logic an excluded
        prompt is skipped, except that a draw excluded 100 times in a row is kept: a cell that small (a one-operation
        or three-object cell) cannot be held out, as arithmetic's one-digit cells are not.
        """
        cell_weights = {self.cell_from_name(name): float(w) for name, w in weights.items()}
        if self.name == "arith":
            return tasks.ProblemStream(cell_weights, seed=seed, exclude=exclude)
        return _Stream(cell_weights, seed, set(exclude))


class _Stream:
    def __init__(self, weights: Mapping[Any, float], seed: int, exclude: set[str]) -> None:
        self.cells, self.probs = tasks.mixture(weights)
        self.rng = np.random.default_rng(seed)
        self.exclude = exclude

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Any:
        cell = self.cells[int(self.rng.choice(len(self.cells), p=self.probs))]
        for _ in range(100):
            problem = cell.sample(self.rng)
            if problem.prompt not in self.exclude:
                return problem
        return problem

    def take(self, n: int) -> list:
        """The next ``n`` problems."""
        return [next(self) for _ in range(n)]


FAMILIES: dict[str, TaskFamily] = {
    "arith": TaskFamily(
        name="arith",
        data_source="toy__arith",
        ability="arith",
        extra_chars=(),
        cells=tasks.ALL_CELLS,
        cell_from_name=tasks.Cell.from_name,
        level=lambda cell: max(cell.digits_a, cell.digits_b),
        parse_prompt=tasks.parse_prompt,
        features=(("op", pa.string()), ("digits_a", pa.int64()), ("digits_b", pa.int64()), ("carries", pa.int64())),
        slip=_arith_slip,
        single_answer=True,
        # "<s>" + up to "9999*9999" + "=": 11 tokens
        max_prompt_length=16,
    ),
    "code": TaskFamily(
        name="code",
        data_source="codegen__toy",
        ability="codegen",
        # the program's characters beyond digits and + - * =: the fence, "f=lambda x:", parentheses, // and %
        extra_chars=tuple("`\n flambdx:()/%"),
        cells=code_tasks.ALL_CELLS,
        cell_from_name=code_tasks.CodeCell.from_name,
        level=lambda cell: cell.level,
        parse_prompt=code_tasks.parse_prompt,
        features=(("ops", pa.int64()), ("wraps", pa.int64())),
        slip=_code_slip,
        single_answer=False,  # extra parentheses, another argument name, a tagged fence ... pass too
        # "<s>" + up to four "//9" + "=": 14 tokens
        max_prompt_length=16,
    ),
    "logic": TaskFamily(
        name="logic",
        data_source="logic__ordering_puzzle_toy",
        ability="logic",
        # objects, the prompt's ": , <", the answer's "<answer>['B',...]</answer>"
        extra_chars=tuple("BCDFGH:,<>/[]'answer"),
        cells=logic_tasks.ALL_CELLS,
        cell_from_name=logic_tasks.LogicCell.from_name,
        level=lambda cell: cell.level,
        parse_prompt=logic_tasks.parse_prompt,
        features=(("objects", pa.int64()), ("constraints", pa.int64())),
        slip=_logic_slip,
        # the reward also takes text before the tag and a trailing comma in the list: other spellings a policy
        # could sample, so the canonical answer's likelihood is a lower bound (checked against sampling)
        single_answer=False,
        # "<s>" + "BCDFGH:" + up to 8 constraints of 3 characters with commas + "=": 33 tokens
        max_prompt_length=40,
    ),
}


def family_of(name: str) -> TaskFamily:
    """The family called ``name``.

    Raises:
        ValueError: for an unknown family, naming the known ones.
    """
    if name not in FAMILIES:
        raise ValueError(f"unknown toy task family {name!r}; choose from {sorted(FAMILIES)}")
    return FAMILIES[name]
