"""Held-out accuracy of a training run's checkpoints, exactly (no sampling), written into its run log.

verl's own validation samples one response per held-out prompt through the rollout server; on a 2-core CPU that
costs as much as several training steps and adds sampling noise. For the toy task the expected accuracy at
temperature 1 is known exactly from one teacher-forced forward pass (:mod:`bots_verl.toy.likelihood`), so the
benchmark saves the actor every few steps, reads each checkpoint's weights into the policy's transformers model and
appends ``{"step": k, "data": {TOY_EXACT_METRIC: accuracy, ...}}`` lines to the run's ``metrics.jsonl``
(:mod:`bots_verl.runlog`; ``analysis`` merges lines of one step metric by metric).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl import runlog
from bots_verl.runlog import TOY_EXACT_METRIC, TOY_GREEDY_METRIC, TOY_POOL_METRIC
from bots_verl.toy.likelihood import answer_stats, load_model
from bots_verl.toy.tasks import Problem

logger = logging.getLogger(__name__)

__all__ = ["checkpoint_steps", "evaluate_checkpoints", "load_actor"]

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


def evaluate_checkpoints(
    run_dir: str | Path,
    ckpt_dir: str | Path,
    model_dir: str | Path,
    problems: Sequence[Problem],
    pool: Sequence[Problem] = (),
) -> dict[int, dict[str, float]]:
    """Evaluate the starting model (step 0) and every checkpoint not yet in the run log; append them to it.

    A rerun evaluates only the steps whose lines are missing, so an interrupted benchmark resumes.

    Args:
        run_dir: the run log directory (``bots.run_log.dir``).
        ckpt_dir: verl's ``trainer.default_local_dir``.
        model_dir: the model the run started from.
        problems: the held-out tasks (:data:`~bots_verl.runlog.TOY_EXACT_METRIC`,
            :data:`~bots_verl.runlog.TOY_GREEDY_METRIC`).
        pool: the training tasks (:data:`~bots_verl.runlog.TOY_POOL_METRIC`); empty: not evaluated.

    Returns:
        ``{step: {metric: value}}`` of every evaluated step (old and new), ascending.
    """
    import torch

    torch.set_num_threads(1)
    run_dir = Path(run_dir)
    done: dict[int, dict[str, float]] = {}
    if runlog.metrics_files(run_dir):
        for step, data in runlog.iter_metrics(run_dir):
            if TOY_EXACT_METRIC in data:
                done[step] = {
                    k: float(data[k]) for k in (TOY_EXACT_METRIC, TOY_GREEDY_METRIC, TOY_POOL_METRIC) if k in data
                }
    todo = [s for s in [0, *checkpoint_steps(ckpt_dir)] if s not in done]
    if todo:
        with (run_dir / runlog.METRICS_FILE).open("a") as out:
            for step in todo:
                step_dir = Path(ckpt_dir) / f"global_step_{step}"
                model = load_actor(step_dir, model_dir) if step else load_model(model_dir)
                done[step] = _accuracy(model, problems, pool)
                out.write(json.dumps({"step": step, "data": done[step]}) + "\n")
                out.flush()
                logger.info("%s step %d: held-out accuracy %.4f", run_dir.name, step, done[step][TOY_EXACT_METRIC])
    return dict(sorted(done.items()))
