"""BOTS without the full reference bill (beyond the paper): ``bots_noref`` and ``bots_partial_ref``.

The paper's implicit evidence (arXiv 2510.26374, Sec. 3.3) needs two reference models' pass rates on every task of
the pool. Both presets keep everything else of the paper's ``bots`` (Beta posteriors, Eq. 1 with lam = rho = 0.1,
Thompson sampling, p* = 0.5) and read the pool's task embeddings (``task_embeddings``, one row per task) through the
task graph (:mod:`bots_verl.core.task_graph`):

- ``bots_noref``: no reference columns at all; the implicit evidence is ``neighbours``
  (:mod:`bots_verl.core.ours.neighbour_evidence`), each step's explicit evidence carried to similar tasks.
- ``bots_partial_ref``: reference columns on a labelled subset of the pool, NaN elsewhere
  (``reference_nan="neighbours"``): the missing values are imputed from labelled similar tasks
  (:func:`~bots_verl.core.task_graph.impute_reference`), then the paper's interpolation evidence runs unchanged.
  Which tasks to label under a fixed budget: :func:`~bots_verl.core.task_graph.choose_labelled`.

The simulator's prediction for both: ``recipes/results/sim/noref_results.md``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from bots_verl.core.paper.bots_selectors import BetaPosteriorSelector
from bots_verl.core.selector_base import SELECTORS, Selector

logger = logging.getLogger(__name__)

__all__ = ["BOTSNoRefSelector", "BOTSPartialRefSelector"]


@SELECTORS.register("bots_noref", group="ours")
class BOTSNoRefSelector(BetaPosteriorSelector):
    """BOTS with ``neighbours`` evidence and rho = 0.3: no reference columns, needs task_embeddings (ours).

    rho, the weight of implicit evidence, defaults to 0.3 rather than the paper's 0.1: the ``neighbours`` prediction
    is built from the run's own rollouts and each unvisited task's neighbourhood, and on the simulator (``toy``
    preset, tuning seeds 100-103) rho = 0.3 and 0.5 reached Random's best accuracy in 0.57-0.60 of its steps where
    0.1 took 0.64-0.72 (``math``: within intervals of each other). ``bots_noref`` with ``rho=0.1`` is the paper's
    setting with this plug-in; both are in ``recipes/results/sim/noref_results.md``.
    """

    FIXED: ClassVar[dict[str, Any]] = {"evidence": "neighbours"}
    DEFAULTS: ClassVar[dict[str, Any]] = {**BetaPosteriorSelector.DEFAULTS, "rho": 0.3, **FIXED}


@SELECTORS.register("bots_partial_ref", group="ours")
class BOTSPartialRefSelector(BetaPosteriorSelector):
    """BOTS on references for part of the pool, the rest imputed over the task graph (reference_nan='neighbours')."""

    FIXED: ClassVar[dict[str, Any]] = {"reference_nan": "neighbours"}
    _BASE_DEFAULTS: ClassVar[dict[str, Any]] = {**Selector._BASE_DEFAULTS, **FIXED}
    needs_reference: ClassVar[bool] = True
