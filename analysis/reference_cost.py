"""The reference generations each arm of a benchmark used, and saved against a full labelling (issue 36, item 3).

BOTS's implicit evidence reads reference columns: pass rates of reference models on the pool's tasks, estimated from
``samples`` sampled responses per task and model (``reference_eval collect -n``). Each response is one
**generation**, made before training starts. A full labelling costs ``tasks x samples x models`` of them; a labelled
subset (``reference_eval --label-fraction``, ``bots_partial_ref``) costs ``labelled x samples x models``; a selector
that reads no reference (``random``, ``bots_noref``, ...) costs none, whatever columns its config names. This module
reads those numbers from the run logs and puts them beside each arm's step and rollout savings, so that a user can
weigh them (:func:`reference_costs`, :func:`costs_to_markdown`).

What is read, per run log (``meta.json``, written by ``bots_verl.main``):

- ``extra.selector`` and ``extra.effective_hparams``: whether the run reads its reference columns
  (:meth:`bots_verl.core.selector_base.Selector.reads_reference`);
- ``extra.reference_columns``: the reference models it was given (one column each);
- ``extra.reference_coverage``: ``{"tasks": N, "labelled": L}``, the pool's tasks and those with every reference
  column finite (absent for a run given no reference column; then the pool size comes from another run of the same
  benchmark, or from the benchmark's ``data/manifest.json``).

What the run logs do not say, the samples per task and the models of a full labelling, comes from the benchmark's
data profile (:func:`toy_settings`: the toy's ``bots_verl.toy.build_profiles.BUILD_PROFILES[...].reference_n`` and its
``REFERENCE_COLUMNS``) or from the caller.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.loader import LoadError, Run
from bots_verl import runlog
from bots_verl.runlog import ROLLOUTS_METRIC

logger = logging.getLogger(__name__)

__all__ = [
    "ReferenceCost",
    "ReferenceSettings",
    "RunReference",
    "costs_to_dict",
    "costs_to_markdown",
    "reference_costs",
    "run_reference",
    "toy_settings",
]


@dataclass(frozen=True)
class ReferenceSettings:
    """What a reference column stands for.

    Attributes:
        samples: sampled responses per task and reference model behind each pass rate.
        models: reference models of a full labelling (what paper BOTS reads).
        source: where the two numbers were read, for the table's legend.
    """

    samples: int
    models: int
    source: str


@dataclass(frozen=True)
class RunReference:
    """What one run log says about its reference columns.

    Attributes:
        reads: whether the selector reads reference columns (None: a selector this build does not know).
        models: reference columns it was given.
        labelled: tasks with every reference column finite (None: not recorded).
        tasks: tasks in the pool (None: not recorded).
    """

    reads: bool | None
    models: int
    labelled: int | None
    tasks: int | None


def run_reference(run: Run) -> RunReference:
    """The reference columns of one run, from its ``meta.json`` (module docstring).

    Raises:
        LoadError: a ``reference_columns`` that is not a list, or a ``reference_coverage`` without integer ``tasks``
            and ``labelled`` (0 <= labelled <= tasks), naming the run.
    """
    from bots_verl.core import SELECTORS

    where = f"run {run.name()}: meta.json extra"
    columns = run.extra.get("reference_columns") or []
    if not isinstance(columns, list):
        raise LoadError(f"{where}.reference_columns is not a list: {columns!r:.80}")
    coverage = run.extra.get("reference_coverage")
    labelled = tasks = None
    if coverage is not None:
        try:
            if not isinstance(coverage, Mapping):
                raise ValueError(f"not an object: {coverage!r:.80}")
            tasks = runlog.parse_int(coverage.get("tasks"), "tasks")
            labelled = runlog.parse_int(coverage.get("labelled"), "labelled")
            if not 0 <= labelled <= tasks:
                raise ValueError(f"labelled {labelled} is not within [0, tasks = {tasks}]")
        except ValueError as exc:
            raise LoadError(f"{where}.reference_coverage: {exc}") from None
    try:
        reads: bool | None = SELECTORS.lookup(run.selector).reads_reference(run.flat_hparams)
    except ValueError:
        logger.warning("run %s: selector %r is unknown here; so is its reference use", run.name(), run.selector)
        reads = None
    return RunReference(reads, len(columns), labelled, tasks)


@dataclass
class ReferenceCost:
    """One arm's reference generations over its seeds, with a full labelling's, beside its training rollouts.

    Attributes:
        selector: the arm.
        seeds: the seeds whose run logs were read.
        runs: per seed, what its run log says.
        pool_tasks: per seed, the pool's tasks (the run's own coverage, else the benchmark's pool size; None unknown).
        settings: samples per task and models of a full labelling (None: unknown).
        rollouts: per seed, the rollouts the run spent training (the sum of ``bots/rollouts``; NaN if not logged).
    """

    selector: str
    seeds: list[int]
    runs: dict[int, RunReference]
    pool_tasks: dict[int, int | None]
    settings: ReferenceSettings | None
    rollouts: dict[int, float]

    def used(self, seed: int) -> int | None:
        """Generations the seed's run read: labelled x samples x its columns (0 if it reads none; None unknown)."""
        ref = self.runs[seed]
        if ref.reads is False or ref.models == 0:
            return 0
        if ref.reads is None or ref.labelled is None or self.settings is None:
            return None
        return ref.labelled * self.settings.samples * ref.models

    def full(self, seed: int) -> int | None:
        """Generations of a full labelling of the seed's pool: tasks x samples x models (None unknown)."""
        tasks = self.pool_tasks[seed]
        if tasks is None or self.settings is None:
            return None
        return tasks * self.settings.samples * self.settings.models

    def saved(self, seed: int) -> int | None:
        """Full labelling minus used (None unknown)."""
        used, full = self.used(seed), self.full(seed)
        return None if used is None or full is None else full - used


def _pool_size(runs: Sequence[RunReference], manifest: Path | None) -> int | None:
    """The benchmark's pool size: the one every run with a coverage records, else the prepare manifest's."""
    sizes = {r.tasks for r in runs if r.tasks is not None}
    if len(sizes) == 1:
        return sizes.pop()
    if len(sizes) > 1:
        logger.warning("runs record different pool sizes %s; a run without its own coverage gets none", sorted(sizes))
        return None
    if manifest is not None and manifest.is_file():
        try:
            return runlog.parse_int(json.loads(manifest.read_text())["data"]["pool_tasks"], "data.pool_tasks")
        except (OSError, KeyError, TypeError, ValueError) as exc:
            logger.warning("%s: no pool size there (%s)", manifest, exc)
    return None


def _training_rollouts(run: Run) -> float:
    return float(run.column(ROLLOUTS_METRIC).sum()) if run.has(ROLLOUTS_METRIC) else math.nan


def reference_costs(
    logs: Mapping[str, Mapping[int, Run]], settings: ReferenceSettings | None, manifest: Path | None = None
) -> list[ReferenceCost]:
    """Every arm's reference generations, seed by seed, from its run logs.

    Args:
        logs: arm -> seed -> run log (arms in table order).
        settings: samples per task and models of a full labelling (:func:`toy_settings`); None leaves the
            generation counts unknown (the table says so).
        manifest: the benchmark's prepare manifest (``data/manifest.json``), for the pool size when no run records
            a coverage.

    Raises:
        LoadError: as :func:`run_reference`.
    """
    refs = {arm: {seed: run_reference(run) for seed, run in runs.items()} for arm, runs in logs.items()}
    pool = _pool_size([r for by_seed in refs.values() for r in by_seed.values()], manifest)
    out = []
    for arm, by_seed in refs.items():
        seeds = sorted(by_seed)
        out.append(
            ReferenceCost(
                arm,
                seeds,
                by_seed,
                {s: by_seed[s].tasks if by_seed[s].tasks is not None else pool for s in seeds},
                settings,
                {s: _training_rollouts(logs[arm][s]) for s in seeds},
            )
        )
    return out


def toy_settings(summary: Mapping[str, Any]) -> ReferenceSettings | None:
    """The toy benchmark's reference settings: its data profile's ``reference_n`` and the toy's two reference models
    (``bots_verl.toy.prepare``); None when the summary names no known data profile."""
    from bots_verl.toy.build_profiles import BUILD_PROFILES, REFERENCE_COLUMNS

    profile = summary.get("profile")
    name = profile.get("data_profile") if isinstance(profile, Mapping) else None
    if name not in BUILD_PROFILES:
        return None
    return ReferenceSettings(
        BUILD_PROFILES[name].reference_n,
        len(REFERENCE_COLUMNS),
        f"the toy's data profile {name!r}: reference_n = {BUILD_PROFILES[name].reference_n} samples per task at "
        f"temperature 1, {len(REFERENCE_COLUMNS)} reference models ({', '.join(REFERENCE_COLUMNS)})",
    )


def _count(x: int | float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:,.0f}"


def _cells(cost: ReferenceCost) -> tuple[str, str, str]:
    """The labelled, used and saved cells of one arm: one value when every seed agrees, else each seed's."""
    seeds = cost.seeds
    refs = [cost.runs[s] for s in seeds]
    if any(r.reads is None for r in refs):
        labelled = "selector unknown here"
    elif not any(r.reads and r.models for r in refs):
        labelled = "reads none"
    else:
        labelled = "; ".join(
            sorted(
                {
                    "not recorded" if r.labelled is None else f"{_count(r.labelled)} of {_count(r.tasks)} tasks"
                    for r in refs
                }
            )
        )
    used = {cost.used(s) for s in seeds}
    saved = {(cost.saved(s), cost.full(s)) for s in seeds}
    if len(used) == 1 and len(saved) == 1:
        (one_saved, one_full) = saved.pop()
        share = f" ({one_saved / one_full:.1%})" if one_saved is not None and one_full else ""
        return labelled, _count(used.pop()), _count(one_saved) + share
    per_seed = ", ".join(f"{s}: {_count(cost.used(s))}" for s in seeds)
    return labelled, per_seed, ", ".join(f"{s}: {_count(cost.saved(s))}" for s in seeds)


def costs_to_markdown(costs: Sequence[ReferenceCost], steps: Mapping[str, Mapping[str, str]], baseline: str) -> str:
    """The reference generations table: per arm, the reference generations used and saved, its TTB(100%) and
    Roll(100%) cells against ``baseline`` (``steps``: arm -> {"ttb100": cell, "roll100": cell}; the baseline's are
    1 by definition) and the rollouts its runs spent training."""
    from analysis import render

    settings = next((c.settings for c in costs if c.settings is not None), None)
    rows = []
    for cost in costs:
        labelled, used, saved = _cells(cost)
        own = steps.get(cost.selector, {})
        null = "1 (baseline)" if cost.selector == baseline else "—"
        rollouts = [v for v in cost.rollouts.values() if math.isfinite(v)]
        rows.append(
            [
                cost.selector,
                str(len(cost.seeds)),
                labelled,
                used,
                saved,
                own.get("ttb100", null),
                own.get("roll100", null),
                _count(sum(rollouts) / len(rollouts)) if rollouts and len(rollouts) == len(cost.seeds) else "—",
            ]
        )
    pools = {c.full(s) for c in costs for s in c.seeds} - {None}
    full = f"{_count(pools.pop())} generations" if len(pools) == 1 else "see each row"
    if settings is None:
        what = (
            "Samples per task unknown (the summary names no toy data profile; pass --reference-samples and "
            "--reference-models): generation counts are —."
        )
    else:
        what = (
            f"A generation is one sampled response of one reference model to one pool task; a reference column is the "
            f"pass rate over {settings.samples} of them per task ({settings.source})."
        )
    caption = [
        what,
        f"Full labelling: every pool task x samples x models = {full}, what paper bots reads. Used: labelled tasks "
        "(meta.json extra.reference_coverage) x samples x the run's reference columns (extra.reference_columns); 0 "
        "for a selector that reads none (bots_verl.core Selector.reads_reference on extra.selector and its "
        "hyperparameters). Saved: full labelling − used (share of the full labelling).",
        f"TTB(100%) and Roll(100%): the paired overview's cells against {baseline} (mean [t interval]). Training "
        "rollouts: the rollouts a run spent training (sum of bots/rollouts), mean over the seeds: the run's own "
        "generations, made by the policy during training.",
    ]
    grid = render.Grid(
        "Reference generations beside the steps they buy",
        [
            "selector",
            "seeds",
            "labelled",
            "reference generations used",
            "saved vs full labelling",
            "TTB(100%)↓",
            "Roll(100%)↓",
            "training rollouts",
        ],
        rows,
        caption,
    )
    return render.to_markdown(grid)


def costs_to_dict(costs: Sequence[ReferenceCost]) -> list[dict[str, Any]]:
    """A JSON-able form of :func:`reference_costs` (per seed; unknown counts are null)."""
    out = []
    for cost in costs:
        settings = cost.settings
        out.append(
            {
                "selector": cost.selector,
                "samples": settings.samples if settings else None,
                "full_models": settings.models if settings else None,
                "per_seed": {
                    str(s): {
                        "reads_reference": cost.runs[s].reads,
                        "reference_columns": cost.runs[s].models,
                        "labelled": cost.runs[s].labelled,
                        "tasks": cost.pool_tasks[s],
                        "generations": cost.used(s),
                        "full_labelling": cost.full(s),
                        "saved_generations": cost.saved(s),
                        "training_rollouts": cost.rollouts[s] if math.isfinite(cost.rollouts[s]) else None,
                    }
                    for s in cost.seeds
                },
            }
        )
    return out
