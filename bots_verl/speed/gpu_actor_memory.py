"""The recipes' actor micro-batches on one GPU: train-step and log-prob timings, activations, the per-GPU FSDP table.

Run as ``python -m bots_verl.speed.gpu_actor_memory [--sizes 1.5b 7b] [--warmup 2] [--repeat 5]`` on any CUDA GPU
(``--table-only``: no GPU, the table from the measured inputs of :mod:`bots_verl.config.gpu_memory`). Reproduces the
measurement of ``recipes/results/gpu_h200.md``: Qwen2.5-1.5B and -7B built from their configs' numbers (written
here, nothing from the hub) with random weights, bf16, sdpa attention, gradient checkpointing, micro-batches of
2 x 12,288 and 6 x 4,096 tokens (the recipes' 24,576 tokens per GPU). A train step is forward, per-token log-probs
and backward (the gradients stay allocated between steps, so the activations are the step's peak above weights and
gradients); a log-prob pass is the forward without gradients. Log-probs go through a chunked, in-place log-softmax,
the memory behaviour of flash-attn's cross-entropy that verl uses with ``use_remove_padding``. Timed with CUDA events
after warm-ups. Then the per-GPU table of verl's FSDP actor is computed from the activations measured here
(:func:`bots_verl.config.gpu_memory.estimate`), for an 80 GB card and this one.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence

from bots_verl.config.gpu_memory import GIB, MEASURED, QWEN25_1_5B, QWEN25_7B, ModelShape, estimate

logger = logging.getLogger(__name__)

SIZES = {"1.5b": QWEN25_1_5B, "7b": QWEN25_7B}
#: (sequences, tokens each) per micro-batch: two full-length sequences, and six of a third of the length
CASES = ((2, 12_288), (6, 4_096))
TABLE_GPUS = (8, 4, 2, 1)
# tokens per chunk of the log-softmax: a [chunk, vocab] fp32 slice at a time
CHUNK = 4_096


def token_log_probs(logits, targets):
    """log softmax(logits)[target] per row, chunked in fp32, with the gradient written into ``logits`` in place."""
    return _TokenLogProb.apply(logits, targets)


def _autograd_function():
    import torch

    class TokenLogProb(torch.autograd.Function):
        """Saves the bf16 logits once and overwrites them with their gradient in the backward (no fp32 copy)."""

        @staticmethod
        def forward(ctx, logits, targets):
            lse = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
            picked = torch.empty_like(lse)
            for start in range(0, logits.shape[0], CHUNK):
                rows = slice(start, start + CHUNK)
                chunk = logits[rows].float()
                lse[rows] = torch.logsumexp(chunk, dim=-1)
                picked[rows] = chunk.gather(1, targets[rows, None]).squeeze(1)
            ctx.save_for_backward(logits, targets, lse)
            return picked - lse

        @staticmethod
        def backward(ctx, grad):
            logits, targets, lse = ctx.saved_tensors
            for start in range(0, logits.shape[0], CHUNK):
                rows = slice(start, start + CHUNK)
                g = grad[rows, None].float()
                chunk = torch.exp(logits[rows].float() - lse[rows, None]).mul_(-g)  # d/dlogits = g (onehot - softmax)
                chunk.scatter_add_(1, targets[rows, None], g)
                logits[rows] = chunk.to(logits.dtype)
            return logits, None

    return TokenLogProb


class _Lazy:
    """The autograd function, built on first use (torch is imported only by those who run the benchmark)."""

    def __init__(self) -> None:
        self._fn = None

    def apply(self, *args):
        if self._fn is None:
            self._fn = _autograd_function()
        return self._fn.apply(*args)


_TokenLogProb = _Lazy()


def build_model(shape: ModelShape, device: str):
    """``shape``'s Qwen2 model with random weights, bf16, sdpa attention, gradient checkpointing, in train mode."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        tie_word_embeddings=shape.tie_word_embeddings,
        max_position_embeddings=32_768,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        use_cache=False,
    )
    config._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model.train()


def sequence_log_probs(model, input_ids):
    """Per-token log-probs of ``input_ids`` (each token given the ones before), shape [batch * length]."""
    import torch

    hidden = model.model(input_ids=input_ids).last_hidden_state
    logits = model.lm_head(hidden.reshape(-1, hidden.shape[-1]))
    targets = torch.roll(input_ids, -1, dims=1).reshape(-1)
    return token_log_probs(logits, targets)


def train_step(model, input_ids) -> None:
    """Forward, log-probs, backward of a policy-gradient-shaped loss (the mean log-prob)."""
    loss = -sequence_log_probs(model, input_ids).mean()
    loss.backward()


def _timed(fn: Callable[[], None], device: str, warmup: int, repeat: int) -> float:
    """Median seconds of ``fn`` after ``warmup`` calls (CUDA events on a GPU)."""
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def measure(shape: ModelShape, device: str, cases: Sequence[tuple[int, int]], warmup: int, repeat: int) -> list[dict]:
    """Time and size each micro-batch case of ``shape``; activations (GiB) only on CUDA."""
    import torch

    model = build_model(shape, device)
    rows = []
    for batch, length in cases:
        ids = torch.randint(0, shape.vocab_size, (batch, length), device=device)

        def step(ids=ids, model=model) -> None:
            train_step(model, ids)
            for p in model.parameters():
                p.grad.zero_()  # in place: the gradients stay allocated, as in a real run between micro-batches

        def log_prob(ids=ids, model=model) -> None:
            with torch.no_grad():
                sequence_log_probs(model, ids)

        step()  # allocate the gradients before the baseline
        activations = None
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            activations = (torch.cuda.max_memory_allocated() - base) / GIB
        train_s = _timed(step, device, warmup, repeat)
        log_prob_s = _timed(log_prob, device, warmup, repeat)
        tokens = batch * length
        rows.append(
            {
                "size": shape.name,
                "case": f"{batch} x {length:,}",
                "train_s": train_s,
                "train_tok_s": tokens / train_s,
                "activations_gib": activations,
                "log_prob_s": log_prob_s,
                "log_prob_tok_s": tokens / log_prob_s,
            }
        )
    return rows


def fsdp_table(activations: dict[ModelShape, float], cards: Sequence[float], util: float = 0.6) -> list[str]:
    """The per-GPU FSDP table (markdown) for each model's training ``activations`` (GiB), at 8/4/2/1 GPUs.

    The training phase is compared with the first card, the rollout phase with each.
    """
    names = " / ".join(f"{c:.1f} GiB" for c in cards)
    lines = [
        f"| size | GPUs | training phase GiB | fits {cards[0]:.1f} GiB | rollout phase GiB (actor state + vLLM "
        f"{util} x card) on {names} | fits {names} |",
        "|---|---|---|---|---|---|",
    ]
    for shape, act in activations.items():
        for gpus in TABLE_GPUS:
            per_card = [estimate(shape, gpus, c, activations_gib=act, gpu_memory_utilization=util) for c in cards]
            training = per_card[0].training_gib
            rollouts = " / ".join(f"{e.rollout_gib:.1f}" for e in per_card)
            fits = " / ".join("yes" if e.rollout_gib <= e.card_gib else "no" for e in per_card)
            train_fits = "yes" if training <= cards[0] else "no"
            lines.append(f"| {shape.name} | {gpus} | {training:.1f} | {train_fits} | {rollouts} | {fits} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Benchmark entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["1.5b", "7b"])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--table-only", action="store_true", help="no GPU: the table from the measured inputs")
    args = parser.parse_args(argv)
    shapes = [SIZES[s] for s in args.sizes]
    if args.table_only:
        print("Per-GPU memory of verl's FSDP actor from the measured inputs (recipes/results/gpu_h200.md)")
        print("\n".join(fsdp_table({s: MEASURED[s] for s in shapes}, (80.0, 139.8))))
        return

    import torch

    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (--table-only prints the table from the measured inputs)")
    props = torch.cuda.get_device_properties(0)
    card = props.total_memory / GIB
    print(f"{props.name} ({card:.1f} GiB), torch {torch.__version__}; {args.warmup} warm-ups, {args.repeat} timed")
    print("| size | case | train s | train tok/s | train activations GiB | log-prob s | log-prob tok/s |")
    print("|---|---|---|---|---|---|---|")
    activations = {}
    for shape in shapes:
        rows = measure(shape, "cuda", CASES, args.warmup, args.repeat)
        torch.cuda.empty_cache()  # the model is gone with measure's frame: the next size starts from an empty card
        for r in rows:
            print(
                f"| {r['size']} | {r['case']} | {r['train_s']:.3f} | {r['train_tok_s']:,.0f} | "
                f"{r['activations_gib']:.1f} | {r['log_prob_s']:.3f} | {r['log_prob_tok_s']:,.0f} |"
            )
        activations[shape] = max(r["activations_gib"] for r in rows)
    print("\nPer-GPU memory of verl's FSDP actor from the activations measured here [computed]")
    print("\n".join(fsdp_table(activations, (80.0, card))))


if __name__ == "__main__":
    main()
