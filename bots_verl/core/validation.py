"""Boundary checks for everything that enters a selector.

Every public mutating call of :mod:`bots_verl.core` validates its whole input here *before* touching state, so a
rejected call raises ``ValueError`` and leaves the posterior exactly as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "check_batch_size",
    "check_indices",
    "check_outcomes",
    "check_reference",
    "check_unit_interval",
    "split_known_params",
]


def check_indices(indices: Any, num_tasks: int, *, name: str = "indices") -> np.ndarray:
    """Return ``indices`` as a 1-D int64 array of unique task indices in ``[0, num_tasks)``.

    Raises:
        ValueError: if the array is not 1-D, not integral, empty, out of range (negative too) or repeated.
    """
    arr = np.asarray(indices)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: an update needs at least one task")
    # A boolean mask is not a list of indices: read as 0/1 it would silently update tasks 0 and 1.
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= num_tasks:
        bad = arr[(arr < 0) | (arr >= num_tasks)]
        raise ValueError(f"{name} out of range [0, {num_tasks}): {bad[:5].tolist()}")
    if np.unique(arr).size != arr.size:
        uniq, counts = np.unique(arr, return_counts=True)
        raise ValueError(f"{name} repeated within one update: {uniq[counts > 1][:5].tolist()}")
    return arr


def check_outcomes(successes: Any, attempts: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (successes, attempts) as float64 arrays of length ``size``.

    Successes may be fractional (rewards in [0, 1] summed over rollouts), so only ``0 <= s <= n`` is required.

    Raises:
        ValueError: on a length mismatch, NaN or infinite values, negative successes, successes above attempts, or
            attempts that are not positive.
    """
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(attempts, dtype=np.float64)
    if s.ndim != 1 or n.ndim != 1:
        raise ValueError(f"successes and attempts must be 1-D, got shapes {s.shape} and {n.shape}")
    if s.size != size or n.size != size:
        raise ValueError(f"indices, successes and attempts differ in length: {size}, {s.size}, {n.size}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"successes contain NaN or infinite values at positions {np.flatnonzero(~np.isfinite(s))[:5]}")
    if not np.all(np.isfinite(n)):
        raise ValueError(f"attempts contain NaN or infinite values at positions {np.flatnonzero(~np.isfinite(n))[:5]}")
    if np.any(n <= 0):
        raise ValueError(f"attempts must be positive, got {n[n <= 0][:5].tolist()}")
    if np.any(s < 0):
        raise ValueError(f"successes must be >= 0, got {s[s < 0][:5].tolist()}")
    if np.any(s > n):
        pos = np.flatnonzero(s > n)[:5]
        raise ValueError(
            f"successes exceed attempts at positions {pos.tolist()}: {s[pos].tolist()} > {n[pos].tolist()}"
        )
    return s, n


def check_reference(reference: Any, num_tasks: int, *, nan_policy: str = "impute") -> np.ndarray:
    """Return reference pass rates as a float64 ``(num_tasks, K)`` array, columns ordered weak -> strong.

    A 1-D array is one column. Values must lie in [0, 1]. Missing values (NaN) follow ``nan_policy``:

    - ``"impute"`` (default): each NaN becomes the mean of the non-missing values of its column, with one warning
      that gives the count. A column with no value at all is an error either way.
    - ``"error"``: any NaN is a ``ValueError``.

    Raises:
        ValueError: on a wrong shape, values outside [0, 1], infinities, or NaN under ``nan_policy="error"``.
    """
    if nan_policy not in ("impute", "error"):
        raise ValueError(f"reference_nan must be 'impute' or 'error', got {nan_policy!r}")
    ref = np.asarray(reference, dtype=np.float64)
    if ref.ndim == 1:
        ref = ref[:, None]
    if ref.ndim != 2 or ref.shape[0] != num_tasks or ref.shape[1] < 1:
        raise ValueError(
            f"reference_pass_rates must have shape ({num_tasks},) or ({num_tasks}, K), got {np.shape(reference)}"
        )
    if np.any(np.isinf(ref)):
        raise ValueError("reference_pass_rates contain infinite values")
    missing = np.isnan(ref)
    finite = ref[~missing]
    if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
        raise ValueError(f"reference pass rates must lie in [0, 1], got range [{finite.min()}, {finite.max()}]")
    if missing.any():
        counts = missing.sum(axis=0)
        if nan_policy == "error":
            raise ValueError(f"reference_pass_rates have missing values (NaN) per column: {counts.tolist()}")
        if np.any(counts == num_tasks):
            raise ValueError(f"a reference column has no value at all (NaN counts per column: {counts.tolist()})")
        ref = ref.copy()
        col_means = np.nanmean(ref, axis=0)
        rows, cols = np.nonzero(missing)
        ref[rows, cols] = col_means[cols]
        logger.warning(
            "reference_pass_rates: imputed %d missing values (per column %s) with the column means %s",
            int(counts.sum()),
            counts.tolist(),
            np.round(col_means, 4).tolist(),
        )
    return np.ascontiguousarray(ref)


def check_batch_size(batch_size: Any, num_tasks: int) -> int:
    """Return ``batch_size`` as an int in ``[1, num_tasks]``.

    Raises:
        ValueError: if it is not a positive integer or exceeds the pool (a batch holds unique tasks).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise ValueError(f"batch_size must be an integer, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if batch_size > num_tasks:
        raise ValueError(f"batch_size {batch_size} is larger than the pool of {num_tasks} tasks")
    return int(batch_size)


def check_unit_interval(name: str, value: Any, *, open_right: bool = False) -> float:
    """Return ``value`` as a float in [0, 1] (or [0, 1) with ``open_right``)."""
    v = float(value)
    if not np.isfinite(v) or v < 0.0 or v > 1.0 or (open_right and v >= 1.0):
        interval = "[0, 1)" if open_right else "[0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return v


def split_known_params(
    given: Mapping[str, Any], groups: Iterable[tuple[str, Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Split keyword hyperparameters among parameter groups by name; an unknown name is an error.

    Args:
        given: the keyword arguments a user passed.
        groups: ``(group name, defaults)`` pairs; a name belongs to the first group whose defaults hold it.

    Returns:
        One dict per group: its defaults updated with the given values that belong to it.
    """
    groups = list(groups)
    out = [dict(defaults) for _, defaults in groups]
    for key, value in given.items():
        for i, (_, defaults) in enumerate(groups):
            if key in defaults:
                out[i][key] = value
                break
        else:
            known = sorted({k for _, d in groups for k in d})
            raise ValueError(f"unknown hyperparameter {key!r}; known: {known}")
    return out
