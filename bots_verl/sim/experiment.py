"""Run a comparison: every method on every seed, paired by seed, with run logs, a summary table and plots.

Python API::

    from bots_verl.sim import run_experiment
    res = run_experiment("math", ["bots", "random", "bots_rho0.2=bots:rho=0.2"], seeds=3, steps=200)
    print(res.table())                        # markdown
    res.summary["bots"]["ttb100"].mean        # core.selection_metrics.Interval
    res.runs["bots"][0].eval_acc              # per-seed curves (RunResult)

Scenario knobs (reference quality, noise, pool hardness, number of reference columns, ...) are
:class:`~bots_verl.sim.scenario.ScenarioConfig` fields, passed as ``scenario_overrides``.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bots_verl.core.selection_metrics import Interval
from bots_verl.sim.loop import RunResult, build_run_selector, run_method, stream
from bots_verl.sim.methods import SimMethod, parse_method
from bots_verl.sim.plots import plot_all
from bots_verl.sim.report import format_table, summarize
from bots_verl.sim.scenario import ScenarioConfig, get_scenario
from bots_verl.sim.world import World, build_world

logger = logging.getLogger(__name__)

__all__ = ["ExperimentResult", "run_experiment"]


@dataclass
class ExperimentResult:
    """What :func:`run_experiment` returns.

    Attributes:
        scenario: the scenario config used.
        methods: the method specs, in run order.
        seeds: the seeds, in the same order as every ``runs[label]`` list.
        steps: training steps T.
        runs: label -> per-seed :class:`~bots_verl.sim.loop.RunResult`.
        summary: label -> column -> :class:`~bots_verl.core.selection_metrics.Interval` (see :func:`report.summarize`).
        baseline: label TTB / BSF are relative to.
        out: the output directory (None if nothing was written).
        plots: the PNG paths written.
        worlds: seed -> world summary (filter yield, reference correlation, start accuracy).
        wall_s: wall-clock seconds of the whole experiment.
    """

    scenario: ScenarioConfig
    methods: list[SimMethod]
    seeds: list[int]
    steps: int
    runs: dict[str, list[RunResult]]
    summary: dict[str, dict[str, Interval]]
    baseline: str | None
    out: Path | None = None
    plots: list[Path] = field(default_factory=list)
    worlds: dict[int, dict[str, float]] = field(default_factory=dict)
    wall_s: float = 0.0

    def table(self) -> str:
        """The summary as a markdown table."""
        return format_table(self.summary)

    def markdown(self) -> str:
        """``summary.md``: a header saying what was run, the table and how to read it."""
        cfg = self.scenario
        w = self.worlds
        mean = {k: sum(v[k] for v in w.values()) / len(w) for k in next(iter(w.values()))} if w else {}
        lines = [
            f"# Simulated comparison: scenario `{cfg.name}`",
            "",
            f"{len(self.seeds)} seeds ({', '.join(map(str, self.seeds))}), {self.steps} steps, pool {cfg.pool_size} "
            f"tasks, eval {cfg.eval_size} tasks. Baseline for TTB/BSF: `{self.baseline}` (paired by seed). "
            f"Wall-clock {self.wall_s:.1f} s.",
            "",
            self.table(),
            "",
            "Cells: mean [95% t-interval over seeds]; `(k/n —)`: k of n seeds never reached the baseline's target "
            "(TTB is then undefined for them and left out of the mean). ETR: mean over steps of the share of "
            "rollout groups with 0 < successes < n. TTB(x) < 1 is faster than the baseline; BSF(x) > 1 is better. "
            "Rollouts: total generated (DAPO extras included). Select ms: mean per step.",
        ]
        if mean:
            lines += [
                "",
                f"World (mean over seeds): filter yield {mean['filter_yield']:.2f}, start eval accuracy "
                f"{mean['eval_true_acc0']:.3f}, pool tasks with a mixed group at the start {mean['pool_etr0']:.2f}, "
                f"correlation of the weak / strong reference with the policy's true start pass rate "
                f"{mean['ref_weak_corr0']:.2f} / {mean['ref_strong_corr0']:.2f}.",
            ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """The summary as plain JSON (``summary.json``)."""
        return {
            "scenario": self.scenario.to_dict(),
            "methods": {m.label: m.describe() for m in self.methods},
            "seeds": self.seeds,
            "steps": self.steps,
            "baseline": self.baseline,
            "wall_s": self.wall_s,
            "worlds": {str(k): v for k, v in self.worlds.items()},
            "summary": {label: {col: iv._asdict() for col, iv in row.items()} for label, row in self.summary.items()},
        }


def _as_specs(methods: Sequence[str | SimMethod]) -> list[SimMethod]:
    specs = [m if isinstance(m, SimMethod) else parse_method(m) for m in methods]
    labels = [s.label for s in specs]
    dup = {x for x in labels if labels.count(x) > 1}
    if dup:
        raise ValueError(f"duplicate method labels {sorted(dup)}")
    if not specs:
        raise ValueError("no methods given")
    return specs


def run_experiment(
    scenario: str | ScenarioConfig = "math",
    methods: Sequence[str | SimMethod] = ("bots", "mopps", "implicit_only", "random", "oracle"),
    seeds: int | Sequence[int] = 5,
    steps: int = 300,
    *,
    batch_size: int = 32,
    rollouts_per_task: int = 16,
    eval_every: int = 1,
    baseline: str | None = "random",
    scenario_overrides: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    plots: bool = True,
    progress: bool = False,
) -> ExperimentResult:
    """Run every method on every seed and summarise.

    Args:
        scenario: a preset name (``math``, ``code``, ``logic``) or a config.
        methods: method specs (strings as in :mod:`bots_verl.sim.methods`, or :class:`SimMethod`).
        seeds: a count (seeds ``0 .. k-1``) or explicit seeds.
        steps: training steps per run.
        batch_size: tasks per step.
        rollouts_per_task: rollouts per task (GRPO group size).
        eval_every: eval interval in steps (TTB resolution).
        baseline: label for TTB / BSF / paired deltas (the paper normalises by Random).
        scenario_overrides: :class:`ScenarioConfig` field changes (e.g. ``{"ref_task_noise": 2.0}``).
        out: if given, write run logs ``<out>/<label>/seed<k>/``, ``summary.md``, ``summary.json`` and plots.
        plots: write the PNGs (needs matplotlib) when ``out`` is given.
        progress: show a tqdm progress bar on stderr.

    Returns:
        The :class:`ExperimentResult`.

    Raises:
        ValueError: for unknown scenarios, fields, selectors or hyperparameters, or duplicate labels. Every selector
            is built once before the runs start, so a typo fails fast.
    """
    t_start = time.perf_counter()
    cfg = get_scenario(scenario, **dict(scenario_overrides or {}))
    specs = _as_specs(methods)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list or steps < 1 or batch_size < 1 or rollouts_per_task < 1 or eval_every < 1:
        raise ValueError("need at least one seed and positive steps, batch_size, rollouts_per_task, eval_every")
    if batch_size > cfg.pool_size:
        raise ValueError(f"batch_size {batch_size} exceeds the pool ({cfg.pool_size})")
    out_dir = Path(out) if out is not None else None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(seed_list) * len(specs) * steps, file=sys.stderr, unit="step", desc=f"sim-{cfg.name}")
    runs: dict[str, list[RunResult]] = {s.label: [] for s in specs}
    worlds: dict[int, dict[str, float]] = {}
    first: World = build_world(cfg, stream(seed_list[0], 0))
    for spec in specs:  # fail fast on a bad selector name or hyperparameter, before any run starts
        build_run_selector(first, spec, 0)
    try:
        for seed in seed_list:
            world = first if seed == seed_list[0] else build_world(cfg, stream(seed, 0))
            worlds[seed] = world.summary()
            for spec in specs:
                if bar is not None:
                    bar.set_postfix_str(f"seed {seed} {spec.label}")
                run_dir = out_dir / spec.label / f"seed{seed}" if out_dir is not None else None
                runs[spec.label].append(
                    run_method(
                        world,
                        spec,
                        seed,
                        steps=steps,
                        batch_size=batch_size,
                        rollouts_per_task=rollouts_per_task,
                        eval_every=eval_every,
                        run_dir=run_dir,
                        progress=bar,
                    )
                )
    finally:
        if bar is not None:
            bar.close()
    result = ExperimentResult(
        scenario=cfg,
        methods=specs,
        seeds=seed_list,
        steps=steps,
        runs=runs,
        summary=summarize(runs, baseline, steps),
        baseline=baseline if baseline in runs else None,
        out=out_dir,
        worlds=worlds,
    )
    if out_dir is not None and plots:
        result.plots = plot_all(runs, out_dir, f"sim-{cfg.name}")
        logger.info("plots: %s", [str(p) for p in result.plots])
    result.wall_s = time.perf_counter() - t_start
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.md").write_text(result.markdown())
        (out_dir / "summary.json").write_text(json.dumps(_clean(result.to_json()), indent=2) + "\n")
    return result


def _clean(value: Any) -> Any:
    """Strict JSON: numpy scalars to Python, NaN / infinities to null."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
