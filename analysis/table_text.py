"""The paper's tables (:mod:`analysis.paper_tables`) as a grid, markdown or LaTeX, with their caption."""

from __future__ import annotations

from analysis import render
from analysis.table_model import BASELINE, Table, display

__all__ = ["to_grid", "to_latex", "to_markdown"]


def _caption(table: Table) -> list[str]:
    ttb = (
        "TTB: steps to Random's best within x% of the budget over Random's own steps to it (Random = 1)"
        if table.ttb_denominator == "baseline"
        else "TTB: steps to Random's best within x% of the budget over x% of the budget"
    )
    lines = [
        f"Mean [{table.level:.0%} interval] over seeds. TTB, BSF, Roll and Time are relative to {BASELINE} "
        "with the same seed; ETR is absolute. — = target never reached; (k/n —) = k of n seeds never reached it. "
        + ttb
        + ". A method that ran fewer steps than Random is scored against Random's budget and target: — also where it "
        "stopped before reaching it, and for a BSF horizon past its last step."
    ]
    for domain in table.domains:
        for model in table.models:
            counts = ", ".join(
                f"{display(row)} {len(table.seeds[(model, row, domain)])}"
                for row in table.rows
                if (model, row, domain) in table.seeds
            )
            if counts:
                prefix = f"{domain}" + (f" ({model})" if len(table.models) > 1 else "")
                lines.append(f"{prefix}: accuracy = {table.accuracy.get(domain, '?')}; seeds: {counts}.")
    return lines


def to_grid(table: Table, digits: int = 2) -> render.Grid:
    """The table as a :class:`analysis.render.Grid` (a ``Model`` column is added when it holds several models)."""
    several = len(table.models) > 1
    lead = ["Model", table.row_header] if several else [table.row_header]
    header = lead + [f"{d} {c.header}" for d in table.domains for c in table.columns[d]]
    rows = []
    for model in table.models:
        for row in table.rows_of(model):
            cells = []
            for d in table.domains:
                for c in table.columns[d]:
                    cell = table.cells.get((model, row, d, c.key))
                    cells.append("n/a" if cell is None else cell.format(digits))
            rows.append(([model] if several else []) + [display(row), *cells])
    groups = [(d, len(table.columns[d])) for d in table.domains]
    return render.Grid(table.title, header, rows, _caption(table), groups, lead=len(lead))


def to_markdown(table: Table, digits: int = 2) -> str:
    """Render as a GitHub markdown table with a caption below."""
    return render.to_markdown(to_grid(table, digits))


def to_latex(table: Table, digits: int = 2) -> str:
    """Render as a booktabs ``tabular`` (one ``\\multicolumn`` per domain) inside a ``table`` with a caption."""
    grid = to_grid(table, digits)
    # the LaTeX header names the metric only; the domain is in the spanning line above it
    grid.header = grid.header[: grid.lead] + [c.header for d in table.domains for c in table.columns[d]]
    return render.to_latex(grid)
