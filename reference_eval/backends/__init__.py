"""Generation backends: ``transformers`` (CPU/small models, used by the tests) and ``vllm`` (GPU, imported lazily).

Both implement :class:`~reference_eval.backends.base.Backend`; :func:`make_backend` picks one by name.
"""

from __future__ import annotations

from typing import Any

from .base import Backend, Messages

__all__ = ["Backend", "Messages", "make_backend", "BACKENDS"]

BACKENDS = ("transformers", "vllm")


def make_backend(name: str, model: str, **kwargs: Any) -> Backend:
    """Build a backend by name; the module is imported only here, so vllm is never needed for the other one.

    Args:
        name: ``transformers`` or ``vllm``.
        model: A local model directory (or a name the backend can load).
        **kwargs: Backend-specific options (see each backend's constructor).

    Returns:
        The backend.

    Raises:
        ValueError: On an unknown name.
    """
    if name == "transformers":
        from .hf import TransformersBackend

        return TransformersBackend(model, **kwargs)
    if name == "vllm":
        from .vllm import VLLMBackend

        return VLLMBackend(model, **kwargs)
    raise ValueError(f"unknown backend {name!r}; choose one of {BACKENDS}")
