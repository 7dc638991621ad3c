"""The logistic link in numpy, for the plug-ins that work in log-odds (``irt``, ``neighbours``): the clipped logit and
an in-place sigmoid that allocates nothing the size of the pool."""

from __future__ import annotations

import numpy as np

__all__ = ["logit", "logit_into", "sigmoid_inplace"]


def logit(p: np.ndarray | float, eps: float = 1e-6) -> np.ndarray:
    """Log-odds of ``p`` clipped to ``[eps, 1 - eps]`` (float64 array)."""
    q = np.clip(np.asarray(p, dtype=np.float64), eps, 1.0 - eps)
    return np.log(q) - np.log1p(-q)


def logit_into(p: np.ndarray, eps: float, out: np.ndarray) -> None:
    """:func:`logit` written into ``out`` with one temporary of ``p``'s size (it runs over the whole pool)."""
    q = np.clip(p, eps, 1.0 - eps)
    np.log(q, out=out)
    np.negative(q, out=q)
    np.log1p(q, out=q)
    out -= q


def sigmoid_inplace(z: np.ndarray) -> np.ndarray:
    """The logistic function of ``z``, computed in ``z`` and returned: ``0.5 * (1 + tanh(z / 2))``, which does not
    overflow, with no pool-sized temporary."""
    z *= 0.5
    np.tanh(z, out=z)
    z += 1.0
    z *= 0.5
    return z
