"""First and second places per model size over the main table's TTB and BSF columns.

The paper counts, over its 18 metrics per model size (3 domains × TTB/BSF × 25/50/100%), how often BOTS ranks first
and second: 1.5B 8 first and 9 second, 7B 6 first and 8 second (a verbatim excerpt quoted by a secondary survey;
another note says 10 and 6 for 1.5B, so a version difference is possible). :func:`place_counts` makes the same count
for every row of a computed main table.

Ranking rules (the paper does not state them; these reproduce the ties visible in its table): each metric ranks the
rows on the cell mean rounded to the table's digits, lower first for TTB and higher first for BSF; a cell whose
target was never reached (``—``, or an infinite TTB) ranks last; tied rows share the place and the next place is
skipped (1, 1, 3). A metric counts when at least two rows have a cell in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from analysis import render
from analysis.table_model import Table, display

__all__ = ["PAPER_COUNTS", "Places", "place_counts", "rank", "to_grid"]

#: The paper's counts for BOTS per model size ([ZH] survey excerpt; see the module docstring).
PAPER_COUNTS = {"1.5B": (8, 9), "7B": (6, 8)}
RANKED_KINDS = {"ttb": False, "bsf": True}  # kind -> higher is better


def rank(values: dict[str, float], higher_is_better: bool, digits: int) -> dict[str, int]:
    """Competition ranks (1, 1, 3, ...) of ``values`` rounded to ``digits``; NaN ranks last."""

    def score(v: float) -> float:
        if math.isnan(v):
            return math.inf
        v = round(v, digits) if math.isfinite(v) else v
        return -v if higher_is_better else v

    scores = {k: score(v) for k, v in values.items()}
    return {k: 1 + sum(other < s for other in scores.values()) for k, s in scores.items()}


@dataclass
class Places:
    """Per model and row: first places, second places, and how many metrics were ranked."""

    models: list[str]
    rows: dict[str, list[str]]
    first: dict[tuple[str, str], int] = field(default_factory=dict)
    second: dict[tuple[str, str], int] = field(default_factory=dict)
    metrics: dict[str, int] = field(default_factory=dict)
    digits: int = 2


def place_counts(table: Table, digits: int = 2) -> Places:
    """Count first and second places of every row over the TTB and BSF columns of ``table``, per model."""
    out = Places(list(table.models), {m: table.rows_of(m) for m in table.models}, digits=digits)
    for model in table.models:
        out.metrics[model] = 0
        for row in out.rows[model]:
            out.first[(model, row)] = out.second[(model, row)] = 0
        for domain in table.domains:
            for col in table.columns[domain]:
                if col.kind not in RANKED_KINDS:
                    continue
                values = {
                    row: table.cells[(model, row, domain, col.key)].mean
                    for row in out.rows[model]
                    if (model, row, domain, col.key) in table.cells
                }
                if len(values) < 2:
                    continue
                out.metrics[model] += 1
                for row, place in rank(values, RANKED_KINDS[col.kind], digits).items():
                    if place == 1:
                        out.first[(model, row)] += 1
                    elif place == 2:
                        out.second[(model, row)] += 1
    return out


def to_grid(places: Places) -> render.Grid:
    """The counts as a grid: Model, Method, 1st, 2nd, metrics ranked."""
    rows = [
        [
            model,
            display(row),
            str(places.first[(model, row)]),
            str(places.second[(model, row)]),
            str(places.metrics[model]),
        ]
        for model in places.models
        for row in places.rows[model]
    ]
    paper = "; ".join(f"{size}: {a} first, {b} second" for size, (a, b) in PAPER_COUNTS.items())
    caption = [
        f"Places over the TTB and BSF columns (up to 18 per model: 3 domains x 2 metrics x 25/50/100%), ranked on the "
        f"mean rounded to {places.digits} digits; ties share the place (1, 1, 3); never reached ranks last.",
        f"The paper reports for BOTS {paper} (secondary source).",
    ]
    return render.Grid("First and second places", ["Model", "Method", "1st", "2nd", "metrics"], rows, caption, lead=2)
