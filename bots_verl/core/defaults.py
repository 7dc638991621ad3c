"""The paper's hyperparameters in one place (BOTS, arXiv 2510.26374, Sec. 4, and the authors' ``bots.yaml``).

Every module that states a BOTS default reads it here: the plain rules (:mod:`bots_verl.core.paper.paper_rules`), the
selectors (:class:`~bots_verl.core.paper.bots_selectors.BetaPosteriorSelector`), the interpolation plug-in
(:mod:`bots_verl.core.paper.implicit_evidence`), the selection rules, the run-log method labels
(:mod:`bots_verl.runlog`), the ``bots:`` config section (``bots_trainer.yaml`` shows :data:`PAPER_BOTS` in its
comments; :mod:`bots_verl.config.bots_config`) and the tables (``analysis/tables.py``). Standard library only.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

__all__ = [
    "ALPHA0",
    "BETA0",
    "DEGENERATE_TOL",
    "EVIDENCE",
    "GAMMA",
    "LAM",
    "PAPER_BOTS",
    "RHO",
    "ROLLOUTS_PER_TASK",
    "SELECTION",
    "SELECTOR",
    "TARGET",
    "WARM_START_MU",
    "WARM_START_WEIGHT",
]

#: ``lam`` (λ in Eq. 1): how much the posterior forgets toward the prior each step (authors' ``lamb``).
LAM = 0.1
#: ``rho`` (ρ in Eq. 1): the weight of implicit against explicit evidence.
RHO = 0.1
#: ``target`` (p*, Sec. 3.4): the success probability a selected task should have (authors' ``target_reward``).
TARGET = 0.5
#: ``gamma``: momentum of the interpolation's policy position ``mu`` (Sec. 3.3; the authors' code).
GAMMA = 0.9
#: The prior ``Beta(alpha0, beta0)`` every task starts at and Eq. 1 forgets toward.
ALPHA0 = 1.0
BETA0 = 1.0
#: The selection rule: Thompson sampling (authors' ``do_sample: true``).
SELECTION = "thompson"
#: The implicit evidence: interpolation between a weak and a strong reference.
EVIDENCE = "interpolation"
#: The selector that is the paper's method with all of the above.
SELECTOR = "bots"
#: Rollouts per selected task in the paper's experiments (GRPO's group size).
ROLLOUTS_PER_TASK = 16

#: Ours, not the paper's: a batch whose two reference means are closer than this leaves ``mu`` unchanged (0/0).
DEGENERATE_TOL = 1e-3
#: Ours, not the paper's: pseudo-counts at the weak reference before step 1 (0: the paper's cold start).
WARM_START_WEIGHT = 0.0
#: Ours, not the paper's: where between the references the warm start places the policy (0: the weak one).
WARM_START_MU = 0.0

#: The hyperparameters that make a Beta selector the paper's BOTS (the ``bots`` method label); also the keys that
#: ``bots_trainer.yaml`` declares under ``bots.hparams``, in its order, with these values in their comments.
PAPER_BOTS: MappingProxyType[str, Any] = MappingProxyType(
    {
        "lam": LAM,
        "rho": RHO,
        "target": TARGET,
        "evidence": EVIDENCE,
        "selection": SELECTION,
        "alpha0": ALPHA0,
        "beta0": BETA0,
    }
)
