"""The CPU backend's checks of the composed config, registered with the config layer when this module is imported.

``bots_verl.main`` imports it, so every path to ``check_config`` (``python -m bots_verl.main``, its dry run, the toy
benchmark's and the recipes' runs, the tests) runs them before Ray (:mod:`bots_verl.config.checks`):

- :func:`check_cpu_gloo_settings`: the ``cpu_gloo`` checkpoint engine's ``engine_kwargs`` and bucket size, through
  the engine's own check, so that an unknown key or a timeout that is not positive is refused here rather than 80 s
  into a run, inside the rollout's Ray worker;
- :func:`~bots_verl.verl_cpu.known_answers.check_known_answers`: the known-answer script, which the rollout server
  reads minutes into a run.

Light to import (omegaconf and the standard library): :mod:`.checkpoint_engine` imports torch and verl, which must not
pick a platform before the backend is active (:func:`bots_verl.verl_cpu.launch.activate`), so it is imported when a
config selects ``cpu_gloo``.
"""

from __future__ import annotations

import logging

from omegaconf import DictConfig, ListConfig, OmegaConf

from bots_verl.config.checks import register_config_check
from bots_verl.config.verl_checks import weight_sync_bucket_bytes
from bots_verl.verl_cpu.known_answers import check_known_answers
from bots_verl.verl_cpu.launch import CPU_CHECKPOINT_ENGINE

logger = logging.getLogger(__name__)

__all__ = ["check_cpu_gloo_settings"]


def check_cpu_gloo_settings(config: DictConfig) -> None:
    """With ``actor_rollout_ref.rollout.checkpoint_engine.backend=cpu_gloo``, its settings checked as the worker
    checks them (:func:`bots_verl.verl_cpu.checkpoint_engine.check_engine_settings`); other backends pass.

    Raises:
        ValueError: naming the key.
    """
    engine = config.actor_rollout_ref.rollout.get("checkpoint_engine", None) or {}
    if engine.get("backend", "naive") != CPU_CHECKPOINT_ENGINE:
        return
    from bots_verl.verl_cpu.checkpoint_engine import check_engine_settings

    kwargs = engine.get("engine_kwargs", None) or {}
    settings = kwargs.get(CPU_CHECKPOINT_ENGINE, None)
    if isinstance(settings, DictConfig | ListConfig):
        settings = OmegaConf.to_container(settings, resolve=True)
    check_engine_settings(weight_sync_bucket_bytes(config), {} if settings is None else settings)


register_config_check(check_cpu_gloo_settings)
register_config_check(check_known_answers)
