"""A fast learning-dynamics simulator of RL finetuning, to compare task selectors before spending a cluster.

Quick start::

    python -m bots_verl.sim --preset demo            # the main demo (about a minute on 2 cores)

    from bots_verl.sim import run_experiment
    res = run_experiment("math", ["bots", "random", "oracle"], seeds=5, steps=300)
    print(res.table())

Model (each choice is argued in ``bots_verl/sim/README.md``):

- **Tasks** (:mod:`~bots_verl.sim.world`): a multidimensional 2PL item response model (Reckase 2009; Lord 1980).
  Task ``k`` has skill loadings ``w_k`` (a share ``shared_loading`` on a general skill plus a Dirichlet draw over
  specific skills), difficulty ``b_k``, discrimination ``a_k`` and the policy's own offset ``e_k``; the policy solves
  it with ``p_k = sigmoid(a_k (w_k . theta - b_k) + e_k + u_k)``. Tasks share skills, so training one moves others.
- **References**: weak and strong models with their own skill vectors and per-task noise (not copies of the policy);
  pass rates are ``Binomial(16, p) / 16`` as in GURU's ``qwen2.5_7b_pass_rate`` / ``qwen3_30b_pass_rate``. The pool
  is filtered as GURU did (Ma et al. 2025): drop tasks the weak model nearly always solves, tasks no reference solves,
  tasks where weak beats strong. The eval set is a held-out split of the same filtered distribution.
- **Learning** (:mod:`~bots_verl.sim.policy`): per trained group the signal is the reward std (GRPO: the
  policy gradient on a task's logit under group-normalised advantages is ``n * std``), zero for all-0 / all-1 groups.
  Skills move along ``sum_k signal_k a_k w_k`` with an Adam-like normalisation against a gradient-noise floor, linear
  headroom to a skill ceiling (diminishing returns) and slow forgetting; per-task memorisation ``u_k`` makes repeatedly
  trained tasks drift to ``p = 1`` without helping the eval set.
- **Selectors** run unchanged through the core API (``select`` / ``update``); the ``oracle`` sees the true ``p`` via
  the documented ``observe_truth`` hook (:mod:`~bots_verl.sim.oracle_selector`); the directions measured and not adopted
  for ``bots`` are in :mod:`~bots_verl.sim.ablation_selectors`. DAPO dynamic sampling is a loop option.
- **Metrics**: ETR per step, expected eval accuracy (noise-free unless ``eval_samples > 0``), TTB / BSF vs Random
  paired by seed, rollouts, selector overhead; intervals from :mod:`bots_verl.core.selection_metrics`.

Dependencies: numpy, plus matplotlib (plots) and tqdm (progress bar); no torch, verl or scipy.
"""

# Importing these registers the simulator's selectors (oracle, ablation directions) in SIM_SELECTORS.
from bots_verl.sim import ablation_selectors as _ablation_selectors  # noqa: F401
from bots_verl.sim.experiment import ExperimentResult, run_experiment
from bots_verl.sim.loop import RunResult, acc_metric, run_method
from bots_verl.sim.methods import SimMethod, parse_method
from bots_verl.sim.oracle_selector import OracleSelector
from bots_verl.sim.policy import Policy
from bots_verl.sim.scenario import PRESETS, ScenarioConfig, get_scenario
from bots_verl.sim.selector_registry import SIM_SELECTORS, make_selector
from bots_verl.sim.world import World, build_world

__all__ = [
    "PRESETS",
    "SIM_SELECTORS",
    "ExperimentResult",
    "SimMethod",
    "OracleSelector",
    "Policy",
    "RunResult",
    "ScenarioConfig",
    "World",
    "acc_metric",
    "build_world",
    "get_scenario",
    "make_selector",
    "parse_method",
    "run_experiment",
    "run_method",
]
