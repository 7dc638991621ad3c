"""Boundary checks for everything that enters a selector.

Every public mutating call of :mod:`bots_verl.core` validates its whole input here *before* touching state, so a
rejected call raises ``ValueError`` and leaves the posterior exactly as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_COUNT",
    "MAX_LAG",
    "REFERENCE_NAN_POLICIES",
    "check_batch_size",
    "check_count",
    "check_indices",
    "check_not_null",
    "check_number_param",
    "check_lags",
    "check_nan_policy",
    "check_outcomes",
    "check_real_array",
    "check_reference",
    "check_scalars",
    "check_seed",
    "check_unit_interval",
    "real_array",
    "require_keys",
    "split_known_params",
]

# The most rollouts one task may report in one update. Real runs use tens; beyond this the counts are a unit error,
# and near 1e308 they would overflow the posterior to inf/NaN.
MAX_ATTEMPTS = 1e9
# The largest policy lag (in training steps) an update may report. Evidence that old weighs (1 - lam)**lag, which is
# 0.0 in float64 long before this for any lam > 0; a larger value is a unit error (a timestamp, not a step count).
MAX_LAG = 2**31 - 1
# What check_reference does with missing reference values (the selectors' ``reference_nan``).
REFERENCE_NAN_POLICIES = ("impute", "error", "neighbours")
# The largest counter a checkpoint may hold (steps, selections, times a task was selected): exact in float64.
MAX_COUNT = 2**53


def real_array(name: str, value: Any, *, allow_bool: bool = False, integer: bool = False) -> np.ndarray:
    """``value`` as a numpy array of real numbers (of integers with ``integer``), its dtype kept; strings, complex
    numbers, other objects (and booleans unless ``allow_bool``) are an error.

    Raises:
        ValueError: naming ``name`` and the dtype, or what numpy could not convert (ragged nesting, objects).
    """
    what = "integers" if integer else "numbers"
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:  # ragged nesting, unconvertible objects
        raise ValueError(f"{name} is not an array of {what}: {exc}") from exc
    kinds = "iu" if integer else "buif" if allow_bool else "uif"
    if arr.dtype.kind not in kinds:
        raise ValueError(f"{name} must hold {'integers' if integer else 'real numbers'}, got dtype {arr.dtype}")
    return arr


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

    Successes may be fractional (rewards in [0, 1] summed over rollouts), so only ``0 <= s <= n`` is required; a
    boolean success counts as 0 or 1.

    Raises:
        ValueError: on a length mismatch, values that are not real numbers (strings, complex), NaN or infinite values,
            negative successes, successes above attempts, or attempts that are not positive or above
            :data:`MAX_ATTEMPTS`.
    """
    s = real_array("successes", successes, allow_bool=True).astype(np.float64)
    n = real_array("attempts", attempts).astype(np.float64)
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
    if np.any(n > MAX_ATTEMPTS):
        raise ValueError(f"attempts above {MAX_ATTEMPTS:g} per task and update: {n[n > MAX_ATTEMPTS][:5].tolist()}")
    if np.any(s < 0):
        raise ValueError(f"successes must be >= 0, got {s[s < 0][:5].tolist()}")
    if np.any(s > n):
        pos = np.flatnonzero(s > n)[:5]
        raise ValueError(
            f"successes exceed attempts at positions {pos.tolist()}: {s[pos].tolist()} > {n[pos].tolist()}"
        )
    return s, n


def check_lags(lags: Any, size: int) -> np.ndarray:
    """Return per-task policy lags as a 1-D int64 array of length ``size`` with entries in ``[0, MAX_LAG]``.

    A lag is how many policy versions older than the one this step trains the evidence was generated under (0 in
    synchronous training). Only integers are accepted: a fractional lag has no meaning in verl's version counter, and
    a boolean or float array is more likely a mix-up of arguments than a lag.

    Raises:
        ValueError: if the array is not 1-D, of another length than the update, not integral (booleans and floats
            included), negative or above :data:`MAX_LAG`.
    """
    arr = np.asarray(lags)
    if arr.ndim != 1:
        raise ValueError(f"lags must be a 1-D array, got shape {arr.shape}")
    if arr.size != size:
        raise ValueError(f"lags and indices differ in length: {arr.size} lags for {size} tasks")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"lags must hold non-negative integers (policy versions), got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > MAX_LAG):
        bad = arr[(arr < 0) | (arr > MAX_LAG)]
        raise ValueError(f"lags must lie in [0, {MAX_LAG}], got {bad[:5].tolist()}")
    return arr.astype(np.int64, copy=False)


def check_nan_policy(nan_policy: Any) -> None:
    """Refuse a ``reference_nan`` that is not one of :data:`REFERENCE_NAN_POLICIES`.

    Raises:
        ValueError: naming the policies.
    """
    if not isinstance(nan_policy, str) or nan_policy not in REFERENCE_NAN_POLICIES:
        raise ValueError(f"reference_nan must be one of {list(REFERENCE_NAN_POLICIES)}, got {nan_policy!r}")


def check_seed(seed: Any) -> int:
    """Return a generator seed as an int (``numpy``'s PCG64 takes any non-negative integer).

    Raises:
        ValueError: for a boolean, a float (``1.5`` would otherwise run as seed 1), a string or a negative number.
    """
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_reference(reference: Any, num_tasks: int, *, nan_policy: str = "impute") -> np.ndarray:
    """Return reference pass rates as a float64 ``(num_tasks, K)`` array, columns ordered weak -> strong.

    A 1-D array is one column. Values must lie in [0, 1]. Missing values (NaN) follow ``nan_policy``:

    - ``"impute"`` (default): each NaN becomes the mean of the non-missing values of its column, with one warning
      that gives the count. A column with no value at all is an error either way.
    - ``"error"``: any NaN is a ``ValueError``.
    - ``"neighbours"``: NaN values are returned as they are, for the caller to impute over the task graph
      (:func:`bots_verl.core.task_graph.impute_reference`). A column with no value at all is an error.

    Raises:
        ValueError: on a wrong shape, values outside [0, 1], infinities, or NaN under ``nan_policy="error"``.
    """
    check_nan_policy(nan_policy)
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
    if not missing.all():
        # nanmin/nanmax reduce without copying the pool
        lo, hi = float(np.nanmin(ref)), float(np.nanmax(ref))
        if lo < 0.0 or hi > 1.0:
            raise ValueError(f"reference pass rates must lie in [0, 1], got range [{lo}, {hi}]")
    if missing.any():
        counts = missing.sum(axis=0)
        if nan_policy == "error":
            raise ValueError(f"reference_pass_rates have missing values (NaN) per column: {counts.tolist()}")
        if np.any(counts == num_tasks):
            raise ValueError(f"a reference column has no value at all (NaN counts per column: {counts.tolist()})")
        if nan_policy == "neighbours":
            return np.ascontiguousarray(ref)
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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_)


def check_number_param(key: str, value: Any, default: Any) -> None:
    """Refuse a boolean or a string for a hyperparameter that is a number (its default is one, or None: unset).

    ``float(True)`` is 1.0 and ``float("0.1")`` is 0.1, so without this a YAML boolean (``lam=true``) would run as
    1 and a quoted number (``lam='0.1'``) would be kept as a string in the hyperparameters a run records.

    Raises:
        ValueError: naming ``key``, the value and how to write it.
    """
    if not (default is None or _is_number(default)) or value is None or _is_number(value):
        return
    if isinstance(value, bool | np.bool_):
        raise ValueError(
            f"hyperparameter {key!r} is a number (default {default!r}), got the boolean {value!r}: YAML reads "
            f"true/false/yes/no/on/off as booleans; write the number, e.g. {key}=1.0"
        )
    if isinstance(value, str):
        try:
            example = repr(float(value))
        except ValueError:
            example = "<number>"
        raise ValueError(
            f"hyperparameter {key!r} is a number (default {default!r}), got the string {value!r}: write it "
            f"unquoted, e.g. +bots.hparams.{key}={example}"
        )


def check_not_null(key: str, value: Any, default: Any) -> None:
    """Refuse a null (None) for a hyperparameter whose default is a value (``float(None)`` would otherwise fail deep
    in a selector with a message that names nothing).

    Raises:
        ValueError: naming ``key`` and its default.
    """
    if value is None and default is not None:
        raise ValueError(
            f"hyperparameter {key!r} is null, but it takes a value (default {default!r}): leave it out to run with "
            "the default, or give a value"
        )


def split_known_params(
    given: Mapping[str, Any], groups: Iterable[tuple[str, Mapping[str, Any]]], named: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Split keyword hyperparameters among parameter groups by name; an unknown name is an error.

    Args:
        given: the keyword arguments a user passed.
        groups: ``(group name, defaults)`` pairs; a name belongs to the first group whose defaults hold it.
        named: numeric hyperparameters that also take a word (DPS's ``prior_alpha="progress"``), which their
            selector checks; any other numeric one refuses a string.

    Returns:
        One dict per group: its defaults updated with the given values that belong to it.

    Raises:
        ValueError: for an unknown name, a null (None) where the default is a value, or a boolean or string where
            the default is a number (:func:`check_number_param`).
    """
    groups = list(groups)
    out = [dict(defaults) for _, defaults in groups]
    for key, value in given.items():
        for i, (_, defaults) in enumerate(groups):
            if key in defaults:
                check_not_null(key, value, defaults[key])
                if not (key in named and isinstance(value, str)):
                    check_number_param(key, value, defaults[key])
                out[i][key] = value
                break
        else:
            known = sorted({k for _, d in groups for k in d})
            raise ValueError(f"unknown hyperparameter {key!r}; known: {known}")
    return out


def require_keys(state: Any, keys: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` unless ``state`` is a mapping holding every key in ``keys`` (naming the missing ones)."""
    if not isinstance(state, Mapping):
        raise ValueError(f"{what} must be a dict, got {type(state).__name__}")
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{what} lacks {missing}")


def check_count(name: str, value: Any, maximum: int = MAX_COUNT) -> int:
    """Return ``value`` as an int in ``[0, maximum]``; floats, booleans and strings are an error."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 0 <= value <= maximum:
        raise ValueError(f"{name} must lie in [0, {maximum}], got {value}")
    return int(value)


def check_real_array(
    name: str, value: Any, shape: tuple[int, ...], *, positive: bool = False, integer: bool = False
) -> np.ndarray:
    """Return ``value`` as a float64 (or int64 with ``integer``) array of ``shape`` with finite entries.

    Args:
        name: what the array is, for messages.
        value: the array (any array-like of real numbers).
        shape: the required shape.
        positive: require every entry > 0.
        integer: require an integer dtype and entries in ``[0, MAX_COUNT]``.

    Raises:
        ValueError: on another shape, dtype (strings, complex, objects), or non-finite / out-of-range entries.
    """
    arr = real_array(name, value, integer=integer)
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
    if integer:
        if arr.size and (arr.min() < 0 or arr.max() > MAX_COUNT):
            raise ValueError(f"{name} must lie in [0, {MAX_COUNT}], got range [{arr.min()}, {arr.max()}]")
        return arr.astype(np.int64)
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has NaN or infinite values")
    if positive and np.any(arr <= 0):
        raise ValueError(f"{name} has non-positive values")
    return arr


def check_scalars(name: str, value: Any) -> dict[str, float]:
    """Return a ``{str: number}`` mapping (logged scalars; NaN allowed) as a plain dict of floats."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict, got {type(value).__name__}")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise ValueError(f"{name} must map names to numbers, got {key!r}: {v!r}")
        out[key] = float(v)
    return out
