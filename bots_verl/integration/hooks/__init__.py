"""verl hooks: the task runner, the sync and async trainers and the replay buffer, verl's classes with BOTS in them.

They call down into :mod:`~bots_verl.integration.transport` (selections), :mod:`~bots_verl.integration.evidence`
(outcomes) and :mod:`~bots_verl.integration.safety` (resume checks); the verl internals they override are pinned in
:mod:`bots_verl.integration.safety.verl_pins`.
"""
