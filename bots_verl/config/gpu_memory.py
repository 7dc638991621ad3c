"""Per-GPU memory of verl's FSDP actor at the recipes' model sizes, and the check that refuses a layout that cannot fit.

The inputs were measured on one H200 and the FSDP sharding computed from them (the figures, the settings and how they
were measured: ``recipes/results/gpu_h200.md``; ``python -m bots_verl.speed.gpu_actor_memory`` measures them again on
any GPU). Per GPU, with N the GPUs the actor is sharded over (``fsdp_size``, else every GPU of the run):

- training phase: ``16 bytes x params / N`` (fp32 master weights, their gradients, Adam's two moments) + the gathered
  units (bf16 parameters and fp32 gradients, 6 bytes/param, of the FSDP units that are whole at once: the root unit
  holding the embeddings, lm_head and final norm, plus one decoder layer) + the measured activations of one
  micro-batch + 3 GiB (CUDA context, NCCL, what a sleeping vLLM keeps);
- rollout phase: ``12 bytes x params / N`` (verl frees the gradients when it leaves train mode; weights and Adam stay
  on the GPU without offload) + 3 GiB + vLLM's ``gpu_memory_utilization x card``.

Only the recipes' two models are known (Qwen2.5-1.5B and -7B, matched by name or by a local ``config.json``): the
activations, the largest term at 8 GPUs, were measured for these two alone, so for any other model nothing is said
rather than a guess. With param or optimizer offload nothing is said either (not measured). Activations measured at
24,576 tokens per micro-batch with gradient checkpointing and verl's ``use_remove_padding``; under other settings the
term is left out and the figure is a lower bound (a refusal then still means "cannot fit").
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import dataclass

from omegaconf import DictConfig

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CARD_GIB",
    "MEASURED",
    "RESULTS",
    "MemoryEstimate",
    "ModelShape",
    "card_memory_gib",
    "check_gpu_memory",
    "estimate",
    "identify_model",
]

GIB = 2**30
#: where the measured figures and the computed table are stated (linked by every refusal)
RESULTS = "recipes/results/gpu_h200.md"
#: the card assumed when neither ``bots.gpu_memory.card_gib`` is set nor nvidia-smi answers: an 80 GB card
DEFAULT_CARD_GIB = 80.0
#: fp32 master weights (4) + fp32 gradients (4) + Adam's first and second moments (4 + 4), sharded over the GPUs
TRAIN_STATE_BYTES = 16
#: the same without gradients: verl's train-mode context zeroes them (set to None) on exit, before the rollout
ROLLOUT_STATE_BYTES = 12
#: bf16 parameters (2) + fp32 gradient before the reduce-scatter (4) of each FSDP unit that is whole at once
GATHERED_BYTES = 6
#: CUDA context, NCCL buffers, what a sleeping vLLM keeps [assumed, not measured]
OVERHEAD_GIB = 3.0
#: the micro-batch the activations were measured at (the recipes' ppo/log_prob_max_token_len_per_gpu)
MEASURED_TOKENS = 24_576


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a Qwen2-architecture config that decide its size (as in its ``config.json``)."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer: q/k/v (with bias), o, the gated MLP, two RMSNorms."""
        h = self.hidden_size
        kv = self.num_key_value_heads * (h // self.num_attention_heads)
        return (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * self.intermediate_size + 2 * h

    @property
    def root_params(self) -> int:
        """Parameters outside the decoder layers (FSDP's root unit): embeddings, lm_head unless tied, final norm."""
        embed = self.vocab_size * self.hidden_size
        return embed * (1 if self.tie_word_embeddings else 2) + self.hidden_size

    @property
    def params(self) -> int:
        """All parameters."""
        return self.num_hidden_layers * self.layer_params + self.root_params

    def matches(self, hf_config: dict) -> bool:
        """Whether a ``config.json`` describes this architecture (every size-deciding number equal)."""
        fields = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
        fields += ("vocab_size", "tie_word_embeddings")
        return all(hf_config.get(f) == getattr(self, f) for f in fields)


QWEN25_1_5B = ModelShape("Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 151_936, True)
QWEN25_7B = ModelShape("Qwen2.5-7B", 3584, 18_944, 28, 28, 4, 152_064, False)
#: the recipes' models -> training activations of one 24,576-token micro-batch, GiB, measured on one H200
#: (both 2 x 12,288 and 6 x 4,096 tokens; recipes/results/gpu_h200.md)
MEASURED: dict[ModelShape, float] = {QWEN25_1_5B: 10.4, QWEN25_7B: 13.4}
# hub names of the recipes' models (the Instruct and base models share the architecture), lower case
_NAMES = {"qwen2.5-1.5b": QWEN25_1_5B, "qwen2.5-1.5b-instruct": QWEN25_1_5B}
_NAMES |= {"qwen2.5-7b": QWEN25_7B, "qwen2.5-7b-instruct": QWEN25_7B}


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU memory of one layout, GiB.

    Attributes:
        model: the model's name.
        shard_gpus: the GPUs the actor's state is sharded over.
        training_gib: the training phase.
        rollout_gib: the rollout phase (actor state + vLLM's share of the card); None when vLLM runs elsewhere.
        card_gib: the card it is compared with.
    """

    model: str
    shard_gpus: int
    training_gib: float
    rollout_gib: float | None
    card_gib: float

    @property
    def peak_gib(self) -> float:
        """The larger phase."""
        return max(self.training_gib, self.rollout_gib or 0.0)

    @property
    def fits(self) -> bool:
        """Both phases within the card."""
        return self.peak_gib <= self.card_gib


def estimate(
    shape: ModelShape,
    shard_gpus: int,
    card_gib: float,
    *,
    activations_gib: float | None = None,
    gpu_memory_utilization: float | None = 0.6,
    vllm_sleeps: bool = True,
) -> MemoryEstimate:
    """The per-GPU memory of ``shape``'s actor sharded over ``shard_gpus`` (the model in this module's docstring).

    Args:
        shape: the model.
        shard_gpus: GPUs the FSDP state is sharded over.
        card_gib: memory of one card.
        activations_gib: one micro-batch's training activations; None: the measured figure (:data:`MEASURED`), or
            0 for a model without one.
        gpu_memory_utilization: vLLM's share of each card, colocated with the actor; None: vLLM runs on other GPUs.
        vllm_sleeps: vLLM frees its weights and KV cache while the actor trains (verl's ``free_cache_engine``);
            False adds its share to the training phase.
    """
    activations = MEASURED.get(shape, 0.0) if activations_gib is None else activations_gib
    gathered = GATHERED_BYTES * (shape.root_params + shape.layer_params) / GIB
    training = TRAIN_STATE_BYTES * shape.params / shard_gpus / GIB + gathered + activations + OVERHEAD_GIB
    rollout = None
    if gpu_memory_utilization is not None:
        vllm = gpu_memory_utilization * card_gib
        rollout = ROLLOUT_STATE_BYTES * shape.params / shard_gpus / GIB + OVERHEAD_GIB + vllm
        if not vllm_sleeps:
            training += vllm
    return MemoryEstimate(shape.name, shard_gpus, training, rollout, card_gib)


def identify_model(path: str | None) -> ModelShape | None:
    """The recipes' model that ``path`` is, or None: by a local ``config.json``, else by its hub name."""
    if not path:
        return None
    config_file = os.path.join(os.path.expanduser(path), "config.json")
    if os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as f:
            hf_config = json.load(f)
        return next((s for s in MEASURED if s.matches(hf_config)), None)
    return _NAMES.get(os.path.basename(path.rstrip("/")).lower())


def card_memory_gib(configured: float | None) -> tuple[float, str]:
    """Memory of one card and where it came from: the setting, else nvidia-smi's smallest GPU, else the default.

    nvidia-smi rather than torch.cuda: the driver process would keep a CUDA context on GPU 0 for the whole run.
    """
    if configured is not None:
        return float(configured), "bots.gpu_memory.card_gib"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        mib = [float(line) for line in out.split() if line.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        mib = []
    if mib:
        return min(mib) / 1024, "nvidia-smi"
    return DEFAULT_CARD_GIB, "the default: no GPU visible here; set GPU_MEMORY_GIB or bots.gpu_memory.card_gib"


def _measured_settings(config: DictConfig) -> list[str]:
    """The actor settings that differ from the measured ones (empty: the measured activations apply)."""
    actor = config.actor_rollout_ref.actor
    model = config.actor_rollout_ref.model
    rollout = config.actor_rollout_ref.rollout
    differ = []
    if not model.get("enable_gradient_checkpointing", False):
        differ.append("actor_rollout_ref.model.enable_gradient_checkpointing=False")
    if not model.get("use_remove_padding", False):
        differ.append("actor_rollout_ref.model.use_remove_padding=False")
    if not (actor.get("use_dynamic_bsz", False) and rollout.get("log_prob_use_dynamic_bsz", False)):
        differ.append("fixed micro-batch sizes (use_dynamic_bsz=False)")
    for key, value in (
        ("actor.ppo_max_token_len_per_gpu", actor.get("ppo_max_token_len_per_gpu", None)),
        ("rollout.log_prob_max_token_len_per_gpu", rollout.get("log_prob_max_token_len_per_gpu", None)),
    ):
        if value != MEASURED_TOKENS:
            differ.append(f"actor_rollout_ref.{key}={value}")
    if actor.get("ulysses_sequence_parallel_size", 1) != 1:
        differ.append(f"ulysses_sequence_parallel_size={actor.get('ulysses_sequence_parallel_size')}")
    return differ


def check_gpu_memory(config: DictConfig, card_gib: float | None = None, check: bool = True) -> MemoryEstimate | None:
    """Refuse a layout whose actor cannot fit its GPUs, before Ray (the recipes' models only; see the docstring).

    Args:
        config: the composed config.
        card_gib: ``bots.gpu_memory.card_gib`` (None: :func:`card_memory_gib` finds it).
        check: ``bots.gpu_memory.check``; False turns a refusal into a warning.

    Returns:
        The estimate, or None where nothing is known (CPU backend, another model, offload on).

    Raises:
        ValueError: the estimate exceeds the card, naming the model, layout, figures and what to do.
    """
    if config.trainer.get("device", "cuda") != "cuda":
        return None
    shape = identify_model(config.actor_rollout_ref.model.get("path", None))
    if shape is None:
        logger.info("GPU memory not checked: only the recipes' models were measured (%s)", RESULTS)
        return None
    fsdp = config.actor_rollout_ref.actor.get("fsdp_config", None) or {}
    if fsdp.get("param_offload", False) or fsdp.get("optimizer_offload", False):
        logger.info("GPU memory not checked: param/optimizer offload on (not measured, %s)", RESULTS)
        return None
    gpus = int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node)
    fsdp_size = int(fsdp.get("fsdp_size", -1) or -1)
    shard = fsdp_size if 0 < fsdp_size < gpus else gpus
    card, source = card_memory_gib(card_gib)
    rollout = config.actor_rollout_ref.rollout
    util = rollout.get("gpu_memory_utilization", None)
    # separate_async: vLLM runs on its own GPUs, none of the actor's
    colocated = util is not None and config.trainer.get("v1", {}).get("trainer_mode", "sync") != "separate_async"
    differ = _measured_settings(config)
    result = estimate(
        shape,
        shard,
        card,
        activations_gib=0.0 if differ else None,
        gpu_memory_utilization=float(util) if colocated else None,
        vllm_sleeps=bool(rollout.get("free_cache_engine", True)),
    )
    if result.fits:
        logger.info(
            "GPU memory: %s on %d GPUs needs %.1f GiB of %.1f (%s)", shape.name, gpus, result.peak_gib, card, RESULTS
        )
        return result
    message = _refusal(result, gpus, shard, source, differ, util)
    if not check:
        logger.warning("%s (bots.gpu_memory.check=false: starting anyway)", message)
        return result
    raise ValueError(message)


def _refusal(result: MemoryEstimate, gpus: int, shard: int, source: str, differ: list[str], util: object) -> str:
    """The refusal: model, layout, per-GPU figures against the card, where they come from, what to do."""
    phases = [f"the training phase {result.training_gib:.1f} GiB"]
    if result.rollout_gib is not None:
        phases.append(f"the rollout phase {result.rollout_gib:.1f} GiB (actor state + vLLM's {util} of the card)")
    layout = f"{gpus} GPU{'s' if gpus > 1 else ''}" + (f" (actor sharded over {shard})" if shard != gpus else "")
    lower = (
        f" These are lower bounds: the activations are left out, as this config differs from the measured one "
        f"({', '.join(differ)})."
        if differ
        else ""
    )
    return (
        f"GPU memory: {result.model} on {layout} cannot fit its {result.card_gib:.1f} GiB cards ({source}): per GPU "
        f"{' and '.join(phases)}.{lower} Computed for verl's FSDP actor from one H200 measurement ({RESULTS}). "
        "Use more GPUs (GPUS_PER_NODE / NNODES; trainer.n_gpus_per_node / trainer.nnodes), turn on offload "
        "(actor_rollout_ref.actor.fsdp_config.param_offload=true or optimizer_offload=true), or start anyway with "
        "GPU_MEMORY_CHECK=0 (bots.gpu_memory.check=false)."
    )
