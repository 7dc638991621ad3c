"""Scenario configuration: every knob of the simulated world, and the ``math`` / ``code`` / ``logic`` / ``toy``
presets.

A scenario fixes the task pool (size, difficulty, skill structure), the reference models that label it, the held-out
evaluation set and the learning dynamics of the policy. The modelling choices behind each knob are explained in
:mod:`bots_verl.sim` and ``bots_verl/sim/README.md``; this module only holds the numbers.

All quantities on a "logit" scale are in units of the policy's log-odds of solving a task.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["PRESETS", "ScenarioConfig", "get_scenario"]


@dataclass(frozen=True)
class ScenarioConfig:
    """The simulated world. Defaults are the ``math`` preset.

    Attributes:
        name: preset name; the eval metric is ``val-core/sim-<name>/acc/mean@1``.
        pool_size: training tasks kept after GURU-style filtering.
        eval_size: held-out tasks, drawn and filtered like the pool (a held-out split of the same distribution,
            unless ``eval_difficulty_shift`` / ``eval_difficulty_scale`` change it).
        eval_difficulty_shift: added to ``difficulty_mean`` for the eval set only (0: the pool's distribution). A
            benchmark drawn from a band of the pool's difficulties (the toy testbed's held-out cells) has its own
            difficulty mean and spread.
        eval_difficulty_scale: multiplies ``difficulty_sd`` for the eval set only (1: the pool's spread).
        num_skills: latent skill dimensions D; dimension 0 is a general skill shared by every task.
        shared_loading: share of every task's loading on the general skill, in [0, 1]; the main transfer knob
            (training on one task moves every task through this share).
        skill_concentration: Dirichlet concentration of the remaining loading over skills 1..D-1; small values give
            tasks that each rest on one specific skill (little transfer between families), large values diffuse loads.
        difficulty_mean, difficulty_sd: task difficulty b ~ Normal, on the logit scale, relative to the initial policy.
        discrimination_mean, discrimination_sd: discrimination a ~ LogNormal(log(mean), sd): how sharply the success
            probability turns from 0 to 1 as ability passes the difficulty.
        policy_task_noise: sd of the policy's own per-task logit offset (what no skill explains: a model family's
            idiosyncrasies). References do not see it, which is one source of reference miscalibration.
        ref_offsets: ability of each reference model above the initial policy, weak -> strong (one entry per
            reference column; at least 2). GURU: Qwen2.5-7B-Instruct, Qwen3-30B-A3B.
        ref_profile_noise: sd of each reference's per-skill deviation from a uniform offset (its own skill profile).
        ref_task_noise: sd of each reference's own per-task logit noise (independent between references).
        ref_rollouts: rollouts per task behind a reference pass rate (GURU: 16, so rates are multiples of 1/16).
        filter_weak_max: drop tasks whose weakest-reference rate is >= this (GURU: "the weak model nearly always
            solves it"); set > 1 to disable.
        filter_unsolved: drop tasks no reference solved once (GURU: "neither model solves it", likely broken).
        filter_inverted: drop tasks where the weakest reference beats the strongest (GURU: "suspicious").
        learning_rate: the largest skill step per step (logit units), reached when the gradient dwarfs its noise.
        grad_noise: RMS of the gradient noise (same units as the batch gradient norm). The optimiser divides each
            step by ``sqrt(running mean |grad|^2 + grad_noise^2)`` (Adam-like), so progress is proportional to the
            signal when the signal is small against the noise and saturates when it is large.
        adam_beta2: decay of that running mean (Adam's beta2).
        capacity: how far (logit units) each skill can rise above its start; gains shrink linearly to zero at the
            ceiling (diminishing returns of a fixed-size model).
        forgetting: per-step pull of the skills back toward their start (share of the gained ability lost per step).
        memorization_rate: per-task logit step per unit of that task's own signal (what does not transfer).
        memorization_forgetting: per-step decay of the memorised per-task offsets.
        signal: ``std`` (GRPO: advantages normalised by the group std, gradient on the task logit = n * std) or
            ``variance`` (Dr. GRPO / unnormalised advantages: n * variance).
        eval_samples: 0 = report the expected accuracy over the eval set (noise-free); k > 0 = sample k answers per
            eval task (mean@1 of k draws, with sampling noise like a real benchmark).
        embedding_dims: dimensions of the pool's task embeddings (:mod:`bots_verl.sim.pool_embeddings`), read only by
            what uses the task graph (``bots_noref``, partial references).
        embedding_noise: norm of the embeddings' per-dimension noise against a signal of norm about 1 (the
            signal-to-noise knob: 1 is a power ratio of 1, 0 noise-free).
        embedding_style: weight of a prompt "style" shared by unrelated tasks (a distractor, norm 1 per unit).
    """

    name: str = "math"
    pool_size: int = 4000
    eval_size: int = 500
    eval_difficulty_shift: float = 0.0
    eval_difficulty_scale: float = 1.0
    num_skills: int = 8
    shared_loading: float = 0.5
    skill_concentration: float = 0.5
    difficulty_mean: float = 2.5
    difficulty_sd: float = 2.5
    discrimination_mean: float = 2.5
    discrimination_sd: float = 0.3
    policy_task_noise: float = 2.0
    ref_offsets: tuple[float, ...] = (1.2, 3.0)
    ref_profile_noise: float = 0.3
    ref_task_noise: float = 1.0
    ref_rollouts: int = 16
    filter_weak_max: float = 15 / 16
    filter_unsolved: bool = True
    filter_inverted: bool = True
    learning_rate: float = 0.04
    grad_noise: float = 0.25
    adam_beta2: float = 0.99
    capacity: float = 1.5
    forgetting: float = 0.002
    memorization_rate: float = 0.4
    memorization_forgetting: float = 0.005
    signal: str = "std"
    eval_samples: int = 0
    embedding_dims: int = 64
    embedding_noise: float = 1.0
    embedding_style: float = 0.5
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.pool_size < 1 or self.eval_size < 1:
            raise ValueError("pool_size and eval_size must be positive")
        if self.num_skills < 2:
            raise ValueError("num_skills must be >= 2 (a general skill plus at least one specific skill)")
        if len(self.ref_offsets) < 2:
            raise ValueError("ref_offsets needs at least 2 reference models (weak -> strong)")
        if not 0.0 <= self.shared_loading <= 1.0:
            raise ValueError("shared_loading must be in [0, 1]")
        if self.signal not in ("std", "variance"):
            raise ValueError(f"signal must be 'std' or 'variance', got {self.signal!r}")
        if self.eval_difficulty_scale <= 0:
            raise ValueError("eval_difficulty_scale must be positive")
        if self.capacity <= 0 or self.skill_concentration <= 0 or self.discrimination_mean <= 0:
            raise ValueError("capacity, skill_concentration and discrimination_mean must be positive")
        if self.embedding_dims < 1 or self.embedding_noise < 0 or self.embedding_style < 0:
            raise ValueError("embedding_dims must be positive, embedding_noise and embedding_style non-negative")

    def replace(self, **changes: Any) -> ScenarioConfig:
        """A copy with some fields changed (validated); string values are parsed to the field's type."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = set(changes) - set(fields)
        if unknown:
            raise ValueError(f"unknown scenario fields {sorted(unknown)}; known: {sorted(fields)}")
        parsed = {k: _coerce(v, getattr(self, k)) for k, v in changes.items()}
        return dataclasses.replace(self, **parsed)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for ``meta.json``)."""
        out = dataclasses.asdict(self)
        out["ref_offsets"] = list(self.ref_offsets)
        return out


def _coerce(value: Any, like: Any) -> Any:
    """Parse ``value`` (possibly a CLI string) to the type of the current value ``like``."""
    if not isinstance(value, str) or isinstance(like, str):
        return tuple(value) if isinstance(like, tuple) else value
    if isinstance(like, bool):
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean, got {value!r}")
    if isinstance(like, tuple):
        return tuple(float(x) for x in value.replace("/", ",").split(",") if x.strip())
    return type(like)(float(value)) if isinstance(like, int) else type(like)(value)


# Presets. They differ in pool size, difficulty and transfer; what each is meant to resemble is in the README.
PRESETS: dict[str, ScenarioConfig] = {
    "math": ScenarioConfig(
        description="GURU math (54k competition problems, MATH500 eval): a broad difficulty spread, strongly shared "
        "skills (algebra helps geometry), a 1.5B policy well below the 7B weak reference.",
    ),
    "code": ScenarioConfig(
        name="code",
        pool_size=2500,
        eval_size=300,
        num_skills=10,
        shared_loading=0.35,
        skill_concentration=0.5,
        difficulty_mean=2.7,
        difficulty_sd=2.5,
        discrimination_mean=3.0,
        policy_task_noise=2.0,
        ref_offsets=(1.5, 3.5),
        learning_rate=0.04,
        capacity=1.5,
        description="GURU code (LeetCode/TACO/PrimeIntellect, all tests must pass): harder tasks with sharper "
        "pass/fail (all-or-nothing unit tests), more skill families, moderate transfer.",
    ),
    "logic": ScenarioConfig(
        name="logic",
        pool_size=1500,
        eval_size=300,
        num_skills=6,
        shared_loading=0.15,
        skill_concentration=0.15,
        difficulty_mean=2.5,
        difficulty_sd=3.0,
        discrimination_mean=3.0,
        policy_task_noise=1.5,
        ref_offsets=(1.0, 3.5),
        learning_rate=0.05,
        capacity=2.0,
        description="GURU logic (zebra, ordering, graph, ARC/BARC puzzles): a small pool of distinct puzzle families "
        "(little transfer between families), puzzle size sets a wide difficulty range, sharp pass/fail.",
    ),
    # The toy testbed (bots_verl.toy, issue 16): 2352 arithmetic tasks (a+b, a-b, a*b, 1-4 digits, 48 cells), no
    # reference filter, 600 held-out prompts from 8 moderate cells. The starting-world fields marked "fit" are the
    # output of `python -m bots_verl.toy.sim_fit --calibration runs/toy/data/calibration.parquet` (rounded), which
    # reproduces bots_verl.toy.sim_fit.TOY_TARGETS (tests/toy/test_sim_fit.py checks it). The others are set by hand:
    # three operations sharing digit handling (a general skill plus 3 specific ones, each task mostly on its own
    # operation); the learning dynamics keep the math preset's values (nothing in the calibration measures them).
    "toy": ScenarioConfig(
        name="toy",
        pool_size=2352,
        eval_size=600,
        num_skills=4,
        shared_loading=0.4,
        skill_concentration=0.2,
        difficulty_mean=1.91,  # fit
        difficulty_sd=1.47,  # fit
        policy_task_noise=1.53,  # fit
        ref_offsets=(0.22, 1.28),  # fit
        ref_task_noise=1.0,  # fit
        eval_difficulty_shift=-1.2,  # fit
        eval_difficulty_scale=0.18,  # fit
        filter_weak_max=2.0,
        filter_unsolved=False,
        filter_inverted=False,
        # fit to the measured Random gain (+0.010 in 24 steps): `python -m bots_verl.toy.sim_compare --measured
        # runs/toy/summary.json --fit-learning-rate`; the math preset's 0.04 predicted seven times the measured gains
        learning_rate=0.0058,
        description="The toy testbed (issue 16): a 1.05M-parameter Llama on integer arithmetic, 2352 tasks, most "
        "far too hard at the start (46% at p < 0.01), references from the same architecture trained on their own "
        "mixtures (weak near the policy, strong far better on 2-3 digit cells), a held-out set of moderate cells.",
    ),
}


def get_scenario(name: str | ScenarioConfig, **overrides: Any) -> ScenarioConfig:
    """A preset by name (or a given config), with field overrides applied.

    Raises:
        ValueError: for an unknown preset or field.
    """
    if isinstance(name, ScenarioConfig):
        base = name
    elif name in PRESETS:
        base = PRESETS[name]
    else:
        raise ValueError(f"unknown scenario {name!r}; presets: {sorted(PRESETS)}")
    return base.replace(**overrides) if overrides else base
