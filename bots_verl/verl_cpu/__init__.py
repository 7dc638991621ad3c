"""A CPU backend for verl 0.9.1: train with verl's real trainer on CPU cores, no accelerator.

Selected with ``trainer.device=cpu`` (and ``actor_rollout_ref.rollout.name=hf``, its default there) on
``python -m bots_verl.main``, which applies the CPU settings, sets the environment and starts Ray (:mod:`.launch`).
Every Ray process then imports :mod:`.register` through verl's ``VERL_USE_EXTERNAL_MODULES`` with
``VERL_PLATFORM=cpu``, which registers:

- the ``cpu`` platform (:mod:`.platform`): device ``cpu``, gloo, a ``torch.cuda`` stand-in (:mod:`.device`);
- verl's FSDP engines for device ``cpu`` and the ``hf`` rollout (:mod:`.verl_registrations`): a ``RolloutReplica``
  whose server actor (:mod:`.hf_server`) batches concurrent requests and generates with transformers
  (:mod:`.sampling`), plus the ``BaseRollout`` adapter that hands it the trainer's weights (:mod:`.hf_rollout`);
- the ``cpu_gloo`` checkpoint engine (:mod:`.checkpoint_engine`): the weight sync of verl's ``separate_async``
  trainer, from the actor to a standalone ``hf`` replica, broadcast in buckets over gloo;
- two compat fixes (:mod:`.compat`): plain gloo process groups and unpinned reference-model offload.

The driver (``bots_verl.main``) imports :mod:`.config_checks`, which registers the backend's checks of the composed
config with the config layer (:mod:`bots_verl.config.checks`): the ``cpu_gloo`` settings and the known-answer script.

The CPU settings also select the agent-loop manager of :mod:`.agent_loop` (verl's TransferQueue manager, with one
reward call and one TransferQueue write per prompt group instead of per rollout, writing the same records). Everything
else (TransferQueue, agent loop, reward loop, replay buffer, FSDP, checkpoints, the weight-sync manager) is verl's
own code. The private verl names this relies on are pinned in :mod:`bots_verl.integration.safety.verl_pins`. This
package's
``__init__`` imports nothing, so the rollout server process (which needs only torch and transformers) stays light.
"""
