"""Command line of the simulator: ``python -m bots_verl.sim --help``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from bots_verl.sim.experiment import run_experiment
from bots_verl.sim.methods import SimMethod, parse_args_list, parse_method, parse_value
from bots_verl.sim.scenario import PRESETS

logger = logging.getLogger(__name__)

__all__ = ["DEMO", "PRESETS_CLI", "TOY", "build_parser", "main"]

# The demo: the paper's math comparison plus the oracle ceiling, sized to run in about a minute on 2 CPU cores.
DEMO: dict[str, Any] = {
    "scenario": "math",
    "methods": "bots,mopps,implicit_only,offline_easy2hard,random,oracle",
    "dapo": "random",
    "seeds": 5,
    "steps": 300,
    "out": "runs/sim-demo",
}

# Beyond the paper, predicted for the toy testbed (issue 24): its shape (16 tasks x 8 rollouts, 24 steps, the
# recalibrated learning rate of the `toy` scenario), the paper's methods and ours, and the oracle's ceiling.
TOY: dict[str, Any] = {
    "scenario": "toy",
    "methods": "random,bots,implicit_only,greso,bots_warm,oracle",
    "seeds": 10,
    "steps": 24,
    "batch_size": 16,
    "rollouts": 8,
    "out": "runs/sim-toy",
}

PRESETS_CLI: dict[str, dict[str, Any]] = {"demo": DEMO, "toy": TOY}

EPILOG = """\
method specs (--methods entries and --variant values):
  bots                             selector "bots" with its defaults, labelled "bots"
  bots_rho0.2=bots:rho=0.2         labelled variant: selector bots with rho = 0.2
  b=bots:lam=0.05,selection=greedy several hyperparameters, comma separated
  random+dapo=random:dapo=true     DAPO dynamic sampling on top of random selection
Selectors: every name `python -m bots_verl.core --list` prints (beyond the paper: greso, dps, bots_warm, bots_noref,
bots_partial_ref), plus the simulator's own: oracle (it sees the true success probabilities) and bots_ablation (the
paper's bots with the reference prior and learnability selection, measured and not adopted).
Loop keys: dapo, dapo_gen_factor, dapo_max_rounds; ref_fraction, ref_labels (the reference columns the selector gets).

examples:
  python -m bots_verl.sim --preset demo
  python -m bots_verl.sim --preset toy                             # beyond the paper, on the toy testbed's shape
  python -m bots_verl.sim --preset toy --steps 300 --dapo random,greso
  python -m bots_verl.sim --scenario math --methods bots,random,mopps,implicit_only,offline_easy2hard,oracle \\
      --seeds 5 --steps 300 --out runs/sim-math
  python -m bots_verl.sim --methods bots,random --variant bots_rho0.2=bots:rho=0.2 --variant bots_rho0.5=bots:rho=0.5
  python -m bots_verl.sim --methods bots,random --set ref_task_noise=2.0 --set ref_offsets=0.5,1.5,4.0
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every option documented)."""
    presets = "; ".join(f"{name}: " + ", ".join(f"{k}={v}" for k, v in p.items()) for name, p in PRESETS_CLI.items())
    p = argparse.ArgumentParser(
        prog="python -m bots_verl.sim",
        description="Simulated RL finetuning to compare task selectors (BOTS and baselines) in seconds: a pool of "
        "tasks with latent difficulty and shared skills, GRPO-like learning from group reward variance, reference "
        "pass rates as in GURU. Writes run logs, summary.md/summary.json and PNG plots; prints the summary table.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS_CLI),
        help="a ready comparison: demo (the paper's math comparison, `make demo`) or toy (beyond the paper on the toy "
        f"testbed's shape); options given explicitly override it ({presets})",
    )
    p.add_argument(
        "--scenario",
        choices=sorted(PRESETS),
        help="world preset (default math): pool size, difficulty "
        "distribution and skill transfer; see bots_verl/sim/README.md",
    )
    p.add_argument("--methods", help="comma-separated method specs (default: bots,mopps,implicit_only,random,oracle)")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=SELECTOR[:K=V,...]",
        help="add a labelled variant (repeatable), e.g. bots_rho0.2=bots:rho=0.2",
    )
    p.add_argument(
        "--method-arg",
        action="append",
        default=[],
        metavar="LABEL:K=V[,K=V]",
        help="override hyperparameters of a listed method (repeatable), e.g. bots:rho=0.2",
    )
    p.add_argument(
        "--dapo",
        metavar="LABELS",
        help="also run these methods (comma list, or 'all') with DAPO dynamic "
        "sampling, labelled <label>+dapo: oversample, drop all-0/all-1 groups, count the extra rollouts",
    )
    p.add_argument(
        "--seeds",
        type=int,
        help="number of seeds 0..k-1 (default 5); seed k fixes the world, so methods are paired by seed",
    )
    p.add_argument("--seed-list", help="explicit comma-separated seeds (instead of --seeds)")
    p.add_argument("--steps", type=int, help="training steps per run (default 300)")
    p.add_argument("--batch-size", type=int, help="tasks per step B (default 32, as in the paper's config)")
    p.add_argument("--rollouts", type=int, help="rollouts per task n (default 16)")
    p.add_argument("--eval-every", type=int, default=1, help="eval interval in steps (default 1; TTB resolution)")
    p.add_argument("--pool-size", type=int, help="override the scenario's training-pool size")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any scenario field (repeatable), e.g. ref_task_noise=2.0, ref_offsets=0.5,1.5,4, "
        "shared_loading=0.2, eval_samples=1; fields are listed in bots_verl/sim/scenario.py",
    )
    p.add_argument("--baseline", default="random", help="label that TTB/BSF are relative to (default random)")
    p.add_argument(
        "--out",
        help="output directory (default runs/sim-<scenario>); run logs go to "
        "<out>/<label>/seed<k>/{meta.json,metrics.jsonl}",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def _methods(args: argparse.Namespace, defaults: dict) -> list[SimMethod]:
    names = args.methods or defaults.get("methods") or "bots,mopps,implicit_only,random,oracle"
    specs = [parse_method(x) for x in names.split(",") if x.strip()]
    specs += [parse_method(v) for v in args.variant]
    by_label = {s.label: s for s in specs}
    for item in args.method_arg:
        label, sep, kv = item.partition(":")
        if not sep or label not in by_label:
            raise ValueError(f"--method-arg {item!r}: expected LABEL:K=V with LABEL one of {sorted(by_label)}")
        by_label[label] = by_label[label].with_args(**parse_args_list(kv))
    specs = list(by_label.values())
    dapo = args.dapo if args.dapo is not None else defaults.get("dapo")
    if dapo:
        wanted = [s.label for s in specs] if dapo == "all" else [x.strip() for x in dapo.split(",") if x.strip()]
        for label in wanted:
            if label not in by_label:
                raise ValueError(f"--dapo {label!r}: not among the methods {sorted(by_label)}")
            base = by_label[label]
            specs.append(SimMethod(f"{label}+dapo", base.selector, dict(base.hparams)).with_args(dapo=True))
    return specs


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    defaults: dict[str, Any] = PRESETS_CLI[args.preset] if args.preset else {}
    scenario = args.scenario or defaults.get("scenario", "math")
    try:
        methods = _methods(args, defaults)
        overrides = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set {item!r}: expected FIELD=VALUE")
            overrides[key.strip()] = value.strip()
        if args.pool_size is not None:
            overrides["pool_size"] = args.pool_size
        seeds = (
            [int(parse_value(x)) for x in args.seed_list.split(",")]
            if args.seed_list
            else args.seeds or defaults.get("seeds", 5)
        )
        out = args.out or defaults.get("out") or f"runs/sim-{scenario}"
        result = run_experiment(
            scenario,
            methods,
            seeds,
            args.steps or defaults.get("steps", 300),
            batch_size=args.batch_size or defaults.get("batch_size", 32),
            rollouts_per_task=args.rollouts or defaults.get("rollouts", 16),
            eval_every=args.eval_every,
            baseline=args.baseline,
            scenario_overrides=overrides,
            out=out,
            plots=not args.no_plots,
            progress=not args.no_progress,
        )
    except ValueError as exc:
        parser.error(str(exc))
    print(result.markdown())
    print(f"Run logs: {out}/<method>/seed<k>/  Summary: {out}/summary.md, {out}/summary.json")
    if result.plots:
        print("Plots: " + ", ".join(str(p) for p in result.plots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
