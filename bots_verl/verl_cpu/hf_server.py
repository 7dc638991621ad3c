"""The ``hf`` rollout server: a Ray actor that generates with a transformers causal LM and batches what is waiting.

verl's agent loop calls ``server.generate(request_id, prompt_ids, sampling_params, ...)`` once per rollout, many at a
time (``rollout.n`` sessions per prompt, a whole batch of prompts). Instead of one ``generate`` per request, the server
queues the requests, waits until arrivals pause (:data:`GATHER_IDLE_S`, at most :data:`GATHER_MAX_S`), then decodes
them together in a worker thread (:func:`~bots_verl.verl_cpu.sampling.generate_batch`), so the event loop keeps
accepting requests while a batch runs.

**Determinism.** A row's result is independent of which other rows share its batch (:mod:`.sampling`), and its seed is
``row_seed(rollout.seed, weight version, prompt ids, sampling parameters, k)`` where ``k`` counts the earlier identical
requests (same prompt and parameters) since the last weight update. The ``n`` sessions of a prompt are identical
requests, so they get ``k = 0..n-1`` in arrival order: the *set* of a prompt's responses is fixed by the weights and the
prompt, whatever the arrival order; the trainer fixes the order of rows itself
(:class:`~bots_verl.integration.hooks.replay_buffer.BOTSReplayBuffer`). The weight version is the ``global_steps`` verl
passes with each weight update, the same number in a resumed run. Greedy requests (validation) take no seed and no
``k``. Limits: with several replicas, identical prompts routed to different servers draw the same ``k`` (the replica
rank is part of the seed, so their samples differ, but which replica serves which session depends on routing), and extra
sampled traffic with identical prompts and parameters at the same weight version (e.g. a validation set that overlaps
the training set and samples with the training parameters) shifts ``k``.

Lifecycle calls (``wake_up``, ``sleep``, ``abort_all_requests``, ...) are no-ops: there is no device memory to free,
and the sync trainer never aborts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from typing import Any

import torch

from bots_verl.verl_cpu.sampling import GenerationRequest, generate_batch, row_seed

logger = logging.getLogger(__name__)

__all__ = ["HFRolloutServer", "ServerSettings", "TokenOutput", "check_dtype", "server_actor_name"]

GATHER_IDLE_S = 0.005
GATHER_MAX_S = 0.1
SUPPORTED_PARAMS = {"temperature", "top_p", "top_k", "logprobs", "max_tokens", "max_new_tokens", "repetition_penalty"}
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def server_actor_name(replica_rank: int) -> str:
    """Ray actor name of a replica's server (the adapter in the trainer process looks it up by this name)."""
    return f"bots_hf_rollout_server_{replica_rank}"


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """What the server needs from verl's rollout and model configs, as plain values.

    The server process never imports verl (it would add seconds of imports to start-up); the replica, which has
    verl, fills this in (:func:`bots_verl.verl_cpu.hf_rollout.server_settings`).

    Attributes:
        hf_config: the transformers model config, with verl's ``override_config`` applied.
        local_path: local model directory (weights are read from it unless ``load_format`` is ``dummy``).
        load_format: verl's ``rollout.load_format``; ``dummy`` builds the model from ``hf_config`` and waits for the
            trainer's weights.
        dtype: ``float32`` or ``bfloat16``.
        seed: base seed of the sampled rows (``rollout.seed``).
        replica_rank: this replica's rank.
        prompt_length: ``rollout.prompt_length``.
        response_length: ``rollout.response_length`` (default budget of new tokens).
        max_num_seqs: most rows per batch.
        stop_token_ids: end-of-sequence token ids.
        pad_token_id: padding token id.
        ignore_eos: keep generating past end-of-sequence tokens.
        known_answers: a known-answer script (:mod:`.known_answers`): its prompts get scripted responses.
    """

    hf_config: Any
    local_path: str
    load_format: str
    dtype: str
    seed: int
    replica_rank: int
    prompt_length: int
    response_length: int
    max_num_seqs: int
    stop_token_ids: tuple[int, ...]
    pad_token_id: int
    ignore_eos: bool = False
    known_answers: str | None = None


@dataclasses.dataclass
class TokenOutput:
    """What verl's agent loop reads from a server's ``generate`` (the fields of verl's ``TokenOutput``).

    A plain dataclass instead of verl's pydantic class, so that the server process does not import verl.
    """

    token_ids: list[int]
    log_probs: list[float] | None = None
    routed_experts: Any = None
    stop_reason: str | None = None
    num_preempted: int | None = None
    extra_fields: dict[str, Any] = dataclasses.field(default_factory=dict)


def check_dtype(dtype: Any) -> None:
    """The rollout dtype the ``hf`` server generates in: the server's check, and the driver's before Ray
    (:func:`bots_verl.verl_cpu.launch.check_cpu_settings`).

    Raises:
        ValueError: naming ``actor_rollout_ref.rollout.dtype`` and the supported names.
    """
    if dtype not in DTYPES:
        raise ValueError(f"actor_rollout_ref.rollout.dtype={dtype!r}: the hf rollout supports {sorted(DTYPES)}")


class HFRolloutServer:
    """Generation server of one ``hf`` replica (the body of a Ray actor).

    Args:
        settings: the rollout and model settings.

    Raises:
        ValueError: for an unsupported dtype.
    """

    def __init__(self, settings: ServerSettings) -> None:
        from transformers import AutoModelForCausalLM

        # one intra-op thread: with more, MKL splits a matmul by its row count and a row's result would depend on
        # the batch it shares (sampling.py); generation of small models loses little
        torch.set_num_threads(1)
        check_dtype(settings.dtype)
        self.settings = settings
        self.dtype = DTYPES[settings.dtype]
        # eager attention: the path whose row results were measured to be batch-independent (sampling.py)
        if settings.load_format == "dummy":
            # the trainer sends the real weights (update_weights) before the first generation
            self.model = AutoModelForCausalLM.from_config(
                settings.hf_config, dtype=self.dtype, attn_implementation="eager"
            )
        else:
            self.model = AutoModelForCausalLM.from_pretrained(
                settings.local_path, config=settings.hf_config, dtype=self.dtype, attn_implementation="eager"
            )
        self.model.eval()
        self.global_steps: int | None = None
        self._occurrences: Counter = Counter()
        self._queue: list[tuple[GenerationRequest, asyncio.Future]] = []
        self._runner: asyncio.Task | None = None
        self._lock: asyncio.Lock | None = None
        self.counters: Counter = Counter()
        self.known = None
        self._known_seen: Counter = Counter()
        if settings.known_answers:
            from transformers import AutoTokenizer

            from bots_verl.verl_cpu.known_answers import KnownAnswers

            self.known = KnownAnswers.load(settings.known_answers, AutoTokenizer.from_pretrained(settings.local_path))
            logger.warning("hf rollout: known answers from %s stand in for the model's text", settings.known_answers)

    async def ready(self) -> bool:
        """Returns once the model is built (a handle for the replica to wait on)."""
        return True

    # ------------------------------------------------------------------------------------------------ generation
    def _request(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationRequest:
        unknown = set(sampling_params) - SUPPORTED_PARAMS
        if unknown:
            raise ValueError(f"the hf rollout does not support the sampling parameters {sorted(unknown)}")
        if float(sampling_params.get("repetition_penalty", 1.0)) != 1.0:
            raise ValueError("the hf rollout supports repetition_penalty=1.0 only")
        prompt_ids = [int(t) for t in prompt_ids]
        if not prompt_ids:
            raise ValueError("empty prompt")
        # the same budget rule as verl's vLLM server
        max_tokens = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens"))
        if max_tokens is None:
            budget = self.settings.prompt_length + self.settings.response_length - len(prompt_ids)
            max_tokens = min(self.settings.response_length, budget)
        max_tokens = max(1, int(max_tokens))
        temperature = float(sampling_params.get("temperature", 1.0))
        top_p = float(sampling_params.get("top_p", 1.0))
        top_k = int(sampling_params.get("top_k", -1))
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p={top_p} must be in (0, 1]")
        request = GenerationRequest(
            prompt_ids=prompt_ids,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            logprobs=bool(sampling_params.get("logprobs", False)),
            stop_token_ids=() if self.settings.ignore_eos else self.settings.stop_token_ids,
        )
        if not request.greedy:
            key = (tuple(prompt_ids), temperature, top_p, top_k, max_tokens)
            occurrence = self._occurrences[key]
            self._occurrences[key] += 1
            request.seed = row_seed(self.settings.seed, self.settings.replica_rank, self.global_steps, key, occurrence)
        return request

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        **unused: Any,
    ):
        """Generate one sequence (token ids in, token ids out), batched with the other waiting requests.

        Returns:
            :class:`TokenOutput` with ``extra_fields["global_steps"]`` (the weight version).

        Raises:
            ValueError: for multimodal input or unsupported sampling parameters.
        """
        if image_data is not None or video_data is not None or audio_data is not None:
            raise ValueError("the hf rollout is text-only")
        request = self._request(prompt_ids, dict(sampling_params))
        if self.known is not None:
            scripted = await self._known_answer(request)
            if scripted is not None:
                return scripted
        future = asyncio.get_running_loop().create_future()
        self._queue.append((request, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain())
        result = await future
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _known_answer(self, request: GenerationRequest) -> TokenOutput | None:
        """The scripted response of a known-answer prompt (the k-th of this prompt at this weight version), or None."""
        from bots_verl.verl_cpu.known_answers import teacher_forced_log_probs

        entry = self.known.match(request.prompt_ids)
        if entry is None:
            return None
        key = tuple(request.prompt_ids)
        k = self._known_seen[key]
        self._known_seen[key] += 1
        ids = self.known.response_ids(entry, k, request.max_tokens)
        log_probs = None
        if request.logprobs:
            async with self._batch_lock():
                log_probs = await asyncio.to_thread(
                    teacher_forced_log_probs, self.model, request.prompt_ids, ids, request.temperature
                )
        self.counters["known_answers"] += 1
        return TokenOutput(
            token_ids=ids,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def _batch_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _gather(self) -> None:
        # wait while requests keep arriving, so one batch holds a whole dispatch
        start = time.monotonic()
        seen = -1
        while len(self._queue) != seen and time.monotonic() - start < GATHER_MAX_S:
            seen = len(self._queue)
            await asyncio.sleep(GATHER_IDLE_S)

    async def _drain(self) -> None:
        while self._queue:
            await self._gather()
            limit = max(1, self.settings.max_num_seqs)
            batch, self._queue = self._queue[:limit], self._queue[limit:]
            async with self._batch_lock():
                started = time.monotonic()
                try:
                    results = await asyncio.to_thread(
                        generate_batch, self.model, [req for req, _ in batch], self.settings.pad_token_id
                    )
                except Exception as exc:  # a failed batch fails its requests, not the server
                    logger.exception("hf rollout batch of %d rows failed", len(batch))
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
            self.counters["batches"] += 1
            self.counters["rows"] += len(batch)
            self.counters["generate_s"] += time.monotonic() - started
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    # ------------------------------------------------------------------------------------------------ weights
    async def update_weights(self, named_tensors: dict[str, torch.Tensor], global_steps: int | None = None) -> None:
        """Load the trainer's weights (HF parameter names) and start a new weight version.

        Raises:
            ValueError: if a name is unknown to the model, a model parameter is missing or a shape differs (the
                model is left as it was).
        """
        async with self._batch_lock():
            model_state = self.model.state_dict()
            unknown = sorted(set(named_tensors) - set(model_state))
            if unknown:
                raise ValueError(f"weights the rollout model does not have: {unknown[:5]}")
            missing = [k for k in model_state if k not in named_tensors and not self._tied(k)]
            if missing:
                raise ValueError(f"weight update misses rollout parameters: {missing[:5]}")
            misshapen = [
                f"{k} {tuple(t.shape)} (the rollout's: {tuple(model_state[k].shape)})"
                for k, t in named_tensors.items()
                if tuple(t.shape) != tuple(model_state[k].shape)
            ]
            if misshapen:
                raise ValueError(f"weight update with the wrong shapes: {misshapen[:5]}")
            with torch.no_grad():
                for name, tensor in named_tensors.items():
                    model_state[name].copy_(tensor.to(self.dtype))
            if getattr(self.model.config, "tie_word_embeddings", False):
                self.model.tie_weights()
            self.global_steps = global_steps
            self._occurrences.clear()
            self._known_seen.clear()
            self.counters["weight_updates"] += 1

    def _tied(self, name: str) -> bool:
        return bool(getattr(self.model.config, "tie_word_embeddings", False)) and name.endswith("lm_head.weight")

    async def weights(self) -> dict[str, torch.Tensor]:
        """A copy of the model's weights (HF names): what a weight sync can be checked against."""
        async with self._batch_lock():
            return {name: tensor.detach().clone() for name, tensor in self.model.state_dict().items()}

    async def set_global_steps(self, global_steps: int) -> None:
        """Set the weight version without new weights."""
        self.global_steps = global_steps

    async def stats(self) -> dict[str, float]:
        """Counters: batches, rows, weight_updates."""
        return dict(self.counters)

    async def wait_for_requests_to_drain(self) -> None:
        """Return once no request is queued or running."""
        while self._queue or (self._runner is not None and not self._runner.done()):
            await asyncio.sleep(GATHER_IDLE_S)

    # ------------------------------------------------------------------------------------------------ lifecycle
    async def wake_up(self, tags: list[str] | None = None) -> None:
        """No device memory to restore."""

    async def sleep(self) -> None:
        """No device memory to free; waits for running requests."""
        await self.wait_for_requests_to_drain()

    async def clear_kv_cache(self) -> None:
        """No cache is kept between batches."""

    async def release_kv_cache(self) -> None:
        """No cache is kept between batches."""

    async def resume_kv_cache(self) -> None:
        """No cache is kept between batches."""

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        """The sync trainer never aborts; nothing is interrupted."""
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        """Nothing was paused."""

    async def start_profile(self, **kwargs: Any) -> None:
        """No profiler."""

    async def stop_profile(self) -> None:
        """No profiler."""
