"""Run logs shaped exactly as ``python -m bots_verl.main`` leaves them, without a GPU.

For each run: a recipe script records its argv (``RECIPE_ARGV_DIR``), the argv is composed into the entry point's
config, ``bots_verl.main._prepare_run_log`` writes ``meta.json`` (as ``run`` does before training), and verl's own
``FileLogger`` writes ``metrics.jsonl`` (``{"step": N, "data": {...}}``, as the trainer's tracker does, with the path
from ``VERL_FILE_LOGGER_PATH`` like ``BOTSTaskRunner`` sets it). A resumed run is written the way a restart writes it:
``runlog.rotate_metrics`` moves the first attempt's file aside as ``metrics.part0.jsonl``, then a new logger repeats
the steps after the last checkpoint. Only the numbers are made up (a GPU run would produce them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from recipe_argv import RECIPES, compose, record  # noqa: E402

#: verl's validation metrics of the two math eval sets (``val-core/<data_source>/acc/mean@<n>``)
VAL_SOURCES = ("math500", "aime24")
#: keys that differ between two seeds of one recipe run (SEED enters the run name and the seeds only)
SEED_KEYS = {"data.seed", "bots.seed", "trainer.experiment_name", "trainer.default_local_dir", "bots.run_log.dir"}


def recipe_runs(
    script: str, out: Path, seeds: tuple[int, ...], **env: str
) -> Iterator[tuple[str, int, Any, list[str]]]:
    """Yield ``(experiment, seed, config, argv)`` for every run ``script`` launches, once per seed (``argv``: the
    overrides the config is composed with, which the entry point hands the driver as hydra's task overrides).

    One config per run is composed (hydra's compose is the slow part); the other seeds' configs are that config with
    the seed-dependent keys set to what the recipe records for them, after checking that no other key differs. The
    same config object is updated in place from seed to seed, so use each one before asking for the next.
    """
    recorded = {
        seed: record(RECIPES / script, out / f"argv_s{seed}", Path("/nonexistent"), SEED=str(seed), **env)
        for seed in seeds
    }
    first = seeds[0]
    for (experiment, argv), config in zip(recorded[first].items(), compose(recorded[first].values()), strict=True):
        for seed in seeds:
            other = recorded[seed][experiment.replace(f"_s{first}", f"_s{seed}")]
            changed = {a.split("=", 1)[0] for a in set(argv) ^ set(other)}
            assert changed <= SEED_KEYS, changed
            for item in other:
                key, _, value = item.partition("=")
                if key in SEED_KEYS:
                    _set(config, key, value)
            yield experiment.replace(f"_s{first}", f"_s{seed}"), seed, config, other


def _set(cfg: Any, dotted: str, value: str) -> None:
    from omegaconf import OmegaConf

    node = cfg
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = OmegaConf.create({"v": value})["v"] if not value.isdigit() else int(value)


def write_verl_run(
    config: Any,
    run_root: Path,
    curve: dict[int, float],
    per_step: Callable[[int], dict[str, float]],
    total_steps: int,
    monkeypatch: pytest.MonkeyPatch,
    overrides: list[str],
    resume_from: int | None = None,
) -> Path:
    """Write one run's ``meta.json`` and ``metrics.jsonl`` as the entry point and verl would; return its directory.

    Args:
        config: the composed config of the run (its ``bots.run_log.dir`` is moved under ``run_root``).
        curve: eval step -> accuracy (logged for every validation source; step 0 is verl's ``val_before_train``).
        per_step: step -> the training metrics of that step (``bots/...``, ``timing_s/step``).
        total_steps: the run's budget (``trainer.total_training_steps``).
        monkeypatch: to point ``VERL_FILE_LOGGER_PATH`` at the run directory.
        overrides: the command line ``config`` was composed with (hydra's task overrides, as ``main`` passes them).
        resume_from: simulate a crash after ``resume_from + 1`` steps and a restart from the checkpoint at
            ``resume_from`` (the step after it is logged twice; the second attempt's values are kept).
    """
    from verl.utils.tracking import FileLogger

    from bots_verl import runlog
    from bots_verl.config.bots_config import read_bots_config
    from bots_verl.config.settings import resolve_settings
    from bots_verl.main import _prepare_run_log

    run_dir = run_root / Path(config.bots.run_log.dir).name
    config.bots.run_log.dir = str(run_dir)
    config.trainer.total_training_steps = total_steps
    _prepare_run_log(config, resolve_settings(read_bots_config(config), overrides), None)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(run_dir / runlog.METRICS_FILE))

    def val(step: int) -> dict[str, float]:
        return {f"val-core/{source}/acc/mean@1": curve[step] for source in VAL_SOURCES}

    def log_steps(steps: range, lost_after: int | None = None) -> None:
        tracker = FileLogger(config.trainer.project_name, config.trainer.experiment_name)
        for step in steps:
            if step == 0:
                tracker.log(val(0), step=0)
                continue
            data = dict(per_step(step))
            if lost_after is not None and step > lost_after:
                data = {k: v + 1000.0 for k, v in data.items()}  # logged, but its checkpoint was never written
            if step in curve:
                data.update(val(step))  # verl merges the step's validation metrics into its one log call
            tracker.log(data, step=step)
        tracker.finish()

    if resume_from is None:
        log_steps(range(total_steps + 1))
    else:
        log_steps(range(resume_from + 2), lost_after=resume_from)  # the attempt that crashed
        runlog.rotate_metrics(run_dir)  # what BOTSTaskRunner.run does when the run restarts
        log_steps(range(resume_from + 1, total_steps + 1))
    return run_dir
