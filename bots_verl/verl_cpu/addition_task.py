"""A tiny task, tokenizer and model built locally (no hub), for the smoke run, the benchmark and the CPU tests.

The task is "what is a plus b ?" (``a, b < 10``: 100 tasks) with the answer ``a + b``, a single token of a small
vocabulary; :func:`compute_score` (verl's ``custom_reward_function`` signature) gives 1.0 when the answer token appears
among the response's words. A randomly initialised model (hidden 64, 2 layers) hits it by chance in about 30% of
16-token responses, so most groups of 4 rollouts mix successes and failures and BOTS (and DAPO) have real evidence to
work with. Each row carries a stable ``extra_info.index`` and two synthetic reference pass-rate columns
(``weak_pass_rate``, ``strong_pass_rate``) for BOTS' implicit evidence.

``python -m bots_verl.verl_cpu.addition_task OUT_DIR`` writes ``model/`` (model and tokenizer), ``train.parquet`` and
``val.parquet``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "DATA_SOURCE",
    "build_dataset",
    "build_model",
    "build_toy",
    "compute_score",
    "prompt_length",
    "toy_overrides",
]

DATA_SOURCE = "bots_toy/addition"
SPECIAL = ["<pad>", "<eos>", "<unk>"]
WORDS = ["what", "is", "plus", "?", "user", "assistant"]
MAX_OPERAND = 10
QUESTION = "what is {a} plus {b} ?"
ADDITION_CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}assistant"


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float:
    """1.0 if the ground-truth token is one of the response's whitespace-separated words, else 0.0.

    Never raises on model output: a response that is not a string scores 0.
    """
    if not isinstance(solution_str, str):
        return 0.0
    return 1.0 if str(ground_truth) in solution_str.split() else 0.0


def _vocab() -> list[str]:
    return SPECIAL + WORDS + [str(i) for i in range(2 * MAX_OPERAND - 1)]


def build_model(
    out_dir: str | Path, *, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4, seed: int = 0
) -> Path:
    """Write a WordLevel tokenizer and a randomly initialised Llama (safetensors) to ``out_dir``.

    Args:
        out_dir: directory for the model and tokenizer files (verl's ``actor_rollout_ref.model.path``).
        hidden_size: model width (intermediate size is twice this).
        num_layers: transformer layers.
        num_heads: attention heads (key/value heads: half of them).
        seed: initialisation seed.

    Returns:
        ``out_dir`` as a path.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from bots_verl.verl_cpu.tiny_model import save_random_llama

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = ADDITION_CHAT_TEMPLATE
    fast.save_pretrained(out)
    save_random_llama(
        out,
        vocab_size=len(vocab),
        pad_id=0,
        eos_id=1,
        seed=seed,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        max_positions=512,
    )
    return out


def build_dataset(path: str | Path, num_tasks: int, *, seed: int = 0, split: str = "train") -> Path:
    """Write a verl-format parquet of addition tasks with stable ids and two reference columns.

    Args:
        path: output parquet file.
        num_tasks: rows (at most ``MAX_OPERAND ** 2``).
        seed: order and reference-column seed.
        split: ``extra_info.split``.

    Returns:
        ``path`` as a path.
    """
    import pandas as pd

    if not 1 <= num_tasks <= MAX_OPERAND**2:
        raise ValueError(f"num_tasks={num_tasks} must be in [1, {MAX_OPERAND**2}]")
    rng = np.random.default_rng(seed)
    order = rng.permutation(MAX_OPERAND**2)[:num_tasks]
    weak = rng.uniform(0.0, 0.8, num_tasks)
    rows = []
    for row, j in enumerate(order):
        a, b = int(j % MAX_OPERAND), int(j // MAX_OPERAND)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": QUESTION.format(a=a, b=b)}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": split, "index": int(j)},
                "weak_pass_rate": float(weak[row]),
                "strong_pass_rate": float(min(1.0, weak[row] + 0.2)),
            }
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


def prompt_length() -> int:
    """Tokens of every rendered toy prompt: ``user``, the question's words, ``assistant`` (one token per word)."""
    return 2 + len(QUESTION.split())


def build_toy(out_dir: str | Path, *, num_tasks: int = 100, num_val: int = 8, **model_kwargs: Any) -> dict[str, str]:
    """Model, tokenizer, train and val parquet in ``out_dir``; returns their paths (``model``, ``train``, ``val``)."""
    out = Path(out_dir)
    model = build_model(out / "model", **model_kwargs)
    train = build_dataset(out / "train.parquet", num_tasks, seed=0)
    val = build_dataset(out / "val.parquet", num_val, seed=1, split="val")
    return {"model": str(model), "train": str(train), "val": str(val)}


def toy_overrides(paths: dict[str, str], prompts: int = 8, n: int = 4, response_length: int = 16) -> list[str]:
    """``python -m bots_verl.main`` overrides of a CPU run on the toy task (:func:`build_toy` paths).

    One micro-batch holds the whole step (``prompts * n`` rows), no validation, the toy reward, BOTS with the two
    reference columns; add ``trainer.total_training_steps``, ``trainer.default_local_dir``, ... as needed.
    """
    rows = prompts * n
    return [
        "trainer.device=cpu",
        f"data.train_files={paths['train']}",
        f"data.val_files={paths['val']}",
        f"actor_rollout_ref.model.path={paths['model']}",
        f"data.train_batch_size={prompts}",
        "data.max_prompt_length=32",
        f"data.max_response_length={response_length}",
        f"actor_rollout_ref.rollout.n={n}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={rows}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={rows}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={rows}",
        "reward.custom_reward_function.path=pkg://bots_verl.verl_cpu.addition_task",
        "reward.custom_reward_function.name=compute_score",
        "trainer.logger=[console]",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "bots.selector=bots",
        "bots.reference_columns=[weak_pass_rate,strong_pass_rate]",
    ]


def main(argv: list[str] | None = None) -> None:
    """Command line: write the toy model and data."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    paths = build_toy(args.out_dir, num_tasks=args.tasks, hidden_size=args.hidden_size, num_layers=args.layers)
    for key, value in paths.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
