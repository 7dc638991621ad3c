"""verl 0.9.1 integration of BOTS: posterior Ray actor, torchdata sampler, trainer subclass and task runner.

Heavy imports (ray, verl, transfer_queue) happen in the submodules, so ``bots_verl.integration.settings`` stays cheap
for dry runs.
"""
