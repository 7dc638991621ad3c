"""``embed``: one vector per prompt of a verl parquet, for BOTS's task-similarity graph (issue 36).

Two methods, both generic over text pools (GURU math, code, logic): nothing here knows what a prompt is about.

- ``text``: the prompt text alone, numpy only. The chat messages' contents, joined by newlines and case-folded, are cut
  into overlapping UTF-8 byte n-grams (2, 3 and 4 bytes); each n-gram is hashed into one of ``2**buckets_log2``
  buckets, weighted by sublinear TF-IDF (``(1 + log tf) * (log((1 + N) / (1 + df)) + 1)``) over the file, L2-normalised,
  and projected to ``dims`` coordinates by a seeded sparse random projection (every bucket adds ``±1/sqrt(s)`` to
  ``s = 4`` coordinates chosen by a seeded hash), then L2-normalised again. Byte n-grams cover every script and
  every formula, code or puzzle alike.
- ``policy``: the policy model's own hidden states at step 0 (``transformers``): the prompt rendered with the model's
  chat template and the generation prompt, as the rollout sees it; the last hidden layer, mean-pooled over the prompt
  tokens (the attention mask), L2-normalised. Batched, with right padding (a causal model's states at real tokens do
  not see the padding).

The output is the embedding file format of :mod:`bots_verl.integration.evidence.embeddings`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.integration.evidence.embeddings import write_embedding_file

from .data import DataError, read_table, task_ids

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["EMBED_METHODS", "EmbedReport", "embed", "policy_embeddings", "read_prompts", "text_embeddings"]

EMBED_METHODS = ("text", "policy")

#: byte n-gram sizes of the text method
NGRAMS = (2, 3, 4)
#: coordinates each hashed bucket adds to in the sparse random projection
PROJECTION_NONZEROS = 4
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass
class EmbedReport:
    """What an ``embed`` run wrote.

    Attributes:
        tasks: rows embedded.
        dims: coordinates per row.
        method: ``text`` or ``policy``.
        seconds: wall-clock of the embedding itself.
        out: the embedding file.
    """

    tasks: int
    dims: int
    method: str
    seconds: float
    out: str

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-ready dict."""
        return dict(self.__dict__)


def read_prompts(
    path: str | os.PathLike, id_column: str = "task_id", prompt_column: str = "prompt"
) -> tuple[list[int | str], list[list[dict[str, str]]]]:
    """Task ids and chat messages of every row (ids checked as ``collect`` checks them: present, usable, unique).

    Raises:
        DataError: naming the file and row for an unreadable file, a missing column or a malformed prompt.
    """
    table = read_table(path)
    try:
        if table.num_rows == 0:
            raise DataError("the parquet has no rows")
        if prompt_column not in table.column_names:
            raise DataError(f"required column {prompt_column!r} not found; the file has {table.column_names}")
        ids = task_ids(table, id_column)
        prompts = []
        for row, value in enumerate(table.column(prompt_column).to_pylist()):
            if not isinstance(value, list) or not value:
                raise DataError(f"row {row}: {prompt_column!r} must be a non-empty list of chat messages")
            for msg in value:
                if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
                    raise DataError(f"row {row}: every message in {prompt_column!r} needs a string 'content'")
            prompts.append([{"role": str(m.get("role")), "content": m["content"]} for m in value])
    except DataError as err:
        raise DataError(f"{path}: {err}") from None
    return ids, prompts


def _seeded_u64(seed: int, count: int) -> np.ndarray:
    """``count`` odd 64-bit multipliers drawn from ``seed`` (multiplicative hashing)."""
    rng = np.random.default_rng([seed, 36])
    return rng.integers(1, 2**63, size=count, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _ngram_buckets(texts: Sequence[str], buckets_log2: int) -> tuple[np.ndarray, np.ndarray]:
    """(document, bucket) of every byte n-gram of ``texts`` (n in :data:`NGRAMS`), all vectorised."""
    encoded = [t.casefold().encode("utf-8") for t in texts]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.uint64)
    doc_of_byte = np.repeat(np.arange(len(encoded), dtype=np.int64), lengths)
    ends = np.cumsum(lengths)
    docs, buckets = [], []
    shift = np.uint64(64 - buckets_log2)
    with np.errstate(over="ignore"):
        for n in NGRAMS:
            if data.size < n:
                continue
            count = data.size - n + 1
            # a polynomial hash over the n bytes; n-grams that cross a document boundary are dropped
            h = np.full(count, np.uint64(n), dtype=np.uint64)
            for j in range(n):
                h = (h * np.uint64(1099511628211)) ^ data[j : j + count]
            start_doc = doc_of_byte[:count]
            keep = np.arange(count) + n <= ends[start_doc]
            h = (h[keep] * np.uint64(0x9E3779B97F4A7C15)) >> shift
            docs.append(start_doc[keep])
            buckets.append(h.astype(np.int64))
    if not docs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(docs), np.concatenate(buckets)


def _term_counts(texts: Sequence[str], buckets_log2: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sparse term counts: (document, bucket, count) with one entry per distinct (document, bucket)."""
    docs, buckets = _ngram_buckets(texts, buckets_log2)
    keys, counts = np.unique(docs * (1 << buckets_log2) + buckets, return_counts=True)
    return keys >> buckets_log2, keys & ((1 << buckets_log2) - 1), counts


def text_embeddings(
    texts: Sequence[str], dims: int = 256, seed: int = 0, buckets_log2: int = 20, chunk: int = 4096
) -> np.ndarray:
    """The ``text`` method: hashed byte n-gram TF-IDF, seeded sparse random projection, L2 rows (module docstring).

    Args:
        texts: one prompt text per task.
        dims: output coordinates.
        seed: seed of the projection (same seed, same vectors).
        buckets_log2: log2 of the number of hash buckets before the projection.
        chunk: documents per pass (bounds the memory of the n-gram arrays).

    Returns:
        ``(len(texts), dims)`` float32; an empty text gives a zero row.
    """
    if dims < 1:
        raise ValueError(f"dims must be >= 1, got {dims}")
    if not 8 <= buckets_log2 <= 30:
        raise ValueError(f"buckets_log2 must be in [8, 30], got {buckets_log2}")
    n_docs = len(texts)
    df = np.zeros(1 << buckets_log2, dtype=np.int64)
    for lo in range(0, n_docs, chunk):
        _, buckets, _ = _term_counts(texts[lo : lo + chunk], buckets_log2)
        df += np.bincount(buckets, minlength=df.size)
    idf = np.log((1.0 + n_docs) / (1.0 + df)) + 1.0
    mult = _seeded_u64(seed, 2 * PROJECTION_NONZEROS)
    out = np.zeros((n_docs, dims), dtype=np.float64)
    scale = 1.0 / np.sqrt(PROJECTION_NONZEROS)
    for lo in range(0, n_docs, chunk):
        docs, buckets, counts = _term_counts(texts[lo : lo + chunk], buckets_log2)
        weights = (1.0 + np.log(counts)) * idf[buckets]
        norms = np.sqrt(np.bincount(docs, weights=weights**2, minlength=min(chunk, n_docs - lo)))
        weights = weights / np.maximum(norms[docs], 1e-12)
        block = np.zeros(min(chunk, n_docs - lo) * dims, dtype=np.float64)
        b = buckets.astype(np.uint64)
        with np.errstate(over="ignore"):
            for j in range(PROJECTION_NONZEROS):
                coord = ((b * mult[2 * j]) >> np.uint64(32)) % np.uint64(dims)
                sign = np.where(((b * mult[2 * j + 1]) >> np.uint64(63)) == 0, 1.0, -1.0)
                block += np.bincount(
                    docs * dims + coord.astype(np.int64), weights=sign * weights * scale, minlength=block.size
                )
        out[lo : lo + len(norms)] = block.reshape(-1, dims)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.maximum(norms, 1e-12)).astype(np.float32)


def prompt_text(messages: Sequence[dict[str, str]]) -> str:
    """The text of a prompt for the ``text`` method: the messages' contents, one per line (roles left out)."""
    return "\n".join(m["content"] for m in messages)


def policy_embeddings(
    model: str,
    prompts: Sequence[Sequence[dict[str, str]]],
    *,
    batch_size: int = 32,
    device: str | None = None,
    dtype: str = "float32",
    max_length: int | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
    progress: bool = False,
) -> np.ndarray:
    """The ``policy`` method: mean-pooled last hidden layer of ``model`` over each rendered prompt, L2 rows.

    Args:
        model: a local model directory (the policy at step 0) with a tokenizer that has a chat template.
        prompts: chat messages per task.
        batch_size: prompts per forward pass.
        device: ``cpu``, ``cuda``, ... (default: cuda if available).
        dtype: torch dtype name of the weights.
        max_length: truncate longer rendered prompts to this many tokens (None: no truncation).
        chat_template_kwargs: extra ``apply_chat_template`` keywords (the training run's).
        progress: show a tqdm bar.

    Returns:
        ``(len(prompts), hidden_size)`` float32.

    Raises:
        ValueError: for a tokenizer without a chat template.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(model)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"the tokenizer of {model} has no chat template; verl renders prompts with one")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token if tokenizer.eos_token is not None else tokenizer.unk_token
    tokenizer.padding_side = "right"
    net = AutoModel.from_pretrained(model, dtype=getattr(torch, dtype)).to(device)
    net.eval()
    kwargs = dict(chat_template_kwargs or {})
    texts = [
        tokenizer.apply_chat_template(list(p), tokenize=False, add_generation_prompt=True, **kwargs) for p in prompts
    ]
    out = np.zeros((len(texts), net.config.hidden_size), dtype=np.float32)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(texts), unit="prompt", desc="embed", dynamic_ncols=True)
    with torch.no_grad():
        for lo in range(0, len(texts), batch_size):
            enc = tokenizer(
                texts[lo : lo + batch_size],
                return_tensors="pt",
                padding=True,
                truncation=max_length is not None,
                max_length=max_length,
                add_special_tokens=False,
            ).to(device)
            hidden = net(**enc).last_hidden_state.float()
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)
            out[lo : lo + pooled.shape[0]] = pooled.cpu().numpy()
            if bar is not None:
                bar.update(pooled.shape[0])
    if bar is not None:
        bar.close()
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


def embed(
    data: str | os.PathLike,
    out: str | os.PathLike,
    method: str,
    *,
    model: str | None = None,
    dims: int = 256,
    seed: int = 0,
    id_column: str = "task_id",
    prompt_column: str = "prompt",
    batch_size: int = 32,
    device: str | None = None,
    dtype: str = "float32",
    max_length: int | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
    force: bool = False,
    progress: bool = True,
) -> EmbedReport:
    """Embed every prompt of ``data`` and write the embedding file ``out``.

    Args:
        data: a verl-format parquet (the training pool).
        out: the embedding file to write (atomically).
        method: ``text`` or ``policy``.
        model: ``policy``: the policy model directory at step 0.
        dims: ``text``: output coordinates (``policy`` gives the model's hidden size).
        seed: ``text``: projection seed.
        id_column: the stable task id column (dotted for struct fields): the one training matches by
            (``bots.task_id_field``).
        prompt_column: the chat-messages column.
        batch_size, device, dtype, max_length, chat_template_kwargs: ``policy`` only (:func:`policy_embeddings`).
        force: overwrite an existing ``out``.
        progress: a progress bar (``policy``).

    Raises:
        DataError: malformed input (before any model loads).
        ValueError: an unknown method, a missing ``--model``, or an existing ``out`` without ``force``.
    """
    if method not in EMBED_METHODS:
        raise ValueError(f"--method must be one of {EMBED_METHODS}, got {method!r}")
    if method == "policy" and not model:
        raise ValueError("--method policy needs --model (the policy model directory at step 0)")
    if method == "text" and model:
        raise ValueError("--method text reads the prompt text only; drop --model")
    if Path(out).exists() and not force:
        raise ValueError(f"{out} exists; pass --force to overwrite it")
    ids, prompts = read_prompts(data, id_column, prompt_column)
    start = time.monotonic()
    meta: dict[str, Any] = {"method": method, "source": str(data), "id_column": id_column}
    if method == "text":
        vectors = text_embeddings([prompt_text(p) for p in prompts], dims=dims, seed=seed)
        meta.update(seed=seed, ngrams=list(NGRAMS), projection_nonzeros=PROJECTION_NONZEROS, model=None)
    else:
        vectors = policy_embeddings(
            str(model),
            prompts,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
            max_length=max_length,
            chat_template_kwargs=chat_template_kwargs,
            progress=progress,
        )
        meta.update(model=str(model), pooling="mean last hidden layer over the chat-templated prompt", dtype=dtype)
        meta["chat_template_kwargs"] = dict(chat_template_kwargs or {})
    seconds = time.monotonic() - start
    write_embedding_file(out, ids, vectors, meta)
    report = EmbedReport(len(ids), int(vectors.shape[1]), method, seconds, str(out))
    logger.info("embed done: %s", report.to_dict())
    return report
