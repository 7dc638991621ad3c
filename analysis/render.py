"""Render a grid of strings (header, rows, caption) as GitHub markdown or a booktabs LaTeX table.

The paper's tables (:mod:`analysis.paper_tables`), the place counts (:mod:`analysis.places`) and the overhead table
(:mod:`analysis.overhead`) all end up as such a grid; this module is the one place that formats them.
"""

from __future__ import annotations

from collections.abc import Sequence

from bots_verl.fileio import markdown_table

__all__ = ["Grid", "tex", "to_latex", "to_markdown"]

_LATEX_SUBS = [
    ("\\", r"\textbackslash{}"),
    ("&", r"\&"),
    ("%", r"\%"),
    ("#", r"\#"),
    ("_", r"\_"),
    ("—", "---"),
    ("→", r"$\rightarrow$"),
    ("·", r"$\cdot$"),
    ("ρ", r"$\rho$"),
    ("λ", r"$\lambda$"),
    ("↓", r"$\downarrow$"),
    ("↑", r"$\uparrow$"),
]


def tex(text: str) -> str:
    """Escape LaTeX specials and map the symbols the tables use (ρ, λ, arrows, —) to LaTeX."""
    for old, new in _LATEX_SUBS:
        text = text.replace(old, new)
    return text


class Grid:
    """A rendered table before formatting.

    Args:
        title: shown above (markdown) or in the caption (LaTeX).
        header: column headers.
        rows: one list of cell strings per row, as long as ``header``.
        caption: lines shown below the table.
        groups: optional ``(label, width)`` spans over the columns after the first ``lead`` ones (a second header
            line in LaTeX, e.g. one span per domain).
        lead: how many leading columns the spans skip (row labels).
    """

    def __init__(
        self,
        title: str,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        caption: Sequence[str] = (),
        groups: Sequence[tuple[str, int]] = (),
        lead: int = 1,
    ) -> None:
        widths = {len(r) for r in rows}
        if widths - {len(header)}:
            raise ValueError(f"rows must have {len(header)} cells, got widths {sorted(widths)}")
        self.title, self.header, self.rows = title, list(header), [list(r) for r in rows]
        self.caption, self.groups, self.lead = list(caption), list(groups), lead


def to_markdown(grid: Grid) -> str:
    """GitHub markdown: the title in bold, the table, then the caption lines."""
    lines = [f"**{grid.title}**", "", markdown_table(grid.header, grid.rows), ""]
    lines.extend(grid.caption)
    return "\n".join(lines) + "\n"


def to_latex(grid: Grid) -> str:
    """A booktabs ``tabular`` inside a ``table`` with the title and caption lines as its caption."""
    out = [
        r"\begin{table}[t]",
        r"\centering",
        r"\scriptsize",
        r"\begin{tabular}{" + "l" * grid.lead + "c" * (len(grid.header) - grid.lead) + "}",
        r"\toprule",
    ]
    if grid.groups:
        out.append(
            " & " * grid.lead
            + " & ".join(rf"\multicolumn{{{w}}}{{c}}{{{tex(label)}}}" for label, w in grid.groups)
            + r" \\"
        )
        start, rules = grid.lead + 1, []
        for _, w in grid.groups:
            rules.append(rf"\cmidrule(lr){{{start}-{start + w - 1}}}")
            start += w
        out.append(" ".join(rules))
    out.append(" & ".join(tex(h) for h in grid.header) + r" \\")
    out.append(r"\midrule")
    out += [" & ".join(tex(c) for c in row) + r" \\" for row in grid.rows]
    out += [r"\bottomrule", r"\end{tabular}"]
    out.append(r"\caption{" + tex(" ".join([grid.title + ".", *grid.caption])) + "}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"
