"""Simulated vs measured: the ``toy`` scenario against the toy testbed's GRPO runs (issue 16).

``python -m bots_verl.toy.sim_compare --measured runs/toy/summary.json --out DIR`` runs the simulator on the ``toy``
scenario with the testbed's selectors plus the ``oracle`` (same steps, batch, rollouts and eval interval; 10 sim
seeds by default) and writes ``DIR/toy_compare.md`` / ``toy_compare.json``: per selector, simulated and measured
held-out accuracy gain at the final step (95% t-interval over seeds), the area under the gain curve, mean ETR
(``bots/batch/effective_task_ratio``), the gain relative to Random (paired by seed), the ranking of selectors, and the
oracle's headroom over BOTS: simulated, and measured where the benchmark ran the ``oracle`` arm. The simulated run
logs go to ``DIR/sim/``.

The measured side is the benchmark's ``summary.json`` (``runs[]``: ``selector``, ``seed``, ``accuracy`` by step;
``profile``: steps, prompts, n, eval_every) and each run's log ``<summary dir>/runs/<selector>_s<seed>/run`` for the
ETR. Any subset of selectors and seeds works; when ``summary.json`` does not exist yet, the runs' ``done.json`` files
beside it are read instead, and with neither only the simulated side is written.

Quantities: gain = accuracy at the last step minus accuracy at step 0 of the same run; AUC = trapezoidal area under
the gain curve divided by the steps (the mean gain over training, in accuracy units). Absolute accuracies are not
compared: the simulator's scale is its own (see ``bots_verl/sim/README.md``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl import runlog
from bots_verl.core.selection_metrics import Interval, interval, paired_interval
from bots_verl.fileio import markdown_table
from bots_verl.runlog import ETR_METRIC
from bots_verl.sim.experiment import _clean, run_experiment

logger = logging.getLogger(__name__)

__all__ = ["RunCurve", "compare", "fit_learning_rate", "load_measured", "main", "simulate"]


@dataclass
class RunCurve:
    """One run's held-out accuracy curve and mean ETR (measured or simulated)."""

    selector: str
    seed: int
    steps: np.ndarray
    acc: np.ndarray
    etr: float = math.nan

    def gain(self, final_step: int) -> float:
        """Accuracy at ``final_step`` minus at step 0 (NaN when either was not evaluated)."""
        at = dict(zip(self.steps.tolist(), self.acc.tolist(), strict=True))
        return at[final_step] - at[0] if 0 in at and final_step in at else math.nan

    def auc(self, final_step: int) -> float:
        """Trapezoidal area under the gain curve over ``[0, final_step]``, divided by ``final_step``."""
        keep = self.steps <= final_step
        s, a = self.steps[keep], self.acc[keep]
        if s.size < 2 or s[0] != 0 or s[-1] != final_step:
            return math.nan
        g = a - a[0]
        return float(np.sum((g[1:] + g[:-1]) / 2 * np.diff(s)) / final_step)


@dataclass
class Measured:
    """The testbed's runs and settings."""

    runs: list[RunCurve]
    profile: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def _mean_etr(run_dir: Path) -> float:
    try:
        values = [float(d[ETR_METRIC]) for _, d in runlog.iter_metrics(run_dir) if ETR_METRIC in d]
    except (ValueError, OSError) as exc:
        logger.warning("no ETR for %s: %s", run_dir, exc)
        return math.nan
    values = [v for v in values if math.isfinite(v)]
    return float(np.mean(values)) if values else math.nan


def load_measured(summary: str | Path) -> Measured | None:
    """The measured runs of a toy benchmark, or None when nothing has been measured yet.

    Args:
        summary: the benchmark's ``summary.json``. When it does not exist, the ``runs/*/done.json`` records in its
            directory are read (a benchmark still running).

    Raises:
        ValueError: on a malformed ``summary.json`` or record.
    """
    path = Path(summary)
    root = path.parent
    profile: dict[str, Any] = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            records, profile = data["runs"], data.get("profile", {})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a toy benchmark summary ({exc})") from exc
        source = str(path)
    else:
        done = sorted(root.glob("runs/*/done.json"))
        if not done:
            return None
        records = []
        for done_file in done:
            try:
                records.append(json.loads(done_file.read_text()))
            except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
                raise ValueError(f"{done_file}: not a readable run record ({exc})") from exc
        source = f"{root}/runs/*/done.json ({len(done)} finished runs; no summary.json yet)"
    runs = []
    for rec in records:
        try:
            selector, seed = str(rec["selector"]), runlog.parse_int(rec["seed"], "seed")
            # the one rule for accuracies (bots_verl.runlog.check_accuracy): a finite number in [0, 1] at every step
            points = sorted(
                (step := runlog.parse_int(k, "step key"), runlog.check_accuracy(v, f"accuracy at step {step}"))
                for k, v in rec["accuracy"].items()
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{source}: malformed run record {rec!r} ({exc})") from exc
        steps, acc = (np.asarray(x) for x in zip(*points, strict=True)) if points else (np.zeros(0), np.zeros(0))
        run_dir = root / "runs" / f"{selector}_s{seed}" / "run"
        etr = _mean_etr(run_dir) if run_dir.is_dir() else math.nan
        runs.append(RunCurve(selector, seed, steps.astype(np.int64), acc.astype(np.float64), etr))
    return Measured(runs, profile, source)


def simulate(
    selectors: Sequence[str],
    *,
    seeds: int,
    steps: int,
    batch_size: int,
    rollouts: int,
    eval_every: int,
    out: Path | None,
    plots: bool = False,
    scenario_overrides: Mapping[str, Any] | None = None,
) -> list[RunCurve]:
    """Run the ``toy`` scenario for ``selectors`` (the oracle is added) and return every run's curve."""
    methods = list(dict.fromkeys([*selectors, "oracle"]))
    res = run_experiment(
        "toy",
        methods,
        seeds,
        steps,
        batch_size=batch_size,
        rollouts_per_task=rollouts,
        eval_every=eval_every,
        baseline="random" if "random" in methods else None,
        scenario_overrides=scenario_overrides,
        out=out,
        plots=plots,
    )
    return [
        RunCurve(label, r.seed, r.eval_steps, r.eval_acc, float(r.etr.mean()))
        for label, rs in res.runs.items()
        for r in rs
    ]


def _summarise(runs: Sequence[RunCurve], steps: int) -> dict[str, dict[str, Interval]]:
    """Per selector: gain, AUC, ETR, and the gain / AUC relative to Random paired by seed."""
    by_sel: dict[str, dict[int, RunCurve]] = {}
    for r in runs:
        by_sel.setdefault(r.selector, {})[r.seed] = r
    base = by_sel.get("random", {})
    out: dict[str, dict[str, Interval]] = {}
    for sel, rs in by_sel.items():
        seeds = sorted(rs)
        row = {
            "gain": interval([rs[s].gain(steps) for s in seeds]),
            "auc": interval([rs[s].auc(steps) for s in seeds]),
            "etr": interval([rs[s].etr for s in seeds]),
        }
        paired = [s for s in seeds if s in base]
        if sel != "random" and paired:
            row["d_gain"] = paired_interval([rs[s].gain(steps) for s in paired], [base[s].gain(steps) for s in paired])
            row["d_auc"] = paired_interval([rs[s].auc(steps) for s in paired], [base[s].auc(steps) for s in paired])
        out[sel] = row
    return out


def _ranks(summary: Mapping[str, Mapping[str, Interval]], key: str) -> dict[str, int]:
    """1 = largest mean ``key``; selectors without a value are left out."""
    vals = [(sel, row[key].mean) for sel, row in summary.items() if key in row and row[key].n > 0]
    return {sel: i + 1 for i, (sel, _) in enumerate(sorted(vals, key=lambda x: -x[1]))}


def _spearman(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    common = sorted(set(a) & set(b))
    if len(common) < 3:
        return math.nan
    x = np.argsort(np.argsort([a[s] for s in common]))
    y = np.argsort(np.argsort([b[s] for s in common]))
    return float(np.corrcoef(x, y)[0, 1])


def _headroom(sim: Sequence[RunCurve], steps: int) -> dict[str, Interval]:
    """Oracle minus BOTS, paired by sim seed: final gain and AUC."""
    oracle = {r.seed: r for r in sim if r.selector == "oracle"}
    bots = {r.seed: r for r in sim if r.selector == "bots"}
    seeds = sorted(set(oracle) & set(bots))
    if not seeds:
        return {}
    return {
        "gain": paired_interval([oracle[s].gain(steps) for s in seeds], [bots[s].gain(steps) for s in seeds]),
        "auc": paired_interval([oracle[s].auc(steps) for s in seeds], [bots[s].auc(steps) for s in seeds]),
    }


def compare(
    measured_path: str | Path,
    out: str | Path,
    *,
    seeds: int = 10,
    selectors: Sequence[str] | None = None,
    steps: int | None = None,
    plots: bool = False,
    scenario_overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Simulate, load the measured runs, write ``toy_compare.md`` / ``toy_compare.json`` under ``out``.

    Settings (steps, batch, rollouts, eval interval, selectors) come from the measured ``summary.json``'s profile,
    else from the benchmark's ``full`` profile (:data:`bots_verl.toy.arms.PROFILES`); ``selectors`` and
    ``steps`` override them.

    Returns:
        The JSON written.

    Raises:
        ValueError: for fewer than 2 sim seeds, or a malformed measured summary.
    """
    # lazily: the benchmark module brings the CPU backend's settings, which the comparison itself does not need
    from bots_verl.toy.arms import PROFILES

    if seeds < 2:
        raise ValueError("need at least 2 sim seeds for an interval")
    out_dir = Path(out)
    measured = load_measured(measured_path)
    full = PROFILES["full"]
    prof: dict[str, Any] = {
        "steps": full.steps,
        "prompts": full.prompts,
        "n": full.n,
        "eval_every": full.eval_every,
        "selectors": list(full.selectors),
    }
    if measured is not None:
        prof.update({k: measured.profile[k] for k in prof if k in measured.profile})
        if not measured.profile:  # done.json records only: take what they show
            prof["selectors"] = sorted({r.selector for r in measured.runs})
            prof["steps"] = max((int(r.steps.max()) for r in measured.runs if r.steps.size), default=prof["steps"])
    if selectors:
        prof["selectors"] = list(selectors)
    if steps:
        prof["steps"] = int(steps)
    total = int(prof["steps"])
    sim = simulate(
        prof["selectors"],
        seeds=seeds,
        steps=total,
        batch_size=int(prof["prompts"]),
        rollouts=int(prof["n"]),
        eval_every=int(prof["eval_every"]),
        out=out_dir / "sim",
        plots=plots,
        scenario_overrides=scenario_overrides,
    )
    sim_sum = _summarise(sim, total)
    meas_runs = [r for r in measured.runs if r.selector in prof["selectors"]] if measured else []
    meas_sum = _summarise(meas_runs, total) if meas_runs else {}
    sim_rank, meas_rank = _ranks(sim_sum, "gain"), _ranks(meas_sum, "gain")
    # the oracle's lead over BOTS, simulated and (where the benchmark ran the oracle arm) measured
    sim_headroom, meas_headroom = _headroom(sim, total), _headroom(meas_runs, total)
    result = {
        "settings": {
            **prof,
            "sim_seeds": seeds,
            "scenario": "toy",
            "scenario_overrides": dict(scenario_overrides or {}),
        },
        "measured_source": measured.source if measured else None,
        "measured_seeds": {s: sorted(r.seed for r in meas_runs if r.selector == s) for s in meas_sum},
        "simulated": {sel: {k: iv._asdict() for k, iv in row.items()} for sel, row in sim_sum.items()},
        "measured": {sel: {k: iv._asdict() for k, iv in row.items()} for sel, row in meas_sum.items()},
        "rank_simulated": sim_rank,
        "rank_measured": meas_rank,
        "rank_spearman": _spearman(sim_rank, meas_rank),
        "oracle_headroom_over_bots": {k: iv._asdict() for k, iv in sim_headroom.items()},
        "oracle_headroom_over_bots_measured": {k: iv._asdict() for k, iv in meas_headroom.items()},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "toy_compare.md").write_text(_markdown(result, sim_sum, meas_sum, sim_headroom, meas_headroom))
    (out_dir / "toy_compare.json").write_text(json.dumps(_clean(result), indent=1) + "\n")
    return result


def fit_learning_rate(
    measured_path: str | Path, *, seeds: int = 10, low: float = 1e-4, high: float = 0.2, rounds: int = 12
) -> tuple[float, float, float]:
    """The ``toy`` scenario's ``learning_rate`` at which simulated Random gains what measured Random gained.

    The start of training is fitted from the calibration (:mod:`bots_verl.toy.sim_fit`); the learning dynamics are
    not measured there. This fits the one scale that sets how fast any selector learns, on the one run that involves
    no selection (Random's final held-out gain, mean over its seeds), by bisection in log space (the gain grows with
    the rate). Every other selector's simulated gain is then a prediction, not a fit.

    Returns:
        ``(learning_rate, simulated Random gain, measured Random gain)``.

    Raises:
        ValueError: when the measured summary has no Random runs.
    """
    measured = load_measured(measured_path)
    rand = [r for r in (measured.runs if measured else []) if r.selector == "random" and r.steps.size > 1]
    if not rand:
        raise ValueError(f"{measured_path}: no measured random runs to fit the learning rate to")
    prof = measured.profile if measured and measured.profile else {}
    steps = int(prof.get("steps", max(int(r.steps.max()) for r in rand)))
    target = float(np.mean([r.acc[-1] - r.acc[0] for r in rand]))

    def gain(rate: float) -> float:
        runs = simulate(
            ["random"],
            seeds=seeds,
            steps=steps,
            batch_size=int(prof.get("prompts", 16)),
            rollouts=int(prof.get("n", 8)),
            eval_every=int(prof.get("eval_every", 4)),
            out=None,
            scenario_overrides={"learning_rate": rate},
        )
        return float(np.mean([r.acc[-1] - r.acc[0] for r in runs if r.selector == "random"]))

    lo, hi = math.log(low), math.log(high)
    for _ in range(rounds):
        mid = (lo + hi) / 2
        if gain(math.exp(mid)) < target:
            lo = mid
        else:
            hi = mid
    rate = math.exp((lo + hi) / 2)
    return rate, gain(rate), target


def _cell(row: Mapping[str, Interval] | None, key: str, digits: int = 3) -> str:
    return row[key].format(digits) if row is not None and key in row else "—"


def _markdown(
    result: Mapping[str, Any],
    sim: Mapping[str, Mapping[str, Interval]],
    meas: Mapping[str, Mapping[str, Interval]],
    headroom: Mapping[str, Interval],
    measured_headroom: Mapping[str, Interval],
) -> str:
    st = result["settings"]
    lines = [
        "# Toy testbed: simulated vs measured",
        "",
        f"Simulator: scenario `toy`, {st['sim_seeds']} seeds, {st['steps']} steps of {st['prompts']} tasks x "
        f"{st['n']} rollouts, eval every {st['eval_every']} steps. Measured: "
        + (f"`{result['measured_source']}`." if result["measured_source"] else "not available yet (simulated only).")
        + "".join(f" Scenario override: `{k}={v:.5g}`." for k, v in st.get("scenario_overrides", {}).items()),
        "",
    ]
    header = ["selector", "sim gain", "measured gain", "sim Δgain vs random", "measured Δgain vs random", "sim AUC"]
    header += ["measured AUC", "sim ETR", "measured ETR", "rank sim", "rank measured", "measured seeds"]
    rows: list[list[str]] = []
    for sel in sim:
        if sel == "oracle" and sel not in meas:
            continue
        s, m = sim[sel], meas.get(sel)
        seeds = result["measured_seeds"].get(sel, [])
        rows.append(
            [sel, _cell(s, "gain"), _cell(m, "gain"), _cell(s, "d_gain"), _cell(m, "d_gain"), _cell(s, "auc")]
            + [_cell(m, "auc"), _cell(s, "etr", 2), _cell(m, "etr", 2), str(result["rank_simulated"].get(sel, "—"))]
            + [str(result["rank_measured"].get(sel, "—")), ",".join(map(str, seeds)) or "—"]
        )
    o = sim.get("oracle")
    if "oracle" not in meas:
        rows.append(
            ["oracle (sim only)", _cell(o, "gain"), "—", _cell(o, "d_gain"), "—", _cell(o, "auc"), "—"]
            + [_cell(o, "etr", 2), "—", str(result["rank_simulated"].get("oracle", "—")), "—", "—"]
        )
    lines += [
        markdown_table(header, rows),
        "",
        "Cells: mean [95% t-interval over seeds]. Gain: held-out accuracy at the last step minus step 0 of the same "
        "run. Δgain vs random: paired by seed. AUC: area under the gain curve / steps (mean gain over training). "
        "ETR: mean over steps of the share of rollout groups with 0 < successes < n. Rank: by mean gain, 1 = best "
        "(the oracle ranks among the simulated selectors).",
    ]
    if math.isfinite(result["rank_spearman"]):
        lines.append(f"Spearman correlation of the two rankings: {result['rank_spearman']:.2f}.")
    if headroom:
        lines.append(
            f"Oracle headroom over BOTS (simulated, paired by seed): gain {headroom['gain'].format(3)}, "
            f"AUC {headroom['auc'].format(3)}."
        )
    if measured_headroom:
        lines.append(
            f"Oracle headroom over BOTS (measured, paired by seed): gain {measured_headroom['gain'].format(3)}, "
            f"AUC {measured_headroom['auc'].format(3)}."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.sim_compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--measured", default="runs/toy/summary.json", help="the toy benchmark's summary.json")
    parser.add_argument("--out", required=True, help="output directory (toy_compare.md/json, sim/ run logs)")
    parser.add_argument("--seeds", type=int, default=10, help="simulator seeds (default 10)")
    parser.add_argument("--selectors", nargs="+", help="selectors (default: the measured profile's)")
    parser.add_argument("--steps", type=int, help="steps (default: the measured profile's)")
    parser.add_argument("--plots", action="store_true", help="also write the simulator's PNG plots")
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="toy scenario field, e.g. learning_rate=0.01"
    )
    parser.add_argument(
        "--fit-learning-rate",
        action="store_true",
        help="first fit the scenario's learning_rate to the measured Random gain (fit_learning_rate), then compare",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        overrides: dict[str, Any] = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set expects FIELD=VALUE, got {item!r}")
            overrides[key] = float(value)
        if args.fit_learning_rate:
            rate, sim_gain, target = fit_learning_rate(args.measured, seeds=args.seeds)
            print(f"fitted learning_rate={rate:.5f}: simulated Random gain {sim_gain:.4f}, measured {target:.4f}")
            overrides["learning_rate"] = rate
        compare(
            args.measured,
            args.out,
            seeds=args.seeds,
            selectors=args.selectors,
            steps=args.steps,
            plots=args.plots,
            scenario_overrides=overrides,
        )
    except ValueError as exc:
        parser.error(str(exc))
    print((Path(args.out) / "toy_compare.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
