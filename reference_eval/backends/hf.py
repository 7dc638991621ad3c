"""A ``transformers`` backend for small models on CPU (or one GPU); the tests use it with a tiny random model."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from .base import Messages

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["TransformersBackend"]


class TransformersBackend:
    """Sample with ``model.generate``, one prompt at a time.

    One prompt per call is slow but keeps results exact: no padding (left-padded batches change the logits slightly)
    and a seed per prompt, so a prompt's completions are the same whatever else is in the batch.

    Args:
        model: A local model directory with a tokenizer that has a chat template.
        device: ``cpu``, ``cuda``, ... (default: cuda if available, else cpu).
        dtype: A torch dtype name (default float32, the only exact choice on CPU).
        chat_template_kwargs: Extra keyword arguments for ``apply_chat_template`` (e.g. ``{"enable_thinking": False}``).
    """

    name = "transformers"

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str = "float32",
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer of {model} has no chat template; verl renders prompts with one")
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).to(self.device)
        self.model.eval()
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        # Without a pad token generate() warns on every call and pads with eos anyway.
        self.pad_token_id = self.tokenizer.pad_token_id
        if self.pad_token_id is None:
            self.pad_token_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0

    def render(self, messages: Messages) -> str:
        """Render chat messages as the prompt text, with the generation prompt appended."""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
        )

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
        torch = self._torch
        if len(seeds) != len(prompts):
            raise ValueError(f"need one seed per prompt, got {len(seeds)} seeds for {len(prompts)} prompts")
        sample = temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": max_tokens, "num_return_sequences": n, "do_sample": sample}
        if sample:
            # top_k=0 disables top-k in transformers; -1 is our "off".
            kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k if top_k > 0 else 0)
        out: list[list[str]] = []
        for messages, seed in zip(prompts, seeds, strict=True):
            text = self.render(messages)
            enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.device)
            torch.manual_seed(seed)
            with torch.no_grad():
                gen = self.model.generate(**enc, pad_token_id=self.pad_token_id, **kwargs)
            new_tokens = gen[:, enc["input_ids"].shape[1] :]
            out.append(self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
        return out
