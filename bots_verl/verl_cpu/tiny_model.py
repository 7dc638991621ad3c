"""A tiny causal LM with a byte-level tokenizer that reads any text (GURU's prompts, LaTeX, code), built locally.

The recipes' CPU mode (``CPU=1`` in ``recipes/common.sh``) and the CPU pipeline train and evaluate with it in place
of Qwen2.5: nothing is downloaded. The tokenizer is byte-level (every UTF-8 byte is a token, no merges), so every
prompt round-trips exactly whatever its language or symbols, with Qwen2.5's chat markers (``<|im_start|>``,
``<|im_end|>``, ``<|endoftext|>``) as special tokens and a ChatML chat template, as Qwen2.5-Instruct renders GURU's
prompts. The model is a randomly initialised Llama (hidden 64, 2 layers by default): its answers are noise, which is
why the known-answer rollouts (:mod:`bots_verl.verl_cpu.known_answers`) exist.

``python -m bots_verl.verl_cpu.tiny_model OUT_DIR [--seed S] [--hidden-size H] [--layers L]``; an existing model
built with the same settings is kept (its ``tiny_model.json`` records them), another one is an error.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["TINY_CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "save_random_llama"]

#: Qwen2.5's chat markers; ``<|im_end|>`` ends an assistant turn (the end-of-sequence token)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: ChatML, as Qwen2.5-Instruct (without its default system prompt)
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPEC_FILE = "tiny_model.json"
# the longest sequence (prompt + response) the tiny model takes; recipes/common.sh refuses longer CPU-mode sizes
MAX_POSITIONS = 4096


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=core)
    fast.add_special_tokens(
        {
            "pad_token": SPECIAL_TOKENS[0],
            "eos_token": SPECIAL_TOKENS[2],
            "additional_special_tokens": SPECIAL_TOKENS[1:],
        }
    )
    fast.chat_template = TINY_CHAT_TEMPLATE
    return fast


def save_random_llama(
    out_dir: Path,
    *,
    vocab_size: int,
    pad_id: int,
    eos_id: int,
    seed: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    max_positions: int,
) -> None:
    """Write a randomly initialised Llama (safetensors) and its generation config to ``out_dir``.

    The MLP is twice as wide as ``hidden_size``, there are half as many key/value heads as heads, ``eos_id`` is also
    the start token, and the weights depend on ``seed`` alone (``torch.manual_seed`` right before they are drawn).

    Args:
        out_dir: model directory (it exists).
        vocab_size: the tokenizer's size.
        pad_id: padding token id.
        eos_id: end-of-sequence (and start) token id.
        seed: initialisation seed.
        hidden_size: model width.
        num_layers: transformer layers.
        num_heads: attention heads.
        max_positions: longest sequence.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=max_positions,
        pad_token_id=pad_id,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(out_dir)
    GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id).save_pretrained(out_dir)


def build_tiny_model(
    out_dir: str | Path, *, seed: int = 0, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4
) -> Path:
    """Write the byte-level tokenizer and a randomly initialised Llama (safetensors) to ``out_dir``.

    Args:
        out_dir: model directory (verl's ``actor_rollout_ref.model.path``, ``reference_eval collect --model``).
        seed: initialisation seed (two seeds give two different "reference models").
        hidden_size: model width (the MLP is twice as wide).
        num_layers: transformer layers.
        num_heads: attention heads (key/value heads: half of them).

    Returns:
        ``out_dir`` as a path.

    Raises:
        ValueError: if ``out_dir`` holds a tiny model built with other settings.
    """

    out = Path(out_dir)
    spec = {"seed": seed, "hidden_size": hidden_size, "num_layers": num_layers, "num_heads": num_heads, "version": 1}
    marker = out / SPEC_FILE
    if marker.is_file():
        existing = json.loads(marker.read_text())
        if existing != spec:
            raise ValueError(f"{out} holds a tiny model built with {existing}, not {spec}; use another directory")
        return out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    tokenizer.save_pretrained(out)
    pad, eos = tokenizer.convert_tokens_to_ids([SPECIAL_TOKENS[0], SPECIAL_TOKENS[2]])
    save_random_llama(
        out,
        vocab_size=len(tokenizer),
        pad_id=pad,
        eos_id=eos,
        seed=seed,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        max_positions=MAX_POSITIONS,
    )
    # written last: a directory without it is an unfinished build and is rebuilt
    marker.write_text(json.dumps(spec, sort_keys=True))
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: write the tiny model."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        path = build_tiny_model(args.out_dir, seed=args.seed, hidden_size=args.hidden_size, num_layers=args.layers)
    except ValueError as exc:
        raise SystemExit(f"tiny_model: {exc}") from None
    print(path)


if __name__ == "__main__":
    main()
