"""Helpers for the reference_eval tests: a tiny random-weight Llama, a word-level tokenizer, a verl parquet.

Nothing comes from the hub. The vocabulary contains ``\\boxed{1}``..``\\boxed{3}`` as single tokens, and the
random model's logits are close to uniform, so sampled answers hit the ground truth often enough that pass rates
spread over 0..1 instead of all being 0.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reference_eval import Settings, collect, read_results
from reference_eval.scoring import resolve_scorer

WORDS = ["what", "is", "the", "answer", "to", "question", "user", "assistant", ":", "1", "2", "3"]
BOXED = ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"]
SPECIAL = ["[PAD]", "[UNK]", "<s>", "</s>"]
FIXTURE_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)
N_ROWS = 20
N = 4  # samples per prompt in the tests
SCORER = resolve_scorer("auto")


def build_tiny_model(path: Path) -> Path:
    """Save a 2-layer, hidden-16 Llama and a WordLevel tokenizer with a chat template to ``path``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + WORDS + BOXED)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = FIXTURE_CHAT_TEMPLATE
    fast.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=vocab["[PAD]"],
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def make_rows(n: int = N_ROWS) -> list[dict]:
    """verl-format rows; task ids are 100 + row so that id and position differ; the last row repeats row 0's prompt."""
    rows = []
    for i in range(n):
        answer = str(i % 3 + 1)
        text = f"what is the answer to question {answer} {'1 ' * (i // 3)}".strip()
        rows.append(
            {
                "data_source": "math",
                "prompt": [{"role": "user", "content": text}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": answer},
                "extra_info": {"index": i, "split": "train"},
                "task_id": 100 + i,
            }
        )
    rows[-1]["prompt"] = rows[0]["prompt"]
    rows[-1]["reward_model"] = rows[0]["reward_model"]
    return rows


def write_rows(rows: list[dict], path: Path) -> Path:
    """Write rows as parquet."""
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def settings(**overrides) -> Settings:
    """The tests' collect settings (the tiny model, N samples of at most 3 tokens)."""
    base = dict(model="tiny", n=N, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=3, seed=0, scorer=SCORER.name)
    base.update(overrides)
    return Settings(**base)


def run(data: Path, out: Path, backend, **kwargs):
    """``collect`` with the tests' defaults (batch size 8, no progress bar, :func:`settings`, :data:`SCORER`)."""
    kwargs.setdefault("batch_size", 8)
    kwargs.setdefault("progress", False)
    scorer = kwargs.pop("scorer", SCORER)
    return collect(data, out, backend, kwargs.pop("settings", settings()), scorer, **kwargs)


def by_id(path: Path) -> dict:
    """The records of a results file by task id."""
    return {r["task_id"]: r for r in read_results(path)}


class NoGeneration:
    """A backend factory that fails the test if anything tries to build a backend (i.e. to generate)."""

    def __call__(self):
        raise AssertionError("generation started although the input is invalid")
