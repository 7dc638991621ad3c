"""The toy benchmark's ``oracle`` arm: exact pass rates of the weights that generate the next step's rollouts.

Issue 38, item 1. The arm is the core selector ``pass_rate_oracle`` (:mod:`bots_verl.core.ours.pass_rate_oracle`: the
``B`` tasks whose true pass rate is nearest p* = 0.5) with :class:`RolloutServerTruth` as its truth source
(``bots_verl.toy.arms.VARIANTS["oracle"]``). The rollouts and the GRPO update are every other arm's.

**Which weights.** The selector runs in its Ray actor
(:class:`bots_verl.integration.transport.selector_service.SelectorService`) and selects when verl's sync trainer fetches
the step's prompts. By then the trainer has synced the weights of the last update to the ``hf`` rollout server (verl's
``on_step_end`` after step t, ``on_init_end`` before step 1; resumed runs too), and those are the weights that generate
the step's rollouts. :class:`RolloutServerTruth` therefore computes the pass rates *inside the rollout server's
process*, on its model object (Ray's ``__ray_call__``), not from a checkpoint or a copy: the same parameters, dtype and
attention code the rollouts are sampled from. It also returns the server's weight version (verl's ``global_steps`` of
the last sync), which the selector logs as ``bots/oracle/truth_version``: ``t - 1`` at step ``t`` (tested in
``tests/toy/test_oracle.py``, which also compares the pass rates with those of the step's saved actor checkpoint).

**Exact pass rates.** The scorer accepts one response per task, the canonical answer, and the tokenizer spells it
one way, so a temperature-T sample is right with the product of the teacher-forced probabilities of the answer's
tokens and ``</s>`` at temperature T (:mod:`bots_verl.toy.likelihood`, the benchmark's exact evaluation). This holds
for ``top_p = 1`` and no ``top_k`` (the benchmark's settings) and a response budget that holds the answer and
``</s>`` (checked when ``response_length`` is given). The pool is batched by sequence length (less padding than
:func:`~bots_verl.toy.likelihood.answer_stats`' dataset order, ~40% less time here; the values agree to ~1e-6).

**Cost.** One forward pass over the pool per step in the rollout server's single thread, logged per step as
``bots/oracle/truth_ms`` (``bots/select_ms`` includes it). ``python -m bots_verl.toy.rollout_truth --data
runs/toy/data/pool.parquet --model runs/toy/data/models/policy`` measures it the same way outside a run
(:func:`measure`); the figures are in ``bots_verl/toy/README.md``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.toy.likelihood import answer_stats
from bots_verl.toy.tasks import Problem, parse_prompt
from bots_verl.toy.tokenizer import encode

logger = logging.getLogger(__name__)

__all__ = ["RolloutServerTruth", "exact_pass_rates", "main", "measure", "pool_problems", "server_pass_rates"]

#: problems per forward pass of the length-sorted pool (256 was the fastest of 256/512/1024 on the full pool)
BATCH_SIZE = 256


def pool_problems(data: str | Sequence[str], response_length: int | None = None) -> list[Problem]:
    """The toy problems of verl's training files, in dataset order (the selector's positions).

    verl's dataset concatenates ``data.train_files`` row by row; the toy benchmark filters nothing
    (``data.filter_overlong_prompts`` and ``data.train_max_samples`` off), so row ``i`` is position ``i``.

    Args:
        data: ``data.train_files``: a parquet file or a list of them.
        response_length: ``data.max_response_length``; when given, every answer plus ``</s>`` must fit in it.

    Raises:
        ValueError: a prompt that is not a toy problem, a ground truth other than its canonical answer, or an answer
            the response budget cannot hold (the likelihood would not be the pass rate).
    """
    import pyarrow.parquet as pq

    files = [data] if isinstance(data, str | Path) else list(data)
    problems: list[Problem] = []
    for path in files:
        table = pq.read_table(path, columns=["prompt", "reward_model"])
        for row, (messages, reward) in enumerate(
            zip(table.column("prompt").to_pylist(), table.column("reward_model").to_pylist(), strict=True)
        ):
            problem = parse_prompt(messages[-1]["content"])
            if str(reward["ground_truth"]) != problem.answer:
                raise ValueError(
                    f"{path} row {row}: ground truth {reward['ground_truth']!r} is not the answer of "
                    f"{problem.prompt!r} ({problem.answer!r}); the oracle needs the toy's canonical answers"
                )
            problems.append(problem)
    if response_length is not None:
        longest = max((len(encode("", p.answer)[0]) - 2 for p in problems), default=0)
        if longest > int(response_length):
            raise ValueError(
                f"the longest answer plus </s> is {longest} tokens, more than data.max_response_length="
                f"{response_length}: a truncated response is scored otherwise than its likelihood says"
            )
    return problems


def exact_pass_rates(
    model: Any, problems: Sequence[Problem], temperature: float = 1.0, batch_size: int = BATCH_SIZE
) -> np.ndarray:
    """The probability that one temperature-``temperature`` sample of ``model`` solves each problem.

    :func:`~bots_verl.toy.likelihood.answer_stats`' pass probabilities, computed on the problems sorted by sequence
    length (each batch is padded to its own longest row) and returned in the given order.
    """
    lengths = np.array([len(encode(p.prompt, p.answer)[0]) for p in problems])
    order = np.argsort(lengths, kind="stable")
    probs, _ = answer_stats(model, [problems[i] for i in order], batch_size=batch_size, temperature=temperature)
    out = np.empty(len(problems), dtype=np.float64)
    out[order] = probs
    return out


def server_pass_rates(
    server: Any, problems: Sequence[Problem], temperature: float, batch_size: int = BATCH_SIZE
) -> tuple[np.ndarray, int | None, float]:
    """Run inside the ``hf`` rollout server (``server.__ray_call__``): the pass rates under its current weights.

    Args:
        server: the :class:`~bots_verl.verl_cpu.hf_server.HFRolloutServer` instance (its ``model`` generates the
            rollouts; ``global_steps`` is the version of its weights).
        problems: the pool in position order.
        temperature: the rollout temperature.
        batch_size: problems per forward pass.

    Returns:
        ``(pass_rates, weight_version, compute_ms)``.
    """
    t0 = time.perf_counter()
    probs = exact_pass_rates(server.model, problems, temperature, batch_size)
    return probs, server.global_steps, (time.perf_counter() - t0) * 1e3


class RolloutServerTruth:
    """The ``oracle`` arm's truth source: each call, the exact pass rates under the rollout server's weights.

    Built by ``pass_rate_oracle`` on its first selection as ``RolloutServerTruth(num_tasks, **truth_args)``
    (hyperparameters ``truth_source="bots_verl.toy.rollout_truth:RolloutServerTruth"`` and ``truth_args``).

    Args:
        num_tasks: the pool size the selector was built for.
        data: ``data.train_files``.
        temperature: the rollout temperature (``actor_rollout_ref.rollout.temperature``).
        response_length: ``data.max_response_length`` (checked against the longest answer), or None.
        replica: the rollout replica whose server to ask (the CPU backend runs one).
        batch_size: problems per forward pass.

    Raises:
        ValueError: the files do not hold ``num_tasks`` toy problems (:func:`pool_problems`), or a temperature that is
            not positive.
    """

    def __init__(
        self,
        num_tasks: int,
        *,
        data: str | Sequence[str],
        temperature: float = 1.0,
        response_length: int | None = None,
        replica: int = 0,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        if not float(temperature) > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        self.problems = pool_problems(data, response_length)
        if len(self.problems) != num_tasks:
            raise ValueError(f"{data}: {len(self.problems)} problems, the selector's pool has {num_tasks}")
        self.temperature = float(temperature)
        self.replica = int(replica)
        self.batch_size = int(batch_size)
        self.compute_ms = float("nan")
        self._server: Any = None

    def _handle(self) -> Any:
        import ray

        from bots_verl.verl_cpu.hf_server import server_actor_name

        if self._server is None:
            name = server_actor_name(self.replica)
            try:
                self._server = ray.get_actor(name)
            except ValueError:
                # this process may sit in another namespace than the trainer's job (the selector actor's own)
                found = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"] == name]
                if len(found) != 1:
                    raise ValueError(
                        f"the oracle needs the hf rollout server {name!r} (trainer.device=cpu); found {found}"
                    ) from None
                self._server = ray.get_actor(name, namespace=found[0]["namespace"])
        return self._server

    def __call__(self) -> tuple[np.ndarray, int | None]:
        """``(pass_rates, weight_version)`` of the rollout server's current weights."""
        import ray

        server = self._handle()
        probs, version, self.compute_ms = ray.get(
            server.__ray_call__.remote(server_pass_rates, self.problems, self.temperature, self.batch_size)
        )
        logger.debug("oracle: pass rates of weight version %s in %.0f ms", version, self.compute_ms)
        return np.asarray(probs, dtype=np.float64), version


def measure(data: str | Sequence[str], model_dir: str | Path, repeat: int = 7, temperature: float = 1.0) -> dict:
    """Seconds :func:`exact_pass_rates` takes over the pool in one thread, as the rollout server runs it each step.

    Returns:
        ``{"tasks", "median_s", "min_s", "max_s", "loadavg"}`` (the machine's 1/5/15-minute load averages after).
    """
    import torch

    from bots_verl.toy.likelihood import load_model

    torch.set_num_threads(1)  # the server's setting (bots_verl.verl_cpu.hf_server)
    problems = pool_problems(data)
    model = load_model(model_dir)
    exact_pass_rates(model, problems[:BATCH_SIZE], temperature)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        exact_pass_rates(model, problems, temperature)
        times.append(time.perf_counter() - t0)
    return {
        "tasks": len(problems),
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "loadavg": os.getloadavg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bots_verl.toy.rollout_truth --data POOL --model POLICY``: the oracle's per-step cost on that pool."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.toy.rollout_truth", description=main.__doc__)
    parser.add_argument("--data", required=True, help="the pool: train.parquet or pool.parquet of a toy build")
    parser.add_argument("--model", required=True, help="a toy policy (e.g. runs/toy/data/models/policy)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    out = measure(args.data, args.model, args.repeat)
    load = ", ".join(f"{x:.1f}" for x in out["loadavg"])
    print(
        f"oracle pass rates of {out['tasks']} tasks, one thread: median {out['median_s']:.2f} s "
        f"(min {out['min_s']:.2f}, max {out['max_s']:.2f}) over {args.repeat}; load average {load}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
