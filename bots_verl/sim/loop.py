"""One simulated training run: a selector picks, the policy rolls out and trains, metrics are logged.

Per step (vectorised numpy over the pool; the only Python loop is over DAPO rounds, at most ``dapo_max_rounds``):

1. ``observe_truth(p)`` for selectors that want it (the oracle), then ``select(B)``.
2. ``n`` Bernoulli rollouts per picked task: ``successes ~ Binomial(n, p_k)``.
3. With DAPO dynamic sampling, all-0 / all-1 groups are dropped and more candidate batches are drawn until ``B``
   informative groups are in hand; every rollout generated counts toward the step's cost.
4. The policy trains on the kept groups (:meth:`Policy.train`); the selector is updated with every group it generated
   this step (a task drawn in two rounds is merged into one entry, since ``update`` takes unique indices).
5. Eval accuracy every ``eval_every`` steps (and at steps 0 and T).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.core import Selector, effective_task_ratio
from bots_verl.runlog import (
    ETR_METRIC,
    ROLLOUTS_METRIC,
    SELECT_MS_METRIC,
    SIM_BATCH_TRUE_P_METRIC,
    SIM_DAPO_ROUNDS_METRIC,
    SIM_GROUP_SIZE_MAX_METRIC,
    SIM_GROUP_SIZE_MIN_METRIC,
    SIM_TRAIN_SIGNAL_METRIC,
    SIM_TRAINED_GROUPS_METRIC,
    SIM_TRUE_P_METRIC,
    UPDATE_MS_METRIC,
    RunWriter,
    bots_key,
    val_accuracy_key,
)
from bots_verl.sim.methods import SimMethod
from bots_verl.sim.policy import Policy
from bots_verl.sim.pool_embeddings import labelled_reference, pool_embeddings
from bots_verl.sim.selector_registry import make_selector, wants_truth
from bots_verl.sim.world import World

logger = logging.getLogger(__name__)

__all__ = ["RunResult", "acc_metric", "build_run_selector", "run_method", "stream"]


def acc_metric(scenario: str) -> str:
    """The eval accuracy metric name of a scenario, as verl's validation would name it."""
    return val_accuracy_key(f"sim-{scenario}", 1)


def stream(seed: int, purpose: int) -> np.random.Generator:
    """An independent generator for one purpose (0 world, 1 rollouts, 2 eval) of one seed."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(purpose)])))


@dataclass
class RunResult:
    """Per-step curves of one (method, seed) run.

    Attributes:
        label, seed: which run.
        eval_steps, eval_acc: the eval curve (step 0 = before training).
        etr: per training step, the share of generated groups with ``0 < s < n``.
        rollouts: per training step, the rollouts generated (DAPO extras included).
        select_ms, update_ms: per training step, wall-clock milliseconds in ``select`` and ``update``.
        signal: per training step, the mean learning signal of the trained groups.
        run_dir: where the run log was written (None if not written).
    """

    label: str
    seed: int
    eval_steps: np.ndarray
    eval_acc: np.ndarray
    etr: np.ndarray
    rollouts: np.ndarray
    select_ms: np.ndarray
    update_ms: np.ndarray
    signal: np.ndarray
    run_dir: Path | None = None


def build_run_selector(world: World, spec: SimMethod, seed: int) -> Selector:
    """The selector of one run: the pool's references (all, a labelled share, or none: ``spec.ref_fraction``) and
    its task embeddings (:mod:`bots_verl.sim.pool_embeddings`, drawn from the seed's stream 3)."""
    embeddings = pool_embeddings(world, stream(seed, 3))
    reference = labelled_reference(world.pool.reference, embeddings, spec.ref_fraction, spec.ref_labels, seed)
    return make_selector(
        spec.selector,
        len(world.pool),
        reference_pass_rates=reference,
        task_embeddings=embeddings,
        seed=seed,
        **spec.hparams,
    )


def _merge(
    indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge groups of the same task (DAPO may draw a task twice in a step) into unique entries."""
    uniq, inv = np.unique(indices, return_inverse=True)
    s = np.bincount(inv, weights=successes, minlength=uniq.size)
    n = np.bincount(inv, weights=attempts, minlength=uniq.size)
    return uniq.astype(np.int64), s, n


def run_method(
    world: World,
    spec: SimMethod,
    seed: int,
    *,
    steps: int,
    batch_size: int = 32,
    rollouts_per_task: int = 16,
    eval_every: int = 1,
    run_dir: str | Path | None = None,
    progress: Any = None,
) -> RunResult:
    """Simulate one training run of ``steps`` steps.

    Args:
        world: the seed's world (shared by every method of that seed, so comparisons are paired).
        spec: the method.
        seed: seeds the selector and the rollout / eval streams.
        steps: training steps T.
        batch_size: tasks per step B.
        rollouts_per_task: rollouts per task n.
        eval_every: eval interval in steps.
        run_dir: if given, write ``meta.json`` and ``metrics.jsonl`` there (:mod:`bots_verl.runlog`).
        progress: optional object with ``update(1)`` called once per step (a tqdm bar).

    Returns:
        The run's curves.
    """
    cfg = world.config
    pool = world.pool
    num_tasks = len(pool)
    selector = build_run_selector(world, spec, seed)
    policy = Policy(world)
    rng_roll, rng_eval = stream(seed, 1), stream(seed, 2)
    metric = acc_metric(cfg.name)
    writer = None
    if run_dir is not None:
        writer = RunWriter(
            run_dir,
            run_id=f"sim-{cfg.name}-{spec.label}-seed{seed}",
            source="sim",
            domain=cfg.name,
            model="sim",
            method=spec.label,
            seed=seed,
            hparams=spec.describe(),
            total_steps=steps,
            extra={
                "scenario": cfg.to_dict(),
                "world": world.summary(),
                "batch_size": batch_size,
                "rollouts_per_task": rollouts_per_task,
                "eval_every": eval_every,
            },
        )
    gen_size = min(num_tasks, max(1, round(spec.dapo_gen_factor * batch_size))) if spec.dapo else batch_size
    rounds_max = spec.dapo_max_rounds if spec.dapo else 1
    # the oracle's hook (bots_verl.sim.oracle_selector): the true success probabilities before every select
    observe_truth = getattr(selector, "observe_truth", None) if wants_truth(selector) else None
    eval_steps, eval_acc = [0], [policy.eval_accuracy(rng_eval)]
    curves = {k: np.zeros(steps) for k in ("etr", "rollouts", "select_ms", "update_ms", "signal")}
    if writer:
        writer.log(0, {metric: eval_acc[0]})
    try:
        for t in range(1, steps + 1):
            gen_idx, gen_s, gen_n, gen_p, keep = [], [], [], [], []
            kept = rounds = 0
            select_s = 0.0
            while kept < batch_size and rounds < rounds_max:
                if observe_truth is not None:
                    observe_truth(policy.pool_probs())
                t0 = time.perf_counter()
                idx = selector.select(gen_size)
                select_s += time.perf_counter() - t0
                p = policy.probs_at(idx)
                sizes = np.full(idx.size, rollouts_per_task, dtype=np.int64)
                s = rng_roll.binomial(rollouts_per_task, p)
                informative = (s > 0) & (s < sizes)
                # DAPO keeps only informative groups, up to B; without DAPO the whole batch trains.
                take = np.flatnonzero(informative)[: batch_size - kept] if spec.dapo else np.arange(idx.size)
                gen_idx.append(idx)
                gen_s.append(s)
                gen_n.append(sizes)
                gen_p.append(p)
                keep.append((idx[take], s[take], sizes[take]))
                kept += take.size
                rounds += 1
            all_idx, all_s = np.concatenate(gen_idx), np.concatenate(gen_s).astype(np.float64)
            all_n = np.concatenate(gen_n).astype(np.float64)
            tr_idx = np.concatenate([k[0] for k in keep])
            tr_s = np.concatenate([k[1] for k in keep]).astype(np.float64)
            tr_n = np.concatenate([k[2] for k in keep]).astype(np.float64)
            signal = policy.train(tr_idx, tr_s, tr_n, batch_size)
            u_idx, u_s, u_n = _merge(all_idx, all_s, all_n) if rounds > 1 else (all_idx, all_s, all_n)
            t0 = time.perf_counter()
            selector.update(u_idx, u_s, u_n)
            update_s = time.perf_counter() - t0
            row = {
                "etr": effective_task_ratio(all_s, all_n),
                "rollouts": float(all_n.sum()),
                "select_ms": 1e3 * select_s,
                "update_ms": 1e3 * update_s,
                "signal": signal,
            }
            for k, v in row.items():
                curves[k][t - 1] = v
            is_eval = t % eval_every == 0 or t == steps
            if is_eval:
                eval_steps.append(t)
                eval_acc.append(policy.eval_accuracy(rng_eval))
            if writer:
                data = {bots_key(k): v for k, v in selector.stats().items()}
                data.update(
                    {
                        ETR_METRIC: row["etr"],
                        ROLLOUTS_METRIC: row["rollouts"],
                        SELECT_MS_METRIC: row["select_ms"],
                        UPDATE_MS_METRIC: row["update_ms"],
                        SIM_TRAIN_SIGNAL_METRIC: signal,
                        SIM_TRAINED_GROUPS_METRIC: float(tr_idx.size),
                        SIM_GROUP_SIZE_MAX_METRIC: float(all_n.max()),
                        SIM_GROUP_SIZE_MIN_METRIC: float(all_n.min()),
                        SIM_DAPO_ROUNDS_METRIC: float(rounds),
                        SIM_BATCH_TRUE_P_METRIC: float(np.concatenate(gen_p).mean()),
                        # the last select()'s batch, the tasks of bots/selection/sampled_p_mean (paper Fig. 3)
                        SIM_TRUE_P_METRIC: float(gen_p[-1].mean()),
                    }
                )
                if is_eval:
                    data[metric] = eval_acc[-1]
                writer.log(t, data)
            if progress is not None:
                progress.update(1)
    finally:
        if writer:
            writer.close()
    return RunResult(
        label=spec.label,
        seed=seed,
        eval_steps=np.asarray(eval_steps, dtype=np.int64),
        eval_acc=np.asarray(eval_acc),
        run_dir=Path(run_dir) if run_dir is not None else None,
        **curves,
    )
