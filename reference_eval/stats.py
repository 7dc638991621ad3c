"""``stats``: what to look at before trusting a pass-rate column.

Per column: count, NaN count, mean, spread, quantiles, the share of exact 0 and 1 (tasks the reference never or
always solves carry little information for the interpolation), and a histogram PNG. Values that are not pass rates
(outside [0, 1], or infinite) are counted as ``out_of_range``, left out of the statistics and reported with a
warning naming the file, the column and the first rows (``warnings`` in the result, ``WARNING`` lines in the text).
Across columns given in weak → strong order: Pearson and Spearman correlation and, for each pair, the number of rows
where the weaker reference scores higher than the stronger one (some are sampling noise; many mean the order or a
column is wrong).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .data import DataError, read_table

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["column_summary", "compute_stats", "format_stats"]


def _grid(values: np.ndarray, max_n: int = 128) -> int | None:
    """The smallest n with every value a multiple of 1/n (pass rates of n samples), or None."""
    for n in range(1, max_n + 1):
        scaled = values * n
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-9):
            return n
    return None


def column_summary(values: np.ndarray) -> dict[str, Any]:
    """Summarise one pass-rate column.

    Args:
        values: Float values, NaN for missing.

    Returns:
        A JSON-ready dict (``None`` where a statistic is undefined because no value is present).
    """
    present = values[~np.isnan(values)]
    bad = (present < 0) | (present > 1)  # infinities included
    ok = present[~bad]  # the statistics are of pass rates only: one 1.7 or inf would bend (or break) every one
    out: dict[str, Any] = {"rows": int(values.size), "nan": int(values.size - present.size)}
    if ok.size == 0:
        out.update({k: None for k in ("mean", "std", "min", "q25", "median", "q75", "max", "share_0", "share_1")})
        out["grid_n"] = None
        out["out_of_range"] = int(bad.sum())
        return out
    q = np.quantile(ok, [0.25, 0.5, 0.75])
    out.update(
        mean=float(ok.mean()),
        std=float(ok.std()),
        min=float(ok.min()),
        q25=float(q[0]),
        median=float(q[1]),
        q75=float(q[2]),
        max=float(ok.max()),
        share_0=float(np.mean(ok == 0.0)),
        share_1=float(np.mean(ok == 1.0)),
        grid_n=_grid(ok),
        out_of_range=int(bad.sum()),
    )
    return out


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _plot_hist(name: str, values: np.ndarray, summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = values[~np.isnan(values)]
    n = summary.get("grid_n")
    # On a k/n grid, one bar per k; otherwise 20 equal bins.
    bins = np.arange(n + 2) / n - 0.5 / n if n else np.linspace(0.0, 1.0, 21)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(ok, bins=bins, color="tab:blue", edgecolor="white")
    ax.set_xlabel(name)
    ax.set_ylabel("rows")
    mean = float("nan") if summary["mean"] is None else summary["mean"]  # `or` would print a mean of 0.0 as nan
    ax.set_title(f"{name}: {ok.size} values, {summary['nan']} NaN, mean {mean:.3f}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_pair(weak: str, strong: str, frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    both = frame[[weak, strong]].dropna()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    # Pass rates sit on a grid; a little jitter shows how many rows share each point.
    rng = np.random.default_rng(0)
    jitter = rng.uniform(-0.01, 0.01, size=(len(both), 2))
    ax.scatter(both[weak] + jitter[:, 0], both[strong] + jitter[:, 1], s=6, alpha=0.4)
    ax.plot([0, 1], [0, 1], color="grey", linewidth=1)
    ax.set_xlabel(f"{weak} (weak)")
    ax.set_ylabel(f"{strong} (strong)")
    ax.set_title("rows below the diagonal: weak > strong", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def compute_stats(
    data_path: str | os.PathLike, columns: list[str], out_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Summaries, correlations and weak > strong counts; optionally PNGs and ``stats.json`` in ``out_dir``.

    Args:
        data_path: The parquet.
        columns: Pass-rate columns, weakest reference first.
        out_dir: Where to write ``hist_<column>.png``, ``pair_<weak>__<strong>.png`` and ``stats.json``.

    Returns:
        ``{"file", "rows", "columns": {name: summary}, "pearson", "spearman", "pairs": [...], "plots": [...]}``.

    Raises:
        DataError: If a column is missing, not numeric or given twice.
    """
    if not columns:
        raise DataError("give at least one column")
    for i, name in enumerate(columns):
        # A repeated name makes pandas return a frame where a column is expected, deep in the pair statistics.
        if name in columns[:i]:
            raise DataError(f"column {name!r} is given more than once; give each column once")
    table = read_table(data_path)
    frame = {}
    for name in columns:
        if name not in table.column_names:
            raise DataError(f"column {name!r} not found; the file has {table.column_names}")
        col = table.column(name)
        try:
            frame[name] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DataError(f"column {name!r} is not numeric ({col.type})") from err
    df = pd.DataFrame(frame)
    result: dict[str, Any] = {
        "file": str(data_path),
        "rows": table.num_rows,
        "columns": {},
        "pairs": [],
        "plots": [],
        "warnings": [],
    }
    for name in columns:
        values = df[name].to_numpy()
        result["columns"][name] = column_summary(values)
        rows = np.flatnonzero(~np.isnan(values) & ((values < 0) | (values > 1)))
        if rows.size:
            shown = ", ".join(f"row {int(r)}: {values[r]:g}" for r in rows[:5])
            warning = (
                f"{data_path}: column {name!r} has {rows.size} values that are not pass rates in [0, 1] ({shown}"
                f"{', ...' if rows.size > 5 else ''}); they are left out of its statistics. Was the column computed "
                "from counts of another file, or is it not a pass rate?"
            )
            logger.warning("%s", warning)
            result["warnings"].append(warning)
    # correlations and pairs over the pass rates only, as the summaries
    df = df.where((df >= 0) & (df <= 1))

    def corr(method: str) -> dict[str, dict[str, float | None]]:
        c = df.corr(method=method) if len(columns) > 1 else pd.DataFrame()
        return {a: {b: (None if math.isnan(v) else float(v)) for b, v in row.items()} for a, row in c.iterrows()}

    result["pearson"] = corr("pearson")
    result["spearman"] = corr("spearman")
    for i, weak in enumerate(columns):
        for strong in columns[i + 1 :]:
            both = df[[weak, strong]].dropna()
            result["pairs"].append(
                {
                    "weak": weak,
                    "strong": strong,
                    "rows_both": len(both),
                    "weak_gt_strong": int((both[weak] > both[strong]).sum()),
                    "equal": int((both[weak] == both[strong]).sum()),
                    "mean_gap": float((both[strong] - both[weak]).mean()) if len(both) else None,
                }
            )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name in columns:
            path = out / f"hist_{_safe_name(name)}.png"
            _plot_hist(name, df[name].to_numpy(), result["columns"][name], path)
            result["plots"].append(str(path))
        for weak, strong in zip(columns, columns[1:], strict=False):
            path = out / f"pair_{_safe_name(weak)}__{_safe_name(strong)}.png"
            _plot_pair(weak, strong, df, path)
            result["plots"].append(str(path))
        (out / "stats.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def format_stats(result: dict[str, Any]) -> str:
    """A plain-text table of :func:`compute_stats` output for the terminal."""

    def f(v: Any) -> str:
        return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))

    lines = [f"{result['file']}: {result['rows']} rows"]
    lines += [f"WARNING: {w}" for w in result.get("warnings", [])]
    keys = ("nan", "mean", "std", "min", "median", "max", "share_0", "share_1", "grid_n")
    width = max(len(c) for c in result["columns"]) + 2
    lines.append("column".ljust(width) + "".join(k.rjust(9) for k in keys))
    for name, s in result["columns"].items():
        lines.append(name.ljust(width) + "".join(f(s[k]).rjust(9) for k in keys))
    for p in result["pairs"]:
        lines.append(
            f"{p['weak']} > {p['strong']}: {p['weak_gt_strong']} of {p['rows_both']} rows "
            f"(equal {p['equal']}, mean gap strong - weak {f(p['mean_gap'])})"
        )
        pe = result["pearson"].get(p["weak"], {}).get(p["strong"])
        sp = result["spearman"].get(p["weak"], {}).get(p["strong"])
        lines.append(f"  correlation: pearson {f(pe)}, spearman {f(sp)}")
    for path in result["plots"]:
        lines.append(f"wrote {path}")
    return "\n".join(lines)
