"""Tiny decoder-only models for the testbed: ``transformers.LlamaForCausalLM`` built from a seed, no hub access.

A plain Llama (RoPE, RMSNorm, SwiGLU) so that verl's FSDP engine, the ``hf`` rollout and ``reference_eval``'s
transformers backend load it like any other causal LM. The policy is the size a CPU probe found useful (hidden 128,
4 layers, ~1.05M parameters); the references are wider and deeper, like the paper's references are larger models
than the policy.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from bots_verl.toy.tokenizer import BOS, EOS, PAD, VOCAB

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

logger = logging.getLogger(__name__)

__all__ = ["ModelSpec", "build_model", "count_parameters"]


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a tiny Llama.

    Attributes:
        hidden: hidden size.
        layers: decoder layers.
        heads: attention heads (key/value heads too: no grouped-query attention at this size).
        intermediate: MLP width (SwiGLU).
        max_positions: longest sequence (prompt + response) the model is built for; the longest toy sequence is
            ``<s>1234*5678=7006652</s>``, 20 tokens.
    """

    hidden: int = 128
    layers: int = 4
    heads: int = 4
    intermediate: int = 512
    max_positions: int = 64

    def __post_init__(self) -> None:
        if min(self.hidden, self.layers, self.heads, self.intermediate, self.max_positions) < 1:
            raise ValueError(f"every size must be positive: {self}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-ready dict."""
        return asdict(self)


def build_model(spec: ModelSpec, seed: int, vocab: dict[str, int] = VOCAB) -> LlamaForCausalLM:
    """A freshly initialised model; the same ``spec`` and ``seed`` give bitwise the same weights.

    Args:
        spec: the architecture.
        seed: fixes the initial weights (``torch.manual_seed`` right before construction).
        vocab: the task family's vocabulary (:func:`bots_verl.toy.tokenizer.vocab_of`).

    Returns:
        The model in float32, in train mode.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        max_position_embeddings=spec.max_positions,
        pad_token_id=vocab[PAD],
        bos_token_id=vocab[BOS],
        eos_token_id=vocab[EOS],
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = vocab[PAD]
    model.generation_config.eos_token_id = vocab[EOS]
    model.generation_config.bos_token_id = vocab[BOS]
    return model


def count_parameters(model: Any) -> int:
    """Trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())
