"""The paper's baselines: ``random``, ``offline_easy2hard``, and ``sequential`` (dataset order)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bots_verl.core.selector_base import SELECTORS, Selector
from bots_verl.core.validation import check_count

logger = logging.getLogger(__name__)

__all__ = ["OfflineEasy2HardSelector", "RandomSelector", "SequentialSelector"]


@SELECTORS.register("random", group="paper")
class RandomSelector(Selector):
    """Uniform sampling: unique within a batch, independent across batches (the paper's normalising baseline)."""

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        # Generator.choice without replacement permutes or hashes the pool (up to two int64 arrays).
        return super().bytes_per_task(reference_columns, hparams) + 16

    def _select(self, batch_size: int) -> np.ndarray:
        return self.rng.choice(self.num_tasks, size=batch_size, replace=False).astype(np.int64)


class _CursorSelector(Selector):
    """Serves a fixed order of the pool batch by batch, wrapping around at the end."""

    def __init__(self, num_tasks: int, *, reference_pass_rates: Any = None, seed: int = 0, **hparams: Any) -> None:
        super().__init__(num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **hparams)
        self.cursor = 0
        self.order = self._order()

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        return super().bytes_per_task(reference_columns, hparams) + 8  # the order (int64)

    def _order(self) -> np.ndarray:
        return np.arange(self.num_tasks, dtype=np.int64)

    def _select(self, batch_size: int) -> np.ndarray:
        positions = (self.cursor + np.arange(batch_size)) % self.num_tasks
        self.cursor = int((self.cursor + batch_size) % self.num_tasks)
        return self.order[positions]

    def _state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def _check_state(self, extra: Mapping[str, Any]) -> None:
        cursor = check_count("checkpoint cursor", extra.get("cursor"))
        if cursor >= self.num_tasks:
            raise ValueError(f"checkpoint cursor {cursor} is not a position in a pool of {self.num_tasks}")

    def _load_state(self, extra: Mapping[str, Any]) -> None:
        self.cursor = int(extra["cursor"])


@SELECTORS.register("sequential", group="paper")
class SequentialSelector(_CursorSelector):
    """Dataset order, batch by batch, wrapping around."""


@SELECTORS.register("offline_easy2hard", group="paper")
class OfflineEasy2HardSelector(_CursorSelector):
    """A fixed curriculum by reference pass rate, easiest first (the paper's offline baseline).

    Tasks are ordered by the first (weakest) reference column, descending; ties by the next columns, descending,
    then by index. The order wraps around, restarting the curriculum.
    """

    needs_reference: ClassVar[bool] = True

    @classmethod
    def bytes_per_task(cls, reference_columns: int, hparams: Mapping[str, Any] | None = None) -> int:
        # lexsort's keys and result
        return super().bytes_per_task(reference_columns, hparams) + 8 * (reference_columns + 2)

    def _order(self) -> np.ndarray:
        ref = self.reference
        assert ref is not None  # needs_reference
        keys = [np.arange(self.num_tasks)] + [-ref[:, j] for j in range(ref.shape[1] - 1, -1, -1)]
        return np.lexsort(keys).astype(np.int64)
