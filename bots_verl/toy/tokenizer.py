"""The testbed's character tokenizer: 18 symbols, saved as a transformers tokenizer with a chat template.

verl renders every prompt with ``tokenizer.apply_chat_template(messages, add_generation_prompt=True)`` and decodes
responses with ``skip_special_tokens=True``; both must work on a locally built tokenizer (nothing comes from the hub).

- Vocabulary: ``<pad> <s> </s> <unk>`` then ``0-9 + - * =``; the code and logic families append their own characters
  (:func:`vocab_of`), so the shared ones keep their ids. Any other character becomes ``<unk>``.
- Every character is one token (a regex pre-tokenizer isolates each one) and decoding concatenates tokens without
  spaces (``Fuse`` decoder), so ``decode(encode("1234"))`` is ``"1234"``.
- Chat template: ``<s>`` + the user message + ``=`` as the generation prompt; an assistant turn renders as
  ``=<answer></s>``, so ``render([user, assistant])`` is exactly the prompt followed by the supervised response, the
  sequence the warm-up trains on. Other roles (system, tool) raise: the toy prompts never carry them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

logger = logging.getLogger(__name__)

__all__ = [
    "BOS",
    "CHARS",
    "TOY_CHAT_TEMPLATE",
    "EOS",
    "PAD",
    "SPECIAL",
    "UNK",
    "VOCAB",
    "build_tokenizer",
    "encode",
    "vocab_of",
]

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL = (PAD, BOS, EOS, UNK)
CHARS = tuple("0123456789+-*=")
VOCAB: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL + CHARS)}


def vocab_of(family: str = "arith") -> dict[str, int]:
    """The vocabulary of a task family (:mod:`bots_verl.toy.families`): :data:`VOCAB` plus its characters."""
    from bots_verl.toy.families import family_of

    extra = family_of(family).extra_chars
    return {tok: i for i, tok in enumerate(SPECIAL + CHARS + extra)}


TOY_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ message['content'] }}"
    "{% elif message['role'] == 'assistant' %}={{ message['content'] }}{{ eos_token }}"
    "{% else %}{{ raise_exception('the toy chat template supports user and assistant turns only') }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}={% endif %}"
)


def build_tokenizer(path: str | os.PathLike | None = None, family: str = "arith") -> PreTrainedTokenizerFast:
    """Build the character tokenizer and, with ``path``, save it there (``AutoTokenizer.from_pretrained`` loads it).

    Args:
        path: directory to save to (created).
        family: the task family whose vocabulary to use (:func:`vocab_of`).

    Returns:
        The tokenizer.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab=vocab_of(family), unk_token=UNK))
    # "[\s\S]": a newline (the code family's fences) is a character like any other
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]" if family != "arith" else "."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK, padding_side="left"
    )
    tok.chat_template = TOY_CHAT_TEMPLATE
    if path is not None:
        Path(path).mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(str(path))
    return tok


def encode(prompt: str, answer: str | None = None, vocab: dict[str, int] = VOCAB) -> tuple[list[int], int]:
    """Token ids of ``<s>prompt=`` (and ``answer</s>`` when given), without a tokenizer object.

    The same ids as rendering the chat template and tokenizing it (a test checks this); the warm-up and the
    calibration use this fast path.

    Args:
        prompt: the user message, e.g. ``"12+34"``.
        answer: the response, e.g. ``"46"``.
        vocab: the family's vocabulary (:func:`vocab_of`).

    Returns:
        ``(ids, prompt_length)``: the ids and how many of them belong to the prompt (``<s>`` .. ``=``).
    """
    unk = vocab[UNK]
    ids = [vocab[BOS], *(vocab.get(ch, unk) for ch in prompt), vocab["="]]
    n_prompt = len(ids)
    if answer is not None:
        ids += [*(vocab.get(ch, unk) for ch in answer), vocab[EOS]]
    return ids, n_prompt
