"""Lets verl sync an FSDP actor's weights into vLLM's CPU backend: a vLLM plugin, active only in a CPU-backend run.

On vLLM's CPU platform (vLLM 0.24.0), ``UnquantizedLinearMethod.process_weights_after_loading`` hands each linear
layer's weight to oneDNN (or sgl-kernel), which packs a copy, and then replaces ``layer.weight`` by an empty
``Parameter``. The replacement has no ``weight_loader``, so the next ``model.load_weights`` (verl's weight sync after
every update) stops in the model's loader: ``AttributeError: 'Parameter' object has no attribute 'weight_loader'``
(issue 49). Serving loads the weights once and never meets it; RL reloads them every step.

:func:`register` makes the CPU linear method keep the weight (``remove_weight=False``, which vLLM itself uses for the
vocabulary's linear layer): the parameter, its ``weight_loader`` and its shape stay, verl's sync copies the new values
into it, and verl's ``process_weights_after_loading`` after the sync packs oneDNN's copy again from them. The cost is
a second copy of each linear weight in memory, which the CPU backend's tiny models do not feel.

vLLM loads every ``vllm.general_plugins`` entry point (``setup.py``) in each of its processes. :func:`register` does
nothing unless vLLM runs on its CPU platform inside a run of our CPU backend (``VERL_PLATFORM=cpu``, which
:mod:`bots_verl.verl_cpu.launch` sets for every process of the run), so a GPU run and any other vLLM are untouched.
"""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["register"]

#: marks the method this module installed, so a second :func:`register` in one process changes nothing
_MARK = "_bots_keeps_weight"


def register() -> None:
    """Make vLLM's CPU linear layers keep their weight parameter (a ``vllm.general_plugins`` entry point)."""
    if os.environ.get("VERL_PLATFORM") != "cpu":
        return
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    if getattr(UnquantizedLinearMethod.process_weights_after_loading, _MARK, False):
        return

    def process_weights_after_loading(self: Any, layer: Any) -> None:
        dispatch_cpu_unquantized_gemm(layer, remove_weight=False)

    setattr(process_weights_after_loading, _MARK, True)
    UnquantizedLinearMethod.process_weights_after_loading = process_weights_after_loading
    logger.info("vLLM on CPU: linear layers keep their weights, so verl can sync new ones into them")
