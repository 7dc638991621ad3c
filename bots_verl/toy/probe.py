"""Fast calibration probes of the toy testbed's learning settings: plain-torch GRPO, Random selection, exact eval.

The testbed's judge is verl's trainer on the CPU backend, which costs seconds per step. Whether a setting (learning
rate, warm-up, loss aggregation, tasks and rollouts per step) makes the policy *learn* is a question about GRPO on
this model and pool, not about verl: this loop answers it at a fraction of the cost, with the update that
``tests/verl_cpu/test_plain_grpo_on_cpu.py`` holds equal to verl's (:mod:`bots_verl.verl_cpu.plain_grpo`). Settings
chosen here are then confirmed in verl's trainer (``bots_verl.toy.benchmark``), and every probe is recorded in
``recipes/toy/results/calibration.md``.

One probe = one setting x several seeds; each seed draws ``prompts`` tasks uniformly from the pool per step (Random),
samples ``n`` responses per task at temperature 1 (:func:`bots_verl.verl_cpu.sampling.generate_batch`), scores them
exactly (the answer's tokens then ``</s>``: what the ``toy__arith`` scorer accepts), takes one GRPO step, and
evaluates the exact held-out accuracy (:func:`bots_verl.toy.likelihood.answer_stats`) every ``eval_every`` steps::

    python -m bots_verl.toy.probe --data runs/toy/data --seeds 0 1 2 --steps 60 --lr 1e-4 --warmup-steps 10 \
        --out runs/toy/probes
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.fileio import markdown_table

logger = logging.getLogger(__name__)

# --fixed-tasks trains on the tasks whose starting pass rate is nearest this: mixed groups in most steps
FIXED_TASK_RATE = 0.3

__all__ = ["main", "probe_name", "report", "run_probe", "run_seed", "soften", "warmup_factor"]


def _problems(path: str | Path) -> list:
    import pyarrow.parquet as pq

    from bots_verl.toy.tasks import parse_prompt

    prompts = pq.read_table(path, columns=["prompt"]).column("prompt").to_pylist()
    return [parse_prompt(messages[0]["content"]) for messages in prompts]


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Learning-rate factor of verl's constant schedule with a linear warm-up (``get_constant_schedule_with_warmup``).

    Written out rather than imported so that a probe runs where verl is not installed (the rule is tested against
    verl's function).
    """
    return step / max(1.0, warmup_steps) if step < warmup_steps else 1.0


def probe_name(args: argparse.Namespace) -> str:
    """A file-name-safe label of a probe's settings."""
    name = (
        f"p{args.prompts}_n{args.n}_{args.optimizer}_lr{args.lr:g}_wu{args.warmup_steps}_{args.loss_agg_mode}"
        f"_clip{args.grad_clip:g}_s{args.steps}"
    )
    # settings added later are named only when not at their defaults, so older probes keep their files
    if args.mini_batches != 1:
        name += f"_mb{args.mini_batches}"
    if args.start_temperature != 1.0:
        name += f"_T{args.start_temperature:g}"
    if args.fixed_tasks:
        name += "_fixed"
    return name


def soften(model: Any, temperature: float) -> None:
    """Divide a Llama's logits by ``temperature`` for good: its final RMSNorm's weight scaled by ``1 / temperature``.

    The lm head is linear without bias, so this is exactly sampling the original model at ``temperature``; the
    result is an ordinary checkpoint (what a flatter, less certain starting policy looks like to the trainer).
    """
    import torch

    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    with torch.no_grad():
        model.model.norm.weight.div_(temperature)


def run_seed(args: argparse.Namespace, seed: int, model_dir: Path, pool: list, heldout: list) -> dict[str, Any]:
    """One seed of a probe; returns its held-out accuracy curve and per-step figures."""
    import torch
    from transformers import AutoModelForCausalLM

    from bots_verl.toy.likelihood import answer_stats
    from bots_verl.toy.tokenizer import EOS, VOCAB, encode
    from bots_verl.verl_cpu.plain_grpo import plain_grpo_step, response_log_probs
    from bots_verl.verl_cpu.sampling import GenerationRequest, generate_batch, row_seed

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation="eager")
    soften(model, args.start_temperature)
    # verl's actor optimizer as verl builds it (torch.optim.<optim.optimizer> with lr, weight decay 0.01 and, for Adam,
    # its default betas), and its constant schedule with a linear warm-up (whose first step has learning rate 0)
    if args.optimizer == "AdamW":
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), weight_decay=0.01)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_factor(step, args.warmup_steps))
    rng = np.random.default_rng([seed, 7])
    curve = {0: float(np.mean(answer_stats(model, heldout)[0]))}
    pool_rates = np.asarray(answer_stats(model, pool)[0])
    pool_curve = {0: float(pool_rates.mean())}
    fixed = None
    if args.fixed_tasks:
        # the interference check: the same tasks every step, those the policy solves about 30% of the time (a
        # stable sort, so every seed trains the same tasks and differs only in its samples)
        fixed = np.argsort(np.abs(pool_rates - FIXED_TASK_RATE), kind="stable")[: args.prompts]
        trained_curve = {0: float(pool_rates[fixed].mean())}
    steps = []
    group_ids = [i // args.n for i in range(args.prompts * args.n)]
    for step in range(1, args.steps + 1):
        picked = fixed if fixed is not None else rng.choice(len(pool), size=args.prompts, replace=False)
        prompts, targets, requests = [], [], []
        for i in picked:
            ids, n_prompt = encode(pool[i].prompt, pool[i].answer)
            for k in range(args.n):
                prompts.append(torch.tensor(ids[:n_prompt]))
                targets.append(ids[n_prompt:])
                requests.append(
                    GenerationRequest(
                        ids[:n_prompt],
                        args.max_tokens,
                        seed=row_seed("probe", seed, step, int(i), k),
                        stop_token_ids=(VOCAB[EOS],),
                    )
                )
        model.eval()
        results = generate_batch(model, requests, pad_token_id=VOCAB["<pad>"])
        scores = [float(r.token_ids == tgt) for r, tgt in zip(results, targets, strict=True)]
        responses = [torch.tensor(r.token_ids) for r in results]
        # verl's ppo_mini_batch_size = prompts / mini_batches: one optimizer step per mini-batch of whole groups,
        # each against the rollout policy's log-probs (so the ratio clip acts from the second mini-batch on)
        masks = [torch.ones_like(r) for r in responses]
        with torch.no_grad():
            old = response_log_probs(model, prompts, responses, VOCAB["<pad>"])
        rows_per = len(responses) // args.mini_batches
        for mb in range(args.mini_batches):
            rows = slice(mb * rows_per, (mb + 1) * rows_per)
            update = plain_grpo_step(
                model,
                optimizer,
                prompts[rows],
                responses[rows],
                masks[rows],
                torch.tensor(scores[rows]),
                group_ids[rows],
                old_log_probs=old[rows, : max(len(r) for r in responses[rows])],
                loss_agg_mode=args.loss_agg_mode,
                grad_clip=args.grad_clip,
                pad_token_id=VOCAB["<pad>"],
            )
        scheduler.step()
        rewards = np.asarray(scores).reshape(args.prompts, args.n)
        mixed = float(np.mean((rewards.min(1) == 0) & (rewards.max(1) == 1)))
        steps.append(
            {"step": step, "reward": float(rewards.mean()), "mixed": mixed,
                "tasks": [int(i) for i in picked], "loss": update.loss,
             "grad_norm": update.grad_norm}
        )  # fmt: skip
        if step % args.eval_every == 0 or step == args.steps:
            curve[step] = float(np.mean(answer_stats(model, heldout)[0]))
            pool_rates = np.asarray(answer_stats(model, pool)[0])
            pool_curve[step] = float(pool_rates.mean())
            if fixed is not None:
                trained_curve[step] = float(pool_rates[fixed].mean())
            logger.info(
                "seed %d step %d: held-out %.4f, pool %.4f, mixed groups %.2f",
                seed, step, curve[step], pool_curve[step], mixed,
            )  # fmt: skip
    result = {
        "seed": seed,
        "accuracy": {str(k): v for k, v in curve.items()},
        "pool_accuracy": {str(k): v for k, v in pool_curve.items()},
        "steps": steps,
    }
    if fixed is not None:
        result["trained_accuracy"] = {str(k): v for k, v in trained_curve.items()}
    return result


def run_probe(args: argparse.Namespace) -> dict[str, Any]:
    """Every seed of one probe; the result is also written to ``<out>/<probe name>.json`` (resumable per seed)."""
    import torch

    torch.set_num_threads(args.threads)
    data = Path(args.data)
    # the files of prepare's first two stages: a probe needs no reference columns
    pool, heldout = _problems(data / "pool.parquet"), _problems(data / "val.parquet")
    out = Path(args.out) / f"{probe_name(args)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = json.loads(out.read_text()) if out.is_file() else {"settings": vars(args), "seeds": {}}
    for seed in args.seeds:
        if str(seed) in record["seeds"]:
            continue
        start = time.monotonic()
        result = run_seed(args, seed, data / "models" / "policy", pool, heldout)
        result["wall_s"] = round(time.monotonic() - start, 1)
        record["seeds"][str(seed)] = result
        out.write_text(json.dumps(record, indent=1) + "\n")
    gains = [s["accuracy"][str(args.steps)] - s["accuracy"]["0"] for s in record["seeds"].values()]
    record["gain_mean"] = float(np.mean(gains))
    record["gain_sd"] = float(np.std(gains, ddof=1)) if len(gains) > 1 else 0.0
    out.write_text(json.dumps(record, indent=1) + "\n")
    return record


def report(out_dir: str | Path) -> str:
    """A markdown table of every probe in ``out_dir``: settings, held-out and pool gains with 95% t-intervals."""
    from bots_verl.core.selection_metrics import interval

    header = ["tasks x n", "updates per step", "start T", "optimizer", "lr", "warm-up", "loss agg.", "steps", "seeds"]
    header += ["held-out start", "held-out gain", "pool gain", "trained tasks' gain", "mixed"]
    rows: list[list[Any]] = []
    records = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("*.json"))]

    def order(rec: dict[str, Any]) -> tuple:
        cfg = rec["settings"]
        return cfg.get("start_temperature", 1.0), cfg.get("mini_batches", 1), cfg["prompts"] * cfg["n"], cfg["lr"]

    for rec in sorted(records, key=order):
        cfg, seeds = rec["settings"], list(rec["seeds"].values())
        last = str(cfg["steps"])
        gains = [s["accuracy"][last] - s["accuracy"]["0"] for s in seeds if last in s["accuracy"]]
        pool = [s["pool_accuracy"][last] - s["pool_accuracy"]["0"] for s in seeds if "pool_accuracy" in s]
        trained = [s["trained_accuracy"][last] - s["trained_accuracy"]["0"] for s in seeds if "trained_accuracy" in s]
        mixed = [st["mixed"] for s in seeds for st in s["steps"]]
        rows.append(
            [f"{cfg['prompts']} x {cfg['n']}", cfg.get("mini_batches", 1), f"{cfg.get('start_temperature', 1.0):g}"]
            + [cfg.get("optimizer", "AdamW"), f"{cfg['lr']:g}", cfg["warmup_steps"], cfg["loss_agg_mode"], cfg["steps"]]
            + [len(gains), f"{np.mean([s['accuracy']['0'] for s in seeds]):.4f}"]
            + [interval(values).format(4) if values else "—" for values in (gains, pool, trained)]
            + [f"{np.mean(mixed):.2f}"]
        )
    return markdown_table(header, rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the probe's held-out gain per seed and their mean."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="runs/toy/data", help="the prepared artifacts (bots_verl.toy.prepare)")
    parser.add_argument("--out", default="runs/toy/probes")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--prompts", type=int, default=16, help="tasks per step")
    parser.add_argument("--n", type=int, default=8, help="rollouts per task")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--optimizer", choices=("AdamW", "SGD"), default="AdamW", help="verl's actor.optim.optimizer")
    parser.add_argument("--warmup-steps", type=int, default=0, help="linear learning-rate warm-up (verl's)")
    parser.add_argument("--loss-agg-mode", default="token-mean")
    parser.add_argument("--mini-batches", type=int, default=1, help="updates per step (verl: prompts / mini-batch)")
    parser.add_argument(
        "--start-temperature", type=float, default=1.0, help="soften the starting policy: its logits / T (soften())"
    )
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=12)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--fixed-tasks",
        action="store_true",
        help="the same --prompts tasks every step (nearest pass rate 0.3): does learning them move the rest?",
    )
    parser.add_argument("--report", action="store_true", help="print the table of every probe in --out and exit")
    args = parser.parse_args(argv)
    if args.prompts % args.mini_batches:
        parser.error(f"--prompts {args.prompts} is not a multiple of --mini-batches {args.mini_batches}")
    if args.report:
        print(report(args.out), end="")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    record = run_probe(args)
    for seed, res in record["seeds"].items():
        acc = res["accuracy"]
        print(f"seed {seed}: held-out {acc['0']:.4f} -> {acc[str(args.steps)]:.4f} ({res['wall_s']:.0f} s)")
    print(f"{probe_name(args)}: mean gain {record['gain_mean']:+.4f} (SD {record['gain_sd']:.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
