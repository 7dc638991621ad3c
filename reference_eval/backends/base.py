"""The backend interface: chat prompts in, ``n`` sampled completions per prompt out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Backend", "Messages"]

Messages = list[dict[str, Any]]


@runtime_checkable
class Backend(Protocol):
    """What collect needs from a generator.

    ``seeds`` holds one seed per prompt rather than one per call: a prompt's samples then depend only on its own seed,
    not on which batch it landed in, so a resumed or sharded collect reproduces an uninterrupted one.
    """

    name: str

    def generate(
        self,
        prompts: Sequence[Messages],
        n: int,
        temperature: float,
        max_tokens: int,
        seeds: Sequence[int],
        top_p: float = 1.0,
        top_k: int = -1,
    ) -> list[list[str]]:
        """Sample ``n`` completions for every prompt.

        Args:
            prompts: Chat messages per prompt; the backend renders them with the model's chat template.
            n: Completions per prompt.
            temperature: Sampling temperature (0 = greedy).
            max_tokens: The maximum number of new tokens per completion.
            seeds: One seed per prompt.
            top_p: Nucleus sampling mass (1.0 = off).
            top_k: Top-k sampling (-1 = off).

        Returns:
            ``len(prompts)`` lists of ``n`` completion strings (the prompt excluded).
        """
        ...
