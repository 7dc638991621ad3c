"""The sampler's checkpoint state in verl's ``data.pt``: its versions, the torch-safe encoding, and reading it back.

``StatefulDataLoader`` stores :meth:`BOTSSampler.state_dict <bots_verl.integration.transport.sampler.BOTSSampler>`
under ``_sampler_iter_state.sampler_state``. The state is a plain dict of Python values and tensors
(:func:`to_torch_safe`), so ``data.pt`` loads with verl's ``torch.load(weights_only=False)`` and under
``weights_only=True`` too. Its versions:

1. the selector state (posterior and RNG), the selections not served yet, the batch size and the pool's task ids;
2. the number of posterior updates and of rollouts received (stored as ``attempts``) and the per-step dispatch log;
3. ``fingerprint``: what the posterior means (:mod:`bots_verl.integration.safety.fingerprint`);
4. ``inflight``: the in-flight ledger of the asynchronous modes.

Every version still loads: a field a version lacks takes its neutral value (no fingerprint, nothing in flight).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "READABLE_STATE_VERSIONS",
    "STATE_VERSION",
    "checkpoint_sampler_state",
    "from_torch_safe",
    "missing_sampler_state",
    "to_torch_safe",
]

STATE_VERSION = 4
READABLE_STATE_VERSIONS = (1, 2, 3, 4)


def to_torch_safe(value: Any) -> Any:
    """Replace numpy arrays and scalars by torch tensors and Python scalars, recursively.

    verl loads ``data.pt`` with ``torch.load(weights_only=False)``, which would accept numpy; converting anyway keeps
    the checkpoint loadable under ``weights_only=True`` (PyTorch's default) and free of pickled numpy internals.
    """
    import torch

    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [to_torch_safe(v) for v in value.tolist()]
        return {"__ndarray__": torch.from_numpy(np.array(value, copy=True))}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: to_torch_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_torch_safe(v) for v in value)
    return value


def from_torch_safe(value: Any) -> Any:
    """Inverse of :func:`to_torch_safe` (tensors marked as arrays become numpy arrays again)."""
    if isinstance(value, dict):
        if set(value) == {"__ndarray__"}:
            return value["__ndarray__"].numpy().copy()
        return {k: from_torch_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(from_torch_safe(v) for v in value)
    return value


def missing_sampler_state(state: Any) -> str | None:
    """Why a loaded ``data.pt`` holds no BOTS sampler state, or ``None`` when it holds one."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not a dataloader state"
    iter_state = state.get("_sampler_iter_state")
    if not isinstance(iter_state, dict) or not isinstance(iter_state.get("sampler_state"), dict):
        # torchdata stores a sampler's own state under this key only for samplers with state_dict, like ours;
        # plain verl's samplers leave just a count of samples yielded.
        return "its '_sampler_iter_state' has no 'sampler_state' (written by plain verl or another sampler)"
    sampler_state = iter_state["sampler_state"]
    if sampler_state.get("version") not in READABLE_STATE_VERSIONS or "selector_state" not in sampler_state:
        return (
            f"its 'sampler_state' is not a BOTSSampler's (version {sampler_state.get('version')!r}, readable: "
            f"{list(READABLE_STATE_VERSIONS)}; keys {sorted(map(str, sampler_state))})"
        )
    return None


def checkpoint_sampler_state(data_pt: str | os.PathLike[str]) -> dict[str, Any]:
    """The BOTS sampler state stored in one of verl's ``global_step_N/data.pt`` files.

    Selector state (posterior, RNG), ``updates``, ``attempts`` (the rollouts received), ``dispatch_log`` and, from
    state version 3, the run's ``fingerprint``; numpy arrays come back as numpy.

    Args:
        data_pt: the file.

    Returns:
        The sampler state, its ``selector_state`` decoded.

    Raises:
        ValueError: if the file cannot be read as a torch checkpoint, or holds no BOTS sampler state (e.g. a run
            without BOTS); the message names the file and what is missing.
    """
    import torch

    if not os.path.isfile(data_pt):
        raise ValueError(f"{data_pt} cannot be read as a torch checkpoint (no such file)")
    try:
        # verl loads data.pt the same way (the file is as trusted as the rest of the checkpoint).
        state = torch.load(data_pt, weights_only=False)
    except Exception as err:  # a cut or damaged file fails in many ways, e.g. OSError EINVAL from a seek
        raise ValueError(f"{data_pt} cannot be read as a torch checkpoint ({type(err).__name__}: {err})") from err
    missing = missing_sampler_state(state)
    if missing is not None:
        raise ValueError(f"{data_pt} holds no BOTS sampler state: {missing}")
    sampler_state = state["_sampler_iter_state"]["sampler_state"]
    try:
        selector_state = from_torch_safe(sampler_state["selector_state"])
    except Exception as err:  # a hand-edited state: name the file, not a deep conversion error
        raise ValueError(f"{data_pt} holds a malformed BOTS selector state ({type(err).__name__}: {err})") from err
    return {**sampler_state, "selector_state": selector_state}
