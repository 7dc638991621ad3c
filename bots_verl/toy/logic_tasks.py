"""The toy logic family: ordering puzzles in GURU's ``ordering_puzzle`` format, each with exactly one solution.

A task orders ``n`` objects (the first ``n`` of ``BCDFGH``: letters outside ``answer``, so the answer tag and the
objects share no character) under constraints ``X<Y`` (X comes before Y) and ``X=k`` (X is k-th, 1-based). The prompt
lists the objects then the constraints, e.g. ``BCD:C<B,D=1``; the response is the order in GURU's answer tags,
``<answer>['D','C','B']</answer>``, scored by :func:`bots_verl.rewards.logic_reward.score_ordering` (ground truth: the
order as a JSON list).

A **cell** is ``(n, style)``: ``n`` = 3..6 objects and the constraint style ``pos`` (positions only: read off),
``mix`` (both kinds) or ``rel`` (relations only: a shuffled chain to sort), 12 cells (``o4mix`` etc.). A puzzle is a
seeded random order, constraints true of it drawn until the order is the only one satisfying them, then pruned to a
minimal set (each constraint needed) and shuffled, so difficulty grows with ``n`` and from ``pos`` to ``rel``.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["ALL_CELLS", "LogicCell", "LogicProblem", "OBJECTS", "STYLES", "parse_prompt"]

OBJECTS = "BCDFGH"
STYLES = ("pos", "mix", "rel")
MIN_OBJECTS, MAX_OBJECTS = 3, 6
_PROMPT_RE = re.compile(r"([B-H]+):((?:[B-H](?:<[B-H]|=[1-6]))(?:,[B-H](?:<[B-H]|=[1-6]))*)")


@functools.cache
def _positions(n: int) -> np.ndarray:
    """``(n!, n)``: the position of each object (by index) in every order of ``n`` objects."""
    orders = np.array(list(itertools.permutations(range(n))), dtype=np.int8)  # order -> object at each position
    return np.argsort(orders, axis=1).astype(np.int8)


def _holds(objects: str, constraint: tuple[str, str, Any]) -> np.ndarray:
    """Whether ``constraint`` holds, for every order of ``objects`` (a boolean mask over :func:`_positions`)."""
    pos = _positions(len(objects))
    a, kind, b = constraint
    if kind == "<":
        return pos[:, objects.index(a)] < pos[:, objects.index(b)]
    return pos[:, objects.index(a)] == b - 1


def _solutions(objects: str, constraints: list[tuple[str, str, Any]]) -> np.ndarray:
    """Indices (into :func:`_positions`) of the orders satisfying every constraint."""
    mask = np.ones(len(_positions(len(objects))), dtype=bool)
    for c in constraints:
        mask &= _holds(objects, c)
    return np.flatnonzero(mask)


@dataclass(frozen=True, order=True)
class LogicCell:
    """A difficulty cell: ``objects`` to order under constraints of ``style``."""

    objects: int
    style: str

    def __post_init__(self) -> None:
        if not MIN_OBJECTS <= self.objects <= MAX_OBJECTS or self.style not in STYLES:
            raise ValueError(f"no logic cell with {self.objects} objects and style {self.style!r}; styles: {STYLES}")

    @property
    def name(self) -> str:
        """A short stable label, e.g. ``o4mix``."""
        return f"o{self.objects}{self.style}"

    @property
    def level(self) -> int:
        """The difficulty level 1..4 the build profiles size the pool by: objects - 2."""
        return self.objects - 2

    def sample(self, rng: np.random.Generator) -> LogicProblem:
        """One puzzle of the cell: a uniform order, constraints added until it is unique, then pruned (a ``mix``
        draw whose pruned set kept one kind only is drawn again)."""
        while True:
            problem = self._draw(rng)
            if problem.cell == self:
                return problem

    def _draw(self, rng: np.random.Generator) -> LogicProblem:
        objects = OBJECTS[: self.objects]
        order = tuple(objects[i] for i in rng.permutation(self.objects))
        candidates: list[tuple[str, str, Any]] = []
        if self.style != "rel":
            candidates += [(x, "=", k + 1) for k, x in enumerate(order)]
        if self.style != "pos":
            candidates += [(order[i], "<", order[j]) for i in range(self.objects) for j in range(i + 1, self.objects)]
        chosen: list[tuple[str, str, Any]] = []
        for i in rng.permutation(len(candidates)):
            chosen.append(candidates[i])
            if len(_solutions(objects, chosen)) == 1:
                break
        kept = list(chosen)
        for i in rng.permutation(len(chosen)):  # prune: drop each constraint the order does not need
            trial = [c for c in kept if c is not chosen[i]]
            if len(_solutions(objects, trial)) == 1:
                kept = trial
        return LogicProblem(objects, tuple(kept[i] for i in rng.permutation(len(kept))), order)

    @classmethod
    def from_name(cls, name: str) -> LogicCell:
        """Inverse of :attr:`name`.

        Raises:
            ValueError: for a malformed name.
        """
        match = re.fullmatch(r"o([0-9])(pos|mix|rel)", name)
        if match is None:
            raise ValueError(f"not a logic cell name: {name!r} (expected e.g. 'o4mix')")
        return cls(int(match.group(1)), match.group(2))


ALL_CELLS: tuple[LogicCell, ...] = tuple(
    LogicCell(n, style) for n in range(MIN_OBJECTS, MAX_OBJECTS + 1) for style in STYLES
)


@dataclass(frozen=True)
class LogicProblem:
    """One puzzle: its objects, constraints and the unique order."""

    objects: str
    constraints: tuple[tuple[str, str, Any], ...]
    order: tuple[str, ...]

    @property
    def prompt(self) -> str:
        """The user message, e.g. ``"BCD:C<B,D=1"``."""
        return f"{self.objects}:" + ",".join(f"{a}{kind}{b}" for a, kind, b in self.constraints)

    @property
    def answer(self) -> str:
        """The canonical response, e.g. ``<answer>['D','C','B']</answer>``."""
        return "<answer>[" + ",".join(f"'{x}'" for x in self.order) + "]</answer>"

    @property
    def ground_truth(self) -> str:
        """The order as GURU's JSON list (what :func:`~bots_verl.rewards.logic_reward.score_ordering` reads)."""
        return json.dumps(list(self.order))

    @property
    def cell(self) -> LogicCell:
        """The puzzle's difficulty cell."""
        kinds = {kind for _, kind, _ in self.constraints}
        style = "pos" if kinds == {"="} else "rel" if kinds == {"<"} else "mix"
        return LogicCell(len(self.objects), style)

    @property
    def features(self) -> dict[str, Any]:
        """Difficulty features for ``extra_info``."""
        return {"objects": len(self.objects), "constraints": len(self.constraints)}


def parse_prompt(prompt: str) -> LogicProblem:
    """Inverse of :attr:`LogicProblem.prompt` (the order is solved again).

    Raises:
        ValueError: for a malformed prompt or constraints with other than one solution.
    """
    match = _PROMPT_RE.fullmatch(prompt)
    if match is None or not OBJECTS.startswith(match.group(1)) or len(match.group(1)) < MIN_OBJECTS:
        raise ValueError(f"not a toy logic prompt: {prompt!r}")
    objects = match.group(1)
    constraints = []
    for part in match.group(2).split(","):
        a, kind, b = part[0], part[1], part[2]
        constraints.append((a, kind, int(b) if kind == "=" else b))
    if any(x not in objects for c in constraints for x in (c[0], c[2]) if isinstance(x, str)):
        raise ValueError(f"toy logic prompt {prompt!r} names an object outside {objects}")
    if any(kind == "=" and b > len(objects) for _, kind, b in constraints):
        raise ValueError(f"toy logic prompt {prompt!r} has a position beyond {len(objects)}")
    solutions = _solutions(objects, constraints)
    if len(solutions) != 1:
        raise ValueError(f"toy logic prompt {prompt!r} has {len(solutions)} solutions, not one")
    order = np.argsort(_positions(len(objects))[solutions[0]])
    return LogicProblem(objects, tuple(constraints), tuple(objects[i] for i in order))
