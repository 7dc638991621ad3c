"""The paper's own main-table figures, stated once: what :mod:`analysis.table1` prints beside ours.

Only the columns below were found, for Qwen2.5-1.5B-Instruct, normalised to Random = 1.00. Their source is a
**secondary, unverified transcription**: an AI-generated note on the paper (arXiv 2510.26374) whose tables look
transcribed, cited as [NOTE] in the project's research notes on the paper (section 4.2); they were not checked against
the paper, and one of them (math TTB(100%) of BOTS, 0.72) disagrees with a quoted excerpt of the paper (0.64).
No 7B figures were found. Keys: the method labels of :data:`bots_verl.runlog.PAPER_METHODS`, the recipes' domains and
the column keys of :func:`analysis.paper_tables.main_columns`.
"""

from __future__ import annotations

from bots_verl.runlog import PAPER_METHODS

__all__ = ["PAPER_MAIN_1_5B", "PAPER_MODEL", "PAPER_SOURCE"]

PAPER_MODEL = "Qwen2.5-1.5B-Instruct"
PAPER_SOURCE = (
    "secondary, unverified transcription of the paper's main table (an AI-generated note on arXiv 2510.26374, [NOTE] "
    "in the project's research notes, section 4.2); not checked against the paper"
)

# the paper's row order, as the transcription lists them
_METHODS = tuple(m.label for m in PAPER_METHODS)


def _rows(**columns: tuple[float, ...]) -> dict[str, dict[str, float]]:
    """``{column key: {method label: value}}`` from one tuple per column, in :data:`_METHODS`' order."""
    return {key: dict(zip(_METHODS, values, strict=True)) for key, values in columns.items()}


#: domain -> column key -> method label -> the paper's figure (Qwen2.5-1.5B-Instruct; :data:`PAPER_SOURCE`)
PAPER_MAIN_1_5B: dict[str, dict[str, dict[str, float]]] = {
    "math": _rows(
        TTB50=(1.00, 0.77, 1.02, 0.70, 0.85),
        TTB100=(1.00, 0.85, 0.89, 0.73, 0.72),
        BSF25=(1.00, 1.09, 0.98, 1.08, 1.06),
    ),
    "code": _rows(TTB50=(1.00, 0.68, 0.78, 0.67, 0.58), BSF25=(1.00, 1.09, 1.09, 1.17, 1.17)),
    "logic": _rows(TTB50=(1.00, 1.23, 0.87, 0.66, 0.85), BSF25=(1.00, 0.67, 1.13, 1.28, 1.19)),
}
