"""Our variants of BOTS (not the paper's), each measured on the toy testbed, and the testbed's ceiling.

- :mod:`~bots_verl.core.ours.warm_start` and :mod:`~bots_verl.core.ours.lagged_evidence`: options every Beta
  selector takes (a warm start before step 1; evidence weighed by its age, for asynchronous training), written plainly
  in :mod:`~bots_verl.core.ours.ours_rules`;
- :mod:`~bots_verl.core.ours.bots_warm`: ``bots_warm``, paper BOTS with the warm start on;
- :mod:`~bots_verl.core.ours.noref_selectors`: ``bots_partial_ref`` and ``bots_noref``, BOTS with references on part
  of the pool or none, over the task graph (:mod:`bots_verl.core.task_graph`);
- :mod:`~bots_verl.core.ours.neighbour_evidence`: the ``neighbours`` evidence plug-in ``bots_noref`` uses;
- :mod:`~bots_verl.core.ours.pass_rate_oracle`: ``pass_rate_oracle``, the tasks nearest p* of the true pass rates
  (the toy testbed's ceiling).

Importing this package registers them. Variants that measured null were retired:
``recipes/toy/results/RETIRED.md``.
"""

from bots_verl.core.ours import bots_warm as _bots_warm  # noqa: F401
from bots_verl.core.ours import lagged_evidence as _lagged_evidence  # noqa: F401
from bots_verl.core.ours import neighbour_evidence as _neighbour_evidence  # noqa: F401
from bots_verl.core.ours import noref_selectors as _noref_selectors  # noqa: F401
from bots_verl.core.ours import pass_rate_oracle as _pass_rate_oracle  # noqa: F401
from bots_verl.core.ours import warm_start as _warm_start  # noqa: F401
