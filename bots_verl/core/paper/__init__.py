"""The paper's algorithm (BOTS, arXiv 2510.26374) and the baselines it is measured against.

Read in this order:

- :mod:`~bots_verl.core.paper.paper_rules`: every rule written plainly, one class, no optimisation (the reference the
  tests hold the fast code to);
- :mod:`~bots_verl.core.paper.posterior`: the Beta posteriors and their update, Eq. 1;
- :mod:`~bots_verl.core.paper.implicit_evidence`: the implicit-evidence plug-ins, ``interpolation`` (Sec. 3.3) and
  ``none``, and the :data:`EVIDENCE` registry every plug-in joins;
- :mod:`~bots_verl.core.paper.selection_rules`: Thompson sampling (Sec. 3.4) and the ``greedy`` / ``softmax``
  ablations;
- :mod:`~bots_verl.core.paper.bots_selectors`: the selector that puts them together, ``bots``, and the paper's
  ablation ``implicit_only``;
- :mod:`~bots_verl.core.paper.baselines`: ``random``, ``offline_easy2hard`` and ``sequential``.

Importing this package registers its selectors, plug-ins and rules.
"""

from bots_verl.core.paper import baselines as _baselines  # noqa: F401
from bots_verl.core.paper import bots_selectors as _bots_selectors  # noqa: F401
