"""What the oracle shows BOTS is missing (issue 38, item 4): figures over paired seeds from the toy's run logs.

``python -m analysis.gap <runs dir>`` reads the run logs of a toy benchmark (``<runs>/<arm>_s<seed>/run``, or a
benchmark root holding ``runs/``) for BOTS (``--arm``, default ``bots``) and the ``oracle`` (Random too, when present)
and answers three questions with the mean [95% t interval] over the seeds that have both arms:

(a) **Which tasks the oracle picks that BOTS does not.** The oracle logs its picks' true pass rates
    (``bots/oracle/selected_pass_rate``) and the widest distance from p* among them (``selected_gap_max``); BOTS logs
    its Thompson draws of the picked tasks (``selection/sampled_p_mean``) and the rates the batch then showed
    (``observed_p_mean``). Breadth: distinct tasks trained by the last step, and the share of each step's tasks
    trained for the first time.
(b) **How fast BOTS's posterior tracks the policy's true pass rates.** The BOTS runs log no per-task truth; what they
    carry is the pool-mean truth of the run's *own* policy every evaluation (``train-pool/toy__arith/acc/exact``, from
    the saved checkpoints), against the posterior's pool-mean (``posterior/mean_avg``) at the same step, and the
    implicit plug-in's prediction against the observed batch rates (``estimator/pearson``, ``auc``,
    ``implicit/batch_mae``). The oracle's truth is another policy's (it trains otherwise), so it is not used as a
    proxy for BOTS's per-task rates.
(c) **Where BOTS's all-wrong and all-right groups come from.** With the batch-composition logging (``bots/batch/
    degenerate_first_frac`` / ``degenerate_revisit_frac``, ``all_wrong_frac`` / ``all_right_frac``, logged since
    issue 38) it is read off directly. Runs from before it get an estimate: per step, the degenerate share
    ``1 - ETR`` regressed on the share of the step's tasks that were trained for the first time (from
    ``bots/tasks_ever_selected``), ``1 - ETR = d_first f + d_revisit (1 - f)``, least squares over the run's steps.

What it cannot answer from these logs, and what would need logging: the pool's cells (digits, operation) of the
picked tasks, the recency of each revisit, and per-task posterior-vs-truth errors need a per-step record of the
selected indices (and the posterior's mean of each) plus the run's own exact pool pass rates at the evaluated steps.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.cli_checks import out_file_problem
from bots_verl import runlog
from bots_verl.core.selection_metrics import Interval, interval
from bots_verl.fileio import markdown_table
from bots_verl.runlog import (
    ALL_RIGHT_METRIC,
    ALL_WRONG_METRIC,
    AUC_METRIC,
    BIAS_METRIC,
    DEGENERATE_FIRST_METRIC,
    DEGENERATE_REVISIT_METRIC,
    ETR_METRIC,
    EVER_SELECTED_METRIC,
    FIRST_VISIT_METRIC,
    IMPLICIT_MAE_METRIC,
    ORACLE_GAP_MAX_METRIC,
    ORACLE_SELECTED_PASS_METRIC,
    PEARSON_METRIC,
    POSTERIOR_ESS_METRIC,
    POSTERIOR_MEAN_MAE_METRIC,
    POSTERIOR_MEAN_METRIC,
    SAMPLED_P_METRIC,
    SUCCESS_METRIC,
    TOY_POOL_METRIC,
)

logger = logging.getLogger(__name__)

__all__ = ["GapReport", "RunSeries", "gap_report", "load_series", "main", "render"]

_RUN_DIR = re.compile(r"^(?P<arm>.+)_s(?P<seed>\d+)$")
#: the steps that count as the start of training in the phase split
EARLY_STEPS = 10


@dataclass
class RunSeries:
    """One run's per-step metrics, lines of one step merged (verl logs training and evaluation separately)."""

    arm: str
    seed: int
    steps: np.ndarray
    data: dict[int, dict[str, Any]]

    def series(self, key: str, steps: Sequence[int] | None = None) -> np.ndarray:
        """The metric at each training step (or at ``steps``), NaN where it was not logged."""
        at = self.steps if steps is None else steps
        return np.array([_number(self.data.get(int(s), {}).get(key)) for s in at], dtype=np.float64)

    def logged_steps(self, key: str) -> list[int]:
        """The steps at which ``key`` has a finite value."""
        return [s for s in sorted(self.data) if math.isfinite(_number(self.data[s].get(key)))]


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def load_series(run_dir: str | Path, arm: str, seed: int) -> RunSeries:
    """Read one run log; the training steps are those that logged :data:`~bots_verl.runlog.ETR_METRIC`.

    Raises:
        ValueError: no metrics file, a malformed line (:func:`bots_verl.runlog.iter_metrics`), or no training step.
    """
    merged = runlog.metrics_by_step(run_dir)
    steps = np.array(sorted(s for s, d in merged.items() if math.isfinite(_number(d.get(ETR_METRIC)))), dtype=np.int64)
    if steps.size == 0:
        raise ValueError(f"{run_dir}: no step logged {ETR_METRIC}; not a training run log")
    return RunSeries(arm, seed, steps, merged)


def find_runs(root: str | Path) -> dict[str, dict[int, Path]]:
    """``{arm: {seed: run log dir}}`` under ``root`` (``<arm>_s<seed>/run``; ``root/runs`` is searched if present)."""
    base = Path(root)
    if (base / "runs").is_dir():
        base = base / "runs"
    if not base.is_dir():
        raise ValueError(f"{root}: not a directory")
    found: dict[str, dict[int, Path]] = {}
    for path in sorted(base.iterdir()):
        match = _RUN_DIR.match(path.name)
        if match and (path / "run" / runlog.METRICS_FILE).is_file():
            found.setdefault(match["arm"], {})[int(match["seed"])] = path / "run"
    return found


def degenerate_split(run: RunSeries) -> tuple[float, float]:
    """``(d_first, d_revisit)``: the degenerate share among first visits and among revisits.

    Read from the batch-composition metrics when the run logged them (means over the steps that had each kind);
    otherwise estimated by least squares of ``1 - ETR`` on the share of first visits per step (module docstring).
    NaN where the run gives no handle on one of them.
    """
    first = run.series(DEGENERATE_FIRST_METRIC)
    revisit = run.series(DEGENERATE_REVISIT_METRIC)
    if np.isfinite(first).any() or np.isfinite(revisit).any():
        return _nanmean(first), _nanmean(revisit)
    ever = run.series(EVER_SELECTED_METRIC)
    batch = _batch_size(run)
    new = np.diff(np.concatenate([[0.0], ever])) / batch
    degenerate = 1.0 - run.series(ETR_METRIC)
    ok = np.isfinite(new) & np.isfinite(degenerate)
    design = np.column_stack([new[ok], 1.0 - new[ok]])
    if ok.sum() < 3 or np.linalg.matrix_rank(design) < 2:
        return math.nan, math.nan
    coef = np.linalg.lstsq(design, degenerate[ok], rcond=None)[0]
    return float(coef[0]), float(coef[1])


def _batch_size(run: RunSeries) -> float:
    """Tasks per step: the first step's distinct tasks (every task is new at step 1)."""
    first = run.series(EVER_SELECTED_METRIC)[0]
    if not math.isfinite(first) or first <= 0:
        raise ValueError(
            f"{run.arm}_s{run.seed}: {EVER_SELECTED_METRIC} at the first step is {first}, not a batch size"
        )
    return float(first)


def _nanmean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else math.nan


def _phase(run: RunSeries, key: str, phase: str) -> float:
    x = run.series(key)
    if phase == "early":
        x = x[run.steps <= EARLY_STEPS]
    elif phase == "late":
        x = x[run.steps > EARLY_STEPS]
    return _nanmean(x)


def _first_visit_share(run: RunSeries, late: bool = False) -> float:
    logged = run.series(FIRST_VISIT_METRIC)
    if np.isfinite(logged).any():
        x = logged
    else:
        x = np.diff(np.concatenate([[0.0], run.series(EVER_SELECTED_METRIC)])) / _batch_size(run)
    return _nanmean(x[run.steps > EARLY_STEPS] if late else x)


def _tracking_error(run: RunSeries) -> float:
    """Mean |posterior pool-mean − the run's exact pool pass rate| at the evaluated steps (step 0 left out)."""
    steps = [s for s in run.logged_steps(TOY_POOL_METRIC) if s > 0]
    post = run.series(POSTERIOR_MEAN_METRIC, steps)
    truth = run.series(TOY_POOL_METRIC, steps)
    return _nanmean(np.abs(post - truth))


def _pool_truth_change(run: RunSeries) -> float:
    steps = run.logged_steps(TOY_POOL_METRIC)
    if len(steps) < 2:
        return math.nan
    values = run.series(TOY_POOL_METRIC, steps)
    return float(values[-1] - values[0])


#: (section, row label, arm role, per-run statistic)
Row = tuple[str, str, str, Callable[[RunSeries], float]]
ROWS: list[Row] = [
    ("a", "ETR, all steps", "both", lambda r: _phase(r, ETR_METRIC, "all")),
    ("a", f"ETR, steps 1-{EARLY_STEPS}", "both", lambda r: _phase(r, ETR_METRIC, "early")),
    ("a", f"ETR, steps {EARLY_STEPS + 1}-end", "both", lambda r: _phase(r, ETR_METRIC, "late")),
    ("a", "batch success rate (observed)", "both", lambda r: _phase(r, SUCCESS_METRIC, "all")),
    (
        "a",
        "oracle: true pass rate of its picks",
        "oracle",
        lambda r: _phase(r, ORACLE_SELECTED_PASS_METRIC, "all"),
    ),
    (
        "a",
        "oracle: widest |p - p*| among its picks",
        "oracle",
        lambda r: _phase(r, ORACLE_GAP_MAX_METRIC, "all"),
    ),
    ("a", "BOTS: Thompson draw of its picks", "arm", lambda r: _phase(r, SAMPLED_P_METRIC, "all")),
    ("a", "BOTS: draw minus observed rate", "arm", lambda r: _phase(r, BIAS_METRIC, "all")),
    ("a", "distinct tasks trained by the last step", "both", lambda r: r.series(EVER_SELECTED_METRIC)[-1]),
    ("a", "share of a step's tasks never trained before", "both", _first_visit_share),
    (
        "a",
        f"the same, steps {EARLY_STEPS + 1}-end",
        "both",
        lambda r: _first_visit_share(r, late=True),
    ),
    ("b", "|posterior pool mean - own exact pool pass rate|", "arm", _tracking_error),
    ("b", "posterior pool mean, all steps", "arm", lambda r: _phase(r, POSTERIOR_MEAN_METRIC, "all")),
    ("b", "own exact pool pass rate, last minus first evaluation", "both", _pool_truth_change),
    ("b", "implicit prediction vs batch rates: Pearson r", "arm", lambda r: _phase(r, PEARSON_METRIC, "all")),
    (
        "b",
        "implicit prediction vs batch rates: AUC (rate >= 0.5)",
        "arm",
        lambda r: _phase(r, AUC_METRIC, "all"),
    ),
    ("b", "implicit prediction vs batch rates: MAE", "arm", lambda r: _phase(r, IMPLICIT_MAE_METRIC, "all")),
    (
        "b",
        "posterior mean vs batch rates before the update: MAE",
        "arm",
        lambda r: _phase(r, POSTERIOR_MEAN_MAE_METRIC, "all"),
    ),
    (
        "b",
        "posterior ESS of the batch before the update",
        "arm",
        lambda r: _phase(r, POSTERIOR_ESS_METRIC, "all"),
    ),
    ("c", "degenerate share among first visits", "both", lambda r: degenerate_split(r)[0]),
    ("c", "degenerate share among revisits", "both", lambda r: degenerate_split(r)[1]),
    ("c", "all-wrong share of groups", "both", lambda r: _phase(r, ALL_WRONG_METRIC, "all")),
    ("c", "all-right share of groups", "both", lambda r: _phase(r, ALL_RIGHT_METRIC, "all")),
]

SECTIONS = {
    "a": "(a) What the oracle picks that BOTS does not",
    "b": "(b) How closely BOTS's posterior tracks the policy",
    "c": "(c) Where BOTS's all-wrong and all-right groups come from",
}


@dataclass
class GapReport:
    """Per row: ``{arm: (Interval over seeds, per-seed values)}``; the seeds paired and the arms compared."""

    arm: str
    seeds: list[int]
    arms: list[str]
    rows: list[tuple[str, str, dict[str, tuple[Interval, list[float]]]]]
    split_source: dict[str, str]


def gap_report(root: str | Path, arm: str = "bots", oracle: str = "oracle", baseline: str = "random") -> GapReport:
    """Load ``arm``, ``oracle`` (and ``baseline`` where present) on their shared seeds and compute every row.

    Raises:
        ValueError: when ``arm`` and ``oracle`` share no seed, or a run log is unreadable.
    """
    found = find_runs(root)
    for name in (arm, oracle):
        if name not in found:
            raise ValueError(f"{root}: no run logs of {name!r} (found arms {sorted(found)})")
    seeds = sorted(set(found[arm]) & set(found[oracle]))
    if not seeds:
        raise ValueError(f"{root}: {arm!r} and {oracle!r} share no seed")
    arms = [arm, oracle] + ([baseline] if baseline in found and set(seeds) <= set(found[baseline]) else [])
    runs = {a: [load_series(found[a][s], a, s) for s in seeds] for a in arms}
    rows = []
    for section, label, role, stat in ROWS:
        cells: dict[str, tuple[Interval, list[float]]] = {}
        for a in arms:
            if role == "oracle" and a != oracle or role == "arm" and a != arm:
                continue
            values = [stat(r) for r in runs[a]]
            if np.isfinite(values).any():
                cells[a] = (interval(values), values)
        if cells:
            rows.append((section, label, cells))
    split_source = {
        a: "logged" if np.isfinite(runs[a][0].series(DEGENERATE_FIRST_METRIC)).any() else "regression" for a in arms
    }
    return GapReport(arm, seeds, arms, rows, split_source)


def render(report: GapReport, command: str = "") -> str:
    """The report as markdown: one table per question, a column per arm, ``mean [95% t interval]`` over seeds."""
    lines = [
        f"# The gap to the oracle: {report.arm} against the oracle, {len(report.seeds)} paired seeds "
        f"({', '.join(map(str, report.seeds))})",
        "",
    ]
    if command:
        lines += [f"`{command}`", ""]
    lines += ["Cells: mean [95% t interval over seeds] (per seed in brackets); — where the arm does not log it.", ""]
    for section, title in SECTIONS.items():
        rows = [r for r in report.rows if r[0] == section]
        if not rows:
            continue
        body = []
        for _, label, cells in rows:
            row = [label]
            for a in report.arms:
                if a in cells:
                    iv, values = cells[a]
                    row.append(f"{iv.format(2)} ({', '.join(f'{v:.2f}' for v in values)})")
                else:
                    row.append("—")
            body.append(row)
        lines += [f"## {title}", "", markdown_table(["", *report.arms], body), ""]
        if section == "c":
            how = ", ".join(f"{a}: {s}" for a, s in report.split_source.items())
            lines += [
                f"First-visit / revisit split ({how}): `regression` is the least-squares estimate from ETR and "
                "`tasks_ever_selected` (module docstring of `analysis/gap.py`); `logged` reads the batch-composition "
                "metrics.",
                "",
            ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m analysis.gap <runs dir> [--arm bots] [--out gap.md]``: the report on stdout (and in ``--out``)."""
    parser = argparse.ArgumentParser(prog="python -m analysis.gap", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", help="a toy benchmark's runs/ (or its root): <arm>_s<seed>/run run logs")
    parser.add_argument("--arm", default="bots", help="the selector compared with the oracle")
    parser.add_argument("--oracle", default="oracle")
    parser.add_argument("--baseline", default="random", help="shown beside them where its runs exist")
    parser.add_argument("--out", help="also write the markdown here")
    args = parser.parse_args(argv)
    problem = out_file_problem(args.out)
    if problem:
        parser.error(problem)
    try:
        report = gap_report(args.runs, args.arm, args.oracle, args.baseline)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = render(report, "python -m analysis.gap " + " ".join(sys.argv[1:] if argv is None else argv))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
