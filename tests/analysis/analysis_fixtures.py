"""Hand-made run logs with known answers for the analysis tests.

The ``known`` fixture (``conftest.py``) writes one domain ("math", 8 steps, evaluations every 2 steps) with two
seeds each of ``random``, ``bots`` and ``offline_easy2hard``. The expected values, worked out by hand in
``test_tables.py``, follow from these accuracy curves. Validation metrics are written on their own lines, as verl
does, so the loader must merge them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bots_verl.runlog import RunWriter

ACC = "val-core/math500/acc/mean@4"
EVAL_STEPS = (0, 2, 4, 6, 8)

#: accuracy at EVAL_STEPS, per (method, seed)
CURVES = {
    ("random", 0): (0.1, 0.2, 0.3, 0.4, 0.5),
    ("random", 1): (0.1, 0.2, 0.4, 0.4, 0.8),
    ("bots", 0): (0.1, 0.3, 0.5, 0.5, 0.6),
    ("bots", 1): (0.2, 0.2, 0.4, 0.6, 0.7),
    ("offline_easy2hard", 0): (0.0, 0.1, 0.2, 0.3, 0.4),
    ("offline_easy2hard", 1): (0.0, 0.1, 0.2, 0.3, 0.4),
}
#: rollouts per training step and per-step ETR, per method
ROLLOUTS = {"random": 64.0, "bots": 96.0, "offline_easy2hard": 64.0}
ETR = {
    ("random", 0): 0.25,
    ("random", 1): 0.35,
    ("bots", 0): 0.8,
    ("bots", 1): 0.6,
    ("offline_easy2hard", 0): 0.5,
    ("offline_easy2hard", 1): 0.5,
}


def write_run(
    root: Path,
    method: str,
    seed: int,
    curve: tuple[float, ...],
    *,
    domain: str = "math",
    total_steps: int = 8,
    rollouts: float | None = 64.0,
    etr: float | None = 0.5,
    step_seconds: float | None = None,
    hparams: dict[str, Any] | None = None,
    eval_steps: tuple[int, ...] = EVAL_STEPS,
    acc_metric: str = ACC,
    model: str = "test",
    per_step: dict[str, float] | None = None,
) -> Path:
    """Write one run under ``root/<domain>/<method>/seed<k>``; validation lines are separate from training lines.

    ``per_step`` adds metrics logged at every training step (e.g. selection timings).
    """
    run_dir = root / domain / method / f"seed{seed}"
    with RunWriter(
        run_dir,
        run_id=f"{domain}-{method}-{seed}",
        source="sim",
        domain=domain,
        model=model,
        method=method,
        seed=seed,
        hparams=hparams or {},
        total_steps=total_steps,
    ) as writer:
        evals = dict(zip(eval_steps, curve, strict=True))
        for step in range(0, total_steps + 1):
            if step > 0:
                data: dict[str, float] = {"bots/select_ms": 1.0}
                if rollouts is not None:
                    data["bots/rollouts"] = rollouts
                if etr is not None:
                    data["bots/batch/effective_task_ratio"] = etr
                if step_seconds is not None:
                    data["timing_s/step"] = step_seconds
                data.update(per_step or {})
                writer.log(step, data)
            if step in evals:
                writer.log(step, {acc_metric: evals[step]})
    return run_dir
