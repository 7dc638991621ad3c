"""``greso``: skip, before rollout, the prompts whose recent groups had zero reward variance (beyond the paper).

GRESO ("Act Only When It Pays: Efficient Reinforcement Learning for LLM Reasoning via Selective Rollouts", Zheng et
al., arXiv 2506.02177) observes that zero-variance prompts are *temporally consistent*: a prompt whose group of
rollouts was all-correct or all-wrong at one visit is very likely to be so at the next, and a GRPO group without
reward variance has zero advantage and contributes nothing to the gradient. So instead of rolling such prompts out
and filtering them afterwards (DAPO dynamic sampling), GRESO skips them before rollout, probabilistically:

1. **History.** Per prompt, the number ``k`` of its most recent consecutive zero-variance groups, and whether they
   were *easy* (all correct) or *hard* (all wrong). A group with mixed rewards resets ``k`` to 0; a prompt never seen
   has ``k = 0``.
2. **Skip probability.** A prompt with an easy streak of ``k`` is kept with probability ``max(p_easy ** k, floor)``
   and skipped otherwise; a hard streak uses ``p_hard``. The floor (0.01) keeps every prompt explorable: the policy
   changes, and a hard prompt may become solvable.
3. **Adaptive p.** After every step, the share of this step's groups that were easy is compared with a target; if it
   is at or above the target, ``p_easy`` falls by ``p_step`` (skip more), else it rises (skip less), clipped to
   ``[p_min, p_max]``; likewise ``p_hard``. The targets split a total zero-variance target of 0.25 into 1/3 easy and
   2/3 hard: the authors explore hard prompts more, because the overall reward rises and hard prompts are the ones
   that change.

Defaults, as in the official code (Infini-AI-Lab/GRESO: ``verl/trainer/ttis/presampling_selector.py``, the
``all_probabilistic`` strategy of ``verl/trainer/ppo/ray_trainer.py`` and ``train-scripts/*_greso.sh``):
``p_easy = p_hard = 0.5`` at the start, ``target_zero_variance = 0.25`` split 1/3 easy, 2/3 hard, ``p_step = 0.01``,
``p_min = 0.05``, ``p_max = 0.95``, keep-probability floor ``0.01``. The code calls a group easy when its mean reward
is at least 0.98 and hard when it is at most 0.11, which at its 8 rollouts per prompt are exactly all-1 and all-0;
we default to zero variance itself (``easy_threshold = 1``, ``hard_threshold = 0``) so the rule does not depend on
the group size (set 0.98 / 0.11 to reproduce the code's thresholds at other group sizes).

How it maps onto the selector API, and where it differs from the paper's trainer:

- GRESO walks a shuffled dataloader and skips prompts until the rollout batch is full (with an adaptive sampling
  batch size on top). :meth:`GRESOSelector.select` does the same over the whole pool in one vectorised pass: every
  task draws its keep decision, a uniformly random order is drawn, and the first ``B`` kept tasks in that order are
  the batch. If fewer than ``B`` tasks are kept (a pool of mostly zero-variance prompts), the batch is filled with
  skipped tasks in the same random order, where GRESO would keep sampling; the count is logged (``greso/filled``).
  Batches are independent across steps, like ``random`` (GRESO's own walk is epoch-wise without replacement).
- The paper's trainer still filters the rolled-out groups afterwards, DAPO-style (GRESO reduces the waste of dynamic
  sampling rather than replacing it). Here that is the trainer's choice: the simulator's ``dapo=true`` loop key, or
  DAPO's ``filter_groups`` in verl.
- The code adapts ``p`` from the second epoch on; we adapt from the first update (there are no epochs here), which
  only matters for the first pass over a pool.
- GRESO needs revisits: a prompt has history only once it has been rolled out. On a large pool and a short run
  (few visits per prompt) it behaves like ``random``; this is the staleness of per-prompt history that PCL (arXiv
  2510.01135) points out.

Outcomes may be fractional (rewards in [0, 1]); a group is easy when ``successes / attempts >= easy_threshold`` and
hard when it is ``<= hard_threshold``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.metric_keys import (
    GRESO_EASY_RATIO_STAT,
    GRESO_EASY_STREAK_STAT,
    GRESO_FILLED_STAT,
    GRESO_HARD_RATIO_STAT,
    GRESO_HARD_STREAK_STAT,
    GRESO_P_EASY_STAT,
    GRESO_P_HARD_STAT,
    GRESO_SKIPPED_STAT,
)
from bots_verl.core.paper.selection_rules import top_k
from bots_verl.core.selector_base import SELECTORS, Selector
from bots_verl.core.validation import check_scalars, check_unit_interval, real_array, require_keys

logger = logging.getLogger(__name__)

__all__ = ["GRESOSelector"]

# Streaks stop counting here: the keep probability has long reached its floor (0.95 ** 10_000 underflows to 0), and
# int32 never overflows however long a run is.
STREAK_CAP = 10_000
_EXTRA_KEYS = ("streak", "p_easy", "p_hard", "last_select_stats", "last_update_stats")


def _check_streak(value: Any, num_tasks: int) -> np.ndarray:
    """A checkpoint's signed streak array (``+k`` easy, ``-k`` hard) as a fresh int32 array.

    Raises:
        ValueError: for another shape, a non-integer dtype (booleans included) or a streak beyond the cap.
    """
    arr = real_array("checkpoint streak", value, integer=True)
    if arr.shape != (num_tasks,):
        raise ValueError(f"checkpoint streak has shape {arr.shape}, expected {(num_tasks,)}")
    if arr.size and (int(arr.min()) < -STREAK_CAP or int(arr.max()) > STREAK_CAP):
        raise ValueError(f"checkpoint streak must lie in [-{STREAK_CAP}, {STREAK_CAP}]")
    return arr.astype(np.int32)


@SELECTORS.register("greso", group="peers")
class GRESOSelector(Selector):
    """GRESO (arXiv 2506.02177): random order, skipping tasks whose recent groups had zero reward variance.

    Hyperparameters (defaults of the official code; see the module docstring):
        p_easy, p_hard: initial base of the keep probability ``p ** k`` after ``k`` consecutive all-correct /
            all-wrong groups (0.5, 0.5).
        target_zero_variance: the share of zero-variance groups per step that the adaptation aims at (0.25).
        easy_share: the part of that target given to easy groups (1/3; hard groups get the rest).
        p_step: how far ``p_easy`` / ``p_hard`` move per step toward their target (0.01; 0 keeps them fixed).
        p_min, p_max: the range of the adapted ``p`` (0.05, 0.95).
        keep_floor: the smallest keep probability of any task (0.01), so every task stays explorable.
        easy_threshold, hard_threshold: a group is easy at ``rate >= easy_threshold``, hard at
            ``rate <= hard_threshold`` (1.0, 0.0: zero reward variance; the code's 0.98 / 0.11 equal these at 8
            rollouts).

    Logged (:meth:`stats`): ``greso/p_easy``, ``greso/p_hard``, ``greso/skipped_frac`` (share of the pool the last
    select skipped), ``greso/filled`` (skipped tasks the last select still took, for lack of kept ones),
    ``greso/easy_ratio`` and ``greso/hard_ratio`` (this update's shares of easy and hard groups, what the adaptation
    compares with its targets) and ``greso/easy_streak_tasks`` / ``greso/hard_streak_tasks`` (tasks with a streak).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "p_easy": 0.5,
        "p_hard": 0.5,
        "target_zero_variance": 0.25,
        "easy_share": 1.0 / 3.0,
        "p_step": 0.01,
        "p_min": 0.05,
        "p_max": 0.95,
        "keep_floor": 0.01,
        "easy_threshold": 1.0,
        "hard_threshold": 0.0,
    }

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        """Counter, references and the streak (int32), plus what select allocates.

        select holds at most three pool-sized float64 or int64 arrays at once (the keep probability and its draws, or
        the order draws, ``argpartition``'s indices and the kept mask); ``tests/core/test_memory.py`` measures it.
        """
        return super().bytes_per_task(reference_columns, hparams) + 4 + 8 * 3

    @classmethod
    def _check_values(cls, values: Mapping[str, Any], num_references: int, embeddings: bool) -> None:
        """Every rate in [0, 1], ``0 < p_min <= p_easy, p_hard <= p_max``, ``hard_threshold < easy_threshold``."""
        super()._check_values(values, num_references, embeddings)
        p_min = check_unit_interval("p_min", values["p_min"])
        p_max = check_unit_interval("p_max", values["p_max"])
        if not 0.0 < p_min <= p_max:
            raise ValueError(f"need 0 < p_min <= p_max, got p_min={values['p_min']!r}, p_max={values['p_max']!r}")
        for key in ("p_easy", "p_hard"):
            value = check_unit_interval(key, values[key])
            if not p_min <= value <= p_max:
                raise ValueError(f"{key} must lie in [p_min, p_max] = [{p_min}, {p_max}], got {values[key]!r}")
        for key in ("target_zero_variance", "easy_share", "p_step", "keep_floor"):
            check_unit_interval(key, values[key])
        easy = check_unit_interval("easy_threshold", values["easy_threshold"])
        if not check_unit_interval("hard_threshold", values["hard_threshold"]) < easy:
            raise ValueError(
                f"need hard_threshold < easy_threshold, got {values['hard_threshold']!r} and "
                f"{values['easy_threshold']!r}"
            )

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        # the base checks every value (_check_values) before anything is built
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        hp = self.hparams
        self.p_min, self.p_max = float(hp["p_min"]), float(hp["p_max"])
        self.target_zero_variance, self.easy_share = float(hp["target_zero_variance"]), float(hp["easy_share"])
        self.p_step, self.keep_floor = float(hp["p_step"]), float(hp["keep_floor"])
        self.easy_threshold, self.hard_threshold = float(hp["easy_threshold"]), float(hp["hard_threshold"])
        self.target_easy = self.target_zero_variance * self.easy_share
        self.target_hard = self.target_zero_variance * (1.0 - self.easy_share)
        # The state: the adapted bases and, per task, +k for k consecutive easy groups, -k for hard ones.
        self.p_easy = float(hp["p_easy"])
        self.p_hard = float(hp["p_hard"])
        self.streak = np.zeros(self.num_tasks, dtype=np.int32)
        self.last_select_stats: dict[str, float] = {}
        self.last_update_stats: dict[str, float] = {}

    def keep_probability(self) -> np.ndarray:
        """Per task, the probability that the next select keeps it (1 for tasks without a zero-variance streak)."""
        base = np.where(self.streak > 0, self.p_easy, self.p_hard)
        keep = np.power(base, np.abs(self.streak), out=base)
        return np.maximum(keep, self.keep_floor, out=keep)

    def _select(self, batch_size: int) -> np.ndarray:
        keep = self.keep_probability()
        kept = self.rng.random(self.num_tasks) < keep
        del keep
        # A uniformly random walk over the pool: kept tasks score in [1, 2), skipped ones in [0, 1), so the top
        # batch_size are the first kept tasks of the walk, then (only if too few were kept) the first skipped ones.
        order = self.rng.random(self.num_tasks)
        order += kept
        picked = top_k(order, batch_size)
        skipped = self.num_tasks - int(np.count_nonzero(kept))
        self.last_select_stats = {
            GRESO_SKIPPED_STAT: skipped / self.num_tasks,
            GRESO_FILLED_STAT: float(max(batch_size - (self.num_tasks - skipped), 0)),
        }
        return picked

    def _update(self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray) -> None:
        rates = successes / attempts
        easy = rates >= self.easy_threshold
        hard = rates <= self.hard_threshold
        old = self.streak[indices]
        # An easy group extends an easy streak (or starts one), a hard group likewise; a mixed group ends any streak.
        new = np.where(easy, np.maximum(old, 0) + 1, np.where(hard, np.minimum(old, 0) - 1, 0))
        self.streak[indices] = np.clip(new, -STREAK_CAP, STREAK_CAP)
        easy_ratio, hard_ratio = float(easy.mean()), float(hard.mean())
        # GRESO's adaptation: at or above the target share, skip more (lower p); below it, skip less.
        step = self.p_step
        self.p_easy = self.p_easy - step if easy_ratio >= self.target_easy else self.p_easy + step
        self.p_hard = self.p_hard - step if hard_ratio >= self.target_hard else self.p_hard + step
        self.p_easy = float(np.clip(self.p_easy, self.p_min, self.p_max))
        self.p_hard = float(np.clip(self.p_hard, self.p_min, self.p_max))
        self.last_update_stats = {GRESO_EASY_RATIO_STAT: easy_ratio, GRESO_HARD_RATIO_STAT: hard_ratio}

    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            GRESO_P_EASY_STAT: self.p_easy,
            GRESO_P_HARD_STAT: self.p_hard,
            GRESO_EASY_STREAK_STAT: float(np.count_nonzero(self.streak > 0)),
            GRESO_HARD_STREAK_STAT: float(np.count_nonzero(self.streak < 0)),
            **self.last_select_stats,
            **self.last_update_stats,
        }

    def _state(self) -> dict[str, Any]:
        return {
            "streak": self.streak.copy(),
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "last_select_stats": dict(self.last_select_stats),
            "last_update_stats": dict(self.last_update_stats),
        }

    def _checked_state(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        require_keys(extra, _EXTRA_KEYS, "checkpoint extra")
        out: dict[str, Any] = {"streak": _check_streak(extra["streak"], self.num_tasks)}
        for key in ("p_easy", "p_hard"):
            value = extra[key]
            if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
                raise ValueError(f"checkpoint {key} must be a number, got {value!r}")
            out[key] = check_unit_interval(f"checkpoint {key}", value)
        for key in ("last_select_stats", "last_update_stats"):
            out[key] = check_scalars(f"checkpoint {key}", extra[key])
        return out
