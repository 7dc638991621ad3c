"""DAPO's cap on the generation batches of a step (``algorithm.filter_groups.max_num_gen_batches``), enforced by BOTS.

verl's DAPO recipe counts the generation batches of a training step (the step's first batch is batch 1) and stops the
run with a ``ValueError`` once ``num_gen_batches >= max_num_gen_batches > 0`` and the kept groups still do not fill the
step; a value ``<= 0`` means no cap (``verl.trainer.config.FilterGroupsConfig``). verl 0.9.1's V1 replay buffer ignores
the key (it logs a warning inside the task runner) and refills in a ``while True`` loop, so on a pool where every group
comes back all-0 or all-1 (a policy that solves nothing yet, a reward that cannot score) a step never ends.

BOTS enforces the cap where the refills are dispatched (``BOTSTrainer._add_prompts_to_generate``, verl's ``refill_fn``,
in the sync and the asynchronous modes alike): it counts the prompts dispatched in a step, in units of
``data.train_batch_size`` (one generation batch; verl's V1 DAPO fetches them one prompt at a time), and a refill that
would take the step past ``max_num_gen_batches x train_batch_size`` prompts raises :class:`TooManyGenBatchesError`.
The error ends ``fit()`` inside the step, before the step's posterior update and checkpoint: the posterior and the last
checkpoint stay those of the previous step. The same count applies to every refill of the step, also those of
``trainer.v1.sampler.sync_refill_failed_groups`` (which would otherwise refill a step whose groups all fail for ever).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from omegaconf import DictConfig

logger = logging.getLogger(__name__)

__all__ = ["KEY", "RefillCap", "TooManyGenBatchesError", "read_refill_cap", "refill_sources"]

KEY = "algorithm.filter_groups.max_num_gen_batches"


class TooManyGenBatchesError(ValueError):
    """A step asked for more prompts than ``algorithm.filter_groups.max_num_gen_batches`` allows."""


@dataclass(frozen=True)
class RefillCap:
    """The most prompts a training step may dispatch, refills included.

    Attributes:
        max_gen_batches: ``algorithm.filter_groups.max_num_gen_batches``; ``<= 0``: no cap.
        train_batch_size: ``data.train_batch_size`` (prompts per generation batch).
    """

    max_gen_batches: int
    train_batch_size: int

    @property
    def max_prompts(self) -> int | None:
        """``max_gen_batches x train_batch_size``, or None without a cap."""
        return self.max_gen_batches * self.train_batch_size if self.max_gen_batches > 0 else None

    def gen_batches(self, dispatched: int) -> int:
        """Generation batches that ``dispatched`` prompts of a step make (a started batch counts)."""
        return -(-int(dispatched) // self.train_batch_size)

    def check(self, step: int, dispatched: int, asked: int) -> None:
        """Refuse a refill of ``asked`` prompts in ``step``, which has dispatched ``dispatched`` so far.

        Raises:
            TooManyGenBatchesError: if the refill would take the step past :attr:`max_prompts`.
        """
        limit = self.max_prompts
        if limit is None or dispatched + asked <= limit:
            return
        raise TooManyGenBatchesError(
            f"{KEY}={self.max_gen_batches}: step {step} dispatched {dispatched} prompts "
            f"({self.gen_batches(dispatched)} generation batches of data.train_batch_size={self.train_batch_size}) and "
            f"verl asked for {asked} more: the groups it kept still do not fill the step (DAPO discards groups whose "
            "rollouts all score the same, and failed groups are refilled). Generated too many; the run stops here, "
            f"before step {step}'s posterior update and checkpoint: resume from the last checkpoint. Check whether the "
            "pool is too difficult (or too easy) for the policy and whether the reward scores it at all; or raise "
            f"{KEY}, or set it to 0 for endless trials."
        )

    def describe(self) -> str:
        """What happens on a pool whose groups keep being discarded (for the dry run and the log)."""
        limit = self.max_prompts
        if limit is None:
            return (
                f"{KEY}={self.max_gen_batches}: no cap: a pool whose groups are all-0/all-1 (or all fail) refills for "
                "ever"
            )
        return (
            f"{KEY}={self.max_gen_batches}: at most {self.max_gen_batches} generation batches "
            f"({self.max_gen_batches} x train_batch_size = {limit} prompts) per step, then the run stops"
        )


def refill_sources(config: DictConfig) -> list[str]:
    """The settings that make verl refill a sync step in the middle: DAPO (``algorithm.filter_groups.enable``) and
    failed groups (``trainer.v1.sampler.sync_refill_failed_groups``); empty: a sync step dispatches one batch."""
    from bots_verl.config.verl_checks import dapo_enabled

    sources = []
    if dapo_enabled(config):
        sources.append("algorithm.filter_groups")
    sampler = config.trainer.get("v1", {}).get("sampler", None) or {}
    mode = config.trainer.get("v1", {}).get("trainer_mode", "sync")
    if mode == "sync" and sampler.get("sync_refill_failed_groups", False):
        sources.append("trainer.v1.sampler.sync_refill_failed_groups")
    return sources


def read_refill_cap(config: DictConfig) -> RefillCap:
    """``algorithm.filter_groups.max_num_gen_batches`` and ``data.train_batch_size``, checked.

    Raises:
        ValueError: for a value that is not an integer (a bool, a string, a float are refused, not read as a number).
    """
    filter_groups = config.algorithm.get("filter_groups", None) or {}
    value = filter_groups.get("max_num_gen_batches", 0)
    if value is None:
        value = 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{KEY}={value!r}: must be an integer, the most generation batches (of data.train_batch_size prompts) a "
            "step may dispatch before the run stops; 0 or less: no cap"
        )
    return RefillCap(int(value), int(config.data.train_batch_size))
