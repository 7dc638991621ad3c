"""verl 0.9.1 integration of BOTS, laid out by job (imports point down the list):

- :mod:`~bots_verl.integration.hooks`: the classes verl runs with BOTS in them (task runner, trainers, replay buffer).
- :mod:`~bots_verl.integration.transport`: selections from the selector service (a Ray actor) to verl's dataloader:
  the service, its client, the dispatch-order sampler, its checkpoint state, the in-flight ledger.
- :mod:`~bots_verl.integration.evidence`: TransferQueue rows to per-task successes, attempts and lags.
- :mod:`~bots_verl.integration.safety`: verl version pins, run fingerprints and the resume checks.

Heavy imports (ray, verl, transfer_queue) happen in the submodules, so the dry run's checks stay cheap.
"""
