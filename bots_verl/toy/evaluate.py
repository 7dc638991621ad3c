"""Held-out accuracy of a training run's checkpoints, written into its run log.

verl's own validation samples one response per held-out prompt through the rollout server; on a 2-core CPU that
costs as much as several training steps and adds sampling noise. For the toy arithmetic task the expected accuracy at
temperature 1 is known exactly from one teacher-forced forward pass (:mod:`bots_verl.toy.likelihood`), so the
benchmark saves the actor every few steps, reads each checkpoint's weights into the policy's transformers model and
appends ``{"step": k, "data": {TOY_EXACT_METRIC: accuracy, ...}}`` lines to the run's ``metrics.jsonl``
(:mod:`bots_verl.runlog`; ``analysis`` merges lines of one step metric by metric).

The code and logic families' rewards accept more than the canonical answer: their accuracy is the canonical answer's
exact likelihood plus a sampled non-canonical remainder (:mod:`bots_verl.toy.heldout`), logged under
:func:`~bots_verl.runlog.toy_heldout_key` with its parts and standard error (:func:`heldout_metric` names the
accuracy's key for a model). The family is the one the model was warmed up for (its ``warmup.json``), the response
budget the build's (its ``manifest.json``), the sampling seed the run's (its ``meta.json``) and the checkpoint step,
so the benchmark passes nothing more than for arithmetic.

An estimate keeps about one core busy (one generating thread, then the sandboxes), so a code or logic run's
checkpoints are evaluated ``jobs`` at a time in spawned processes, each with one torch thread as here: a step's figures
do not depend on which process evaluated it, and the lines are written in step order.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl import runlog
from bots_verl.runlog import (
    TOY_CANONICAL_PART,
    TOY_ESTIMATE_PART,
    TOY_ESTIMATE_SE_PART,
    TOY_EXACT_METRIC,
    TOY_GREEDY_METRIC,
    TOY_NONCANONICAL_PART,
    TOY_POOL_METRIC,
    toy_heldout_key,
    toy_pool_key,
)
from bots_verl.toy.likelihood import answer_stats, load_model
from bots_verl.toy.tasks import Problem

logger = logging.getLogger(__name__)

__all__ = ["checkpoint_steps", "evaluate_checkpoints", "heldout_metric", "load_actor", "model_family"]

_STEP_DIR = re.compile(r"^global_step_(\d+)$")


def checkpoint_steps(ckpt_dir: str | Path) -> list[int]:
    """The steps of the ``global_step_<k>`` checkpoints in verl's ``trainer.default_local_dir``, ascending."""
    root = Path(ckpt_dir)
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and p.is_dir())


def load_actor(step_dir: str | Path, model_dir: str | Path) -> Any:
    """The policy's transformers model with the weights of one verl actor checkpoint (one FSDP rank).

    Args:
        step_dir: ``<default_local_dir>/global_step_<k>``.
        model_dir: the model the run started from (architecture and config).

    Raises:
        ValueError: when the checkpoint is not a single-rank actor checkpoint or its keys do not fit the model.
    """
    import torch

    shards = sorted((Path(step_dir) / "actor").glob("model_world_size_*_rank_*.pt"))
    if len(shards) != 1 or not shards[0].name.startswith("model_world_size_1_"):
        raise ValueError(f"{step_dir}: expected one single-rank actor shard, found {[p.name for p in shards]}")
    # FSDP shards pickle device meshes; the warning it logs on every load says nothing about the values
    logging.getLogger("torch.distributed.device_mesh").setLevel(logging.ERROR)
    state = torch.load(shards[0], map_location="cpu", weights_only=False)
    state = {k: (v.to_local() if hasattr(v, "to_local") else v) for k, v in state.items()}
    model = load_model(model_dir)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # a tied output layer is not a separate tensor in either state dict
    missing = [k for k in missing if not (k == "lm_head.weight" and model.config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(
            f"{shards[0]}: keys do not fit {model_dir}: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    return model


def _accuracy(model: Any, problems: Sequence[Problem], pool: Sequence[Problem]) -> dict[str, float]:
    p, greedy = answer_stats(model, problems)
    out = {TOY_EXACT_METRIC: float(np.mean(p)), TOY_GREEDY_METRIC: float(np.mean(greedy))}
    if pool:
        out[TOY_POOL_METRIC] = float(np.mean(answer_stats(model, pool)[0]))
    return out


def model_family(model_dir: str | Path) -> str:
    """The task family a toy model was warmed up for (its ``warmup.json``; arithmetic's names none).

    Raises:
        ValueError: when ``model_dir`` has no readable ``warmup.json`` (not a toy build's model).
    """
    path = Path(model_dir) / "warmup.json"
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))["spec"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: no toy warm-up record ({err}); evaluate a model of a toy build") from err
    return str(spec.get("family", "arith"))


def family_heldout_metric(family: str) -> str:
    """The run-log key of the held-out accuracy :func:`evaluate_checkpoints` logs for runs of task family ``family``:
    arithmetic's exact accuracy, the other families' estimate."""
    from bots_verl.toy.families import family_of

    if family == "arith":
        return TOY_EXACT_METRIC
    return toy_heldout_key(family_of(family).data_source, TOY_ESTIMATE_PART)


def heldout_metric(model_dir: str | Path) -> str:
    """The run-log key of the held-out accuracy :func:`evaluate_checkpoints` logs for runs from ``model_dir``."""
    return family_heldout_metric(model_family(model_dir))


def _logged_keys(family: str) -> tuple[str, ...]:
    """The keys one evaluation logs: the held-out accuracy first."""
    from bots_verl.toy.families import family_of

    if family == "arith":
        return TOY_EXACT_METRIC, TOY_GREEDY_METRIC, TOY_POOL_METRIC
    source = family_of(family).data_source
    parts = (TOY_ESTIMATE_PART, TOY_CANONICAL_PART, TOY_NONCANONICAL_PART, TOY_ESTIMATE_SE_PART)
    return *(toy_heldout_key(source, part) for part in parts), toy_pool_key(source, TOY_CANONICAL_PART)


def _sampling_settings(run_dir: Path, model_dir: Path) -> tuple[int, int]:
    """``(run seed, response budget)`` of a code or logic run: its ``meta.json``'s seed, its build's budget."""
    meta_seed = runlog.read_meta(run_dir).get("seed")
    manifest = Path(model_dir).parents[1] / "manifest.json"
    try:
        budget = json.loads(manifest.read_text(encoding="utf-8"))["artifacts"]["max_response_length"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{manifest}: the build records no response budget (artifacts.max_response_length): {err}"
        ) from err
    if isinstance(meta_seed, bool) or not isinstance(meta_seed, int):
        raise ValueError(f"{run_dir / runlog.META_FILE}: the run's seed is {meta_seed!r}, not an integer")
    return meta_seed, int(budget)


def _estimated(
    model: Any, problems: Sequence[Any], pool: Sequence[Any], family: str, budget: int, seed: int, step: int
) -> dict[str, float]:
    from bots_verl.toy.families import family_of
    from bots_verl.toy.heldout import estimate_accuracy
    from bots_verl.toy.tokenizer import vocab_of

    source = family_of(family).data_source
    found = estimate_accuracy(model, problems, family, max_tokens=budget, run_seed=seed, step=step)
    out = found.metrics(source)
    if pool:
        pool_p = answer_stats(model, pool, vocab=vocab_of(family))[0]
        out[toy_pool_key(source, TOY_CANONICAL_PART)] = float(np.mean(pool_p))
    return out


def evaluate_checkpoints(
    run_dir: str | Path,
    ckpt_dir: str | Path,
    model_dir: str | Path,
    problems: Sequence[Problem],
    pool: Sequence[Problem] = (),
    jobs: int = 1,
) -> dict[int, dict[str, float]]:
    """Evaluate the starting model (step 0) and every checkpoint not yet in the run log; append them to it.

    A rerun evaluates only the steps whose lines are missing, so an interrupted benchmark resumes.

    Arithmetic's figures are exact (``_accuracy``); a code or logic model's are estimated by sampling
    (:mod:`bots_verl.toy.heldout`), seeded by the run's seed and the step, so a resumed evaluation is identical.

    Args:
        run_dir: the run log directory (``bots.run_log.dir``; a code or logic run's ``meta.json`` gives the seed).
        ckpt_dir: verl's ``trainer.default_local_dir``.
        model_dir: the model the run started from (``<build>/models/<name>``; its family and the build's budget).
        problems: the held-out tasks (:data:`~bots_verl.runlog.TOY_EXACT_METRIC`,
            :data:`~bots_verl.runlog.TOY_GREEDY_METRIC`; code and logic: :func:`heldout_metric` and its parts).
        pool: the training tasks (:data:`~bots_verl.runlog.TOY_POOL_METRIC`; code and logic: the canonical
            answers' likelihood, a lower bound); empty: not evaluated.
        jobs: code and logic: checkpoints evaluated at a time, each in a spawned process (module docstring); the
            figures are the same for any value.

    Returns:
        ``{step: {metric: value}}`` of every evaluated step (old and new), ascending.

    Raises:
        ValueError: a model without its warm-up record; a code or logic run without its seed or build budget.
    """
    import torch

    torch.set_num_threads(1)
    run_dir = Path(run_dir)
    family = model_family(model_dir)
    keys = _logged_keys(family)
    done: dict[int, dict[str, float]] = {}
    if runlog.metrics_files(run_dir):
        for step, data in runlog.iter_metrics(run_dir):
            if keys[0] in data:
                done[step] = {k: float(data[k]) for k in keys if k in data}
    todo = [s for s in [0, *checkpoint_steps(ckpt_dir)] if s not in done]
    if not todo:
        return dict(sorted(done.items()))
    # arithmetic's exact figures take a second or two a step: not worth a process's start
    sampling = None if family == "arith" else _sampling_settings(run_dir, Path(model_dir))
    jobs = 1 if sampling is None else max(1, min(jobs, len(todo)))
    one = partial(
        _evaluate_step, ckpt_dir=str(ckpt_dir), model_dir=str(model_dir), family=family, problems=problems,
        pool=pool, sampling=sampling,
    )  # fmt: skip
    with _step_map(jobs) as map_steps, (run_dir / runlog.METRICS_FILE).open("a") as out:
        for step, figures in zip(todo, map_steps(one, todo), strict=True):
            done[step] = figures
            out.write(json.dumps({"step": step, "data": figures}) + "\n")
            out.flush()
            logger.info("%s step %d: held-out accuracy %.4f", run_dir.name, step, figures[keys[0]])
    return dict(sorted(done.items()))


def _evaluate_step(
    step: int,
    *,
    ckpt_dir: str,
    model_dir: str,
    family: str,
    problems: Sequence[Any],
    pool: Sequence[Any],
    sampling: tuple[int, int] | None,
) -> dict[str, float]:
    """One step's figures (module level: it runs in a spawned process too); ``sampling``: ``(run seed, budget)`` of a
    code or logic run, None for arithmetic."""
    model = load_actor(Path(ckpt_dir) / f"global_step_{step}", model_dir) if step else load_model(model_dir)
    if sampling is None:
        return _accuracy(model, problems, pool)
    seed, budget = sampling
    return _estimated(model, problems, pool, family, budget, seed, step)


def _start_worker(level: int, fmt: str | None) -> None:
    import torch

    torch.set_num_threads(1)  # as in the parent: a sample does not depend on the threads that computed it
    logging.basicConfig(level=level, format=fmt)


@contextmanager
def _step_map(jobs: int) -> Iterator[Any]:
    """A ``map(fn, steps)`` yielding results in order: this process's own with one job, else a pool of ``jobs``
    spawned processes that logs as this process does. On any exit the steps not started are cancelled."""
    if jobs == 1:
        yield map
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    executor = ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(root.getEffectiveLevel(), getattr(formatter, "_fmt", None)),
    )
    try:
        yield executor.map
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
