"""bots-verl: Bayesian Online Task Selection (BOTS, arXiv 2510.26374) for the verl RL framework.

Layers, imported in one direction only:

- :mod:`bots_verl.core`: the algorithm (Beta posteriors, evidence plug-ins, selectors); numpy only.
- :mod:`bots_verl.sim`: a CPU learning-dynamics simulator that drives any core selector.
- :mod:`bots_verl.integration`: verl/Ray glue (posterior actor, dataloader sampler, trainer subclass).
- :mod:`bots_verl.main`: the hydra entry point for real verl runs.

Importing ``bots_verl`` itself is cheap: it pulls in none of the heavy layers.
"""

__version__ = "0.1.0"
