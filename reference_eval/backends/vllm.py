"""A vLLM backend for GPU collection (tensor parallel within a process; data parallel = one process per shard).

``vllm`` is imported in the constructor only, so this module imports on machines without it (CI, CPU boxes).
Data parallelism is deliberately left outside the backend: run one ``collect`` per GPU (or per Ray node) with
``--num-shards N --shard-index i``; each shard writes its own results file and ``merge`` reads them all. That keeps
every process resumable on its own and needs no coordination.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from .base import Messages

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["VLLMBackend"]


class VLLMBackend:
    """Sample with ``vllm.LLM.generate``, one ``SamplingParams`` (with its own seed) per prompt.

    Args:
        model: A model directory or name vLLM can load.
        tensor_parallel_size: GPUs per model replica.
        gpu_memory_utilization: The fraction of GPU memory vLLM may take.
        max_model_len: The context length to allocate (default: the model's).
        dtype: The weight dtype (``auto`` = the checkpoint's).
        chat_template_kwargs: Extra keyword arguments for ``apply_chat_template``.
        **llm_kwargs: Passed on to ``vllm.LLM``.
    """

    name = "vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        chat_template_kwargs: dict[str, Any] | None = None,
        **llm_kwargs: Any,
    ) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError as err:
            raise ImportError("the vllm backend needs vllm: pip install 'bots-verl[gpu]'") from err
        self._sampling_params = SamplingParams
        self.llm = LLM(
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            dtype=dtype,
            **llm_kwargs,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.chat_template_kwargs = dict(chat_template_kwargs or {})

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
        """Sample ``n`` completions per prompt; see :class:`~reference_eval.backends.base.Backend`."""
        if len(seeds) != len(prompts):
            raise ValueError(f"need one seed per prompt, got {len(seeds)} seeds for {len(prompts)} prompts")
        inputs = []
        params = []
        for messages, seed in zip(prompts, seeds, strict=True):
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
            )
            # Token ids rather than text: re-tokenising rendered text would add a second BOS for templates that
            # already contain one.
            inputs.append({"prompt_token_ids": self.tokenizer(text, add_special_tokens=False)["input_ids"]})
            extra = {"top_k": top_k} if top_k > 0 else {}
            params.append(
                self._sampling_params(
                    n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, **extra
                )
            )
        outputs = self.llm.generate(inputs, sampling_params=params, use_tqdm=False)
        return [[c.text for c in o.outputs] for o in outputs]
