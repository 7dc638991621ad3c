"""Other published task selectors, on the same selector API: ``mopps``, ``greso`` and ``dps``.

- :mod:`~bots_verl.core.peers.mopps`: MoPPS, the paper's Beta posteriors with explicit evidence only;
- :mod:`~bots_verl.core.peers.greso`: GRESO (arXiv 2506.02177), pre-rollout skipping of zero-variance tasks;
- :mod:`~bots_verl.core.peers.dps`: DPS (arXiv 2603.10887), a per-task hidden Markov model of solving states.

Importing this package registers them.
"""

from bots_verl.core.peers import dps as _dps  # noqa: F401
from bots_verl.core.peers import greso as _greso  # noqa: F401
from bots_verl.core.peers import mopps as _mopps  # noqa: F401
