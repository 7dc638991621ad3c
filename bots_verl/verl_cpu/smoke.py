"""``make smoke``: train a tiny model with BOTS in verl's real trainer on CPU, resume it, and check the resume is exact.

``python -m bots_verl.verl_cpu.smoke [--workdir DIR] [--steps 4] [--save-step 2]``:

1. builds the toy model, tokenizer and task pool locally (:mod:`.toy`; nothing from a hub);
2. **run A** (one process, ``python -m bots_verl.main trainer.device=cpu ...``): ``--steps`` GRPO steps with
   ``bots.selector=bots`` and the two reference columns, saving checkpoints at ``--save-step`` and at the end;
3. **run B** (a second process): starts from A's step-``--save-step`` checkpoint (copied to its own directory) and
   trains to ``--steps``;
4. compares B's final checkpoint with A's: the tasks selected at every step (the sampler's dispatch log in
   ``data.pt``), the posterior (the selector's whole state: alpha, beta, evidence plug-in, RNG), the rollouts the
   posterior received, and the model and optimizer weights, all bit for bit.

Prints one line, ``smoke ok: ...`` (steps, rollouts seen by the posterior, resume identical, seconds) and exits 0,
or ``smoke FAILED: ...`` with the reason and exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["compare_checkpoints", "main", "run_training"]

ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "HYDRA_FULL_ERROR": "1"}


def run_training(overrides: list[str], cwd: Path, log: Path, timeout: float) -> None:
    """Run ``python -m bots_verl.main <overrides>`` in ``cwd``; its output goes to ``log``.

    Raises:
        RuntimeError: with the log's tail, when the run fails or times out.
    """
    env = {**os.environ, **{k: os.environ.get(k, v) for k, v in ENV.items()}}
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "bots_verl.main", *overrides],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"training timed out after {timeout:.0f} s; log: {log}") from exc
    if proc.returncode != 0:
        tail = log.read_text()[-4000:]
        raise RuntimeError(f"training exited with {proc.returncode} (log: {log}):\n{tail}")


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where two nested states differ (tensors and arrays compared exactly)."""
    import numpy as np
    import torch

    if hasattr(a, "to_local"):  # DTensor shards of FSDP checkpoints
        a, b = a.to_local(), b.to_local()
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return [path or "/"]
        return [d for k in a for d in _differences(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return [path or "/"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    if isinstance(a, torch.Tensor):
        return [] if isinstance(b, torch.Tensor) and torch.equal(a, b) else [path]
    if isinstance(a, np.ndarray):
        return [] if isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b) else [path]
    return [] if a == b else [path]


def compare_checkpoints(ckpt_a: Path, ckpt_b: Path, step: int) -> dict[str, Any]:
    """Compare two runs' ``global_step_<step>`` checkpoints.

    The actor's model, optimizer and learning-rate scheduler state are compared; the process RNG states that verl
    also saves (``extra_state.rng``: torch, numpy and Python ``random`` of the training process) are not: Python and
    numpy seed them from OS entropy in every fresh process and this training draws nothing from them (two fresh runs
    end with identical weights and different RNG states).

    Returns:
        ``selections`` / ``posterior`` / ``weights`` (lists of differing paths, empty when identical), plus
        ``dispatch_log`` and ``attempts`` of run A.
    """
    import torch

    from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state

    # torch warns about pickled device meshes on every load of an FSDP shard; irrelevant for reading values
    logging.getLogger("torch.distributed.device_mesh").setLevel(logging.ERROR)
    a = checkpoint_sampler_state(ckpt_a / f"global_step_{step}" / "data.pt")
    b = checkpoint_sampler_state(ckpt_b / f"global_step_{step}" / "data.pt")
    weights = []
    for name in sorted(p.name for p in (ckpt_a / f"global_step_{step}" / "actor").glob("*_world_size_*.pt")):
        wa = torch.load(ckpt_a / f"global_step_{step}" / "actor" / name, weights_only=False)
        wb = torch.load(ckpt_b / f"global_step_{step}" / "actor" / name, weights_only=False)
        if name.startswith("extra_state"):
            wa, wb = ({k: v for k, v in w.items() if k != "rng"} for w in (wa, wb))
        weights += [f"{name}{d}" for d in _differences(wa, wb)]
    return {
        "selections": _differences(a["dispatch_log"], b["dispatch_log"]),
        "posterior": _differences(a["selector_state"], b["selector_state"])
        + _differences([a["updates"], a["attempts"]], [b["updates"], b["attempts"]]),
        "weights": weights,
        "dispatch_log": a["dispatch_log"],
        "attempts": a["attempts"],
    }


def resume_copy(ckpt_src: Path, ckpt_dst: Path, step: int) -> None:
    """Make ``ckpt_dst`` hold ``ckpt_src``'s step-``step`` checkpoint as its latest one."""
    ckpt_dst.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ckpt_src / f"global_step_{step}", ckpt_dst / f"global_step_{step}")
    (ckpt_dst / "latest_checkpointed_iteration.txt").write_text(str(step))


def smoke(work: Path, steps: int, save_step: int, timeout: float) -> str:
    """Run the smoke test in ``work``; returns the summary line.

    Raises:
        RuntimeError: when a run fails or the resumed run differs.
    """
    from bots_verl.verl_cpu.addition_task import build_toy, toy_overrides

    start = time.monotonic()
    paths = build_toy(work / "toy")
    common = [*toy_overrides(paths), f"trainer.total_training_steps={steps}", f"trainer.save_freq={save_step}"]
    run_training(
        [*common, f"trainer.default_local_dir={work / 'a' / 'ckpt'}", f"bots.run_log.dir={work / 'a' / 'run'}"],
        work,
        work / "a.log",
        timeout,
    )
    resume_copy(work / "a" / "ckpt", work / "b" / "ckpt", save_step)
    run_training(
        [*common, f"trainer.default_local_dir={work / 'b' / 'ckpt'}", f"bots.run_log.dir={work / 'b' / 'run'}"],
        work,
        work / "b.log",
        timeout,
    )
    result = compare_checkpoints(work / "a" / "ckpt", work / "b" / "ckpt", steps)
    seconds = time.monotonic() - start
    resumed_steps = [s for s, _ in result["dispatch_log"] if s > save_step]
    if len(result["dispatch_log"]) != steps or resumed_steps != list(range(save_step + 1, steps + 1)):
        raise RuntimeError(f"dispatch log covers steps {[s for s, _ in result['dispatch_log']]}, not 1..{steps}")
    different = {k: result[k] for k in ("selections", "posterior", "weights") if result[k]}
    identical = "yes" if not different else "no"
    summary = (
        f"steps={steps} (second process resumed at step {save_step + 1}), rollouts seen by the posterior="
        f"{result['attempts']:.0f}, resume identical={identical} (selections, posterior, weights), "
        f"seconds={seconds:.0f}"
    )
    if different:
        raise RuntimeError(f"{summary}; differs: {different}")
    return summary


def main(argv: list[str] | None = None) -> None:
    """Command line (``make smoke``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default=None, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--save-step", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per training process")
    args = parser.parse_args(argv)
    if not 1 <= args.save_step < args.steps:
        parser.error("need 1 <= --save-step < --steps")
    with tempfile.TemporaryDirectory(prefix="bots_smoke_") as tmp:
        work = Path(args.workdir or tmp).resolve()
        work.mkdir(parents=True, exist_ok=True)
        try:
            summary = smoke(work, args.steps, args.save_step, args.timeout)
        except RuntimeError as exc:
            print(f"smoke FAILED: {exc}")
            sys.exit(1)
    print(f"smoke ok: {summary}")


if __name__ == "__main__":
    main()
