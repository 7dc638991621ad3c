"""The ``hf`` rollout's two verl-side pieces: the replica that starts the server, and the adapter in the trainer.

- :class:`HFReplica` (``RolloutReplicaRegistry`` name ``hf``): verl's ``LLMServerManager`` builds one per replica
  and calls ``init_hybrid``; ``launch_servers`` starts one :class:`~bots_verl.verl_cpu.hf_server.HFRolloutServer`
  actor (``num_cpus=0``: it must not take a CPU slot from verl's workers) on the node of the replica's first worker.
  Two of verl's modes are supported, with ``tensor_model_parallel_size=1``: hybrid (training and rollout on the same
  logical GPUs: the sync and ``colocate_async`` trainers) and standalone (the rollout on logical GPUs of its own,
  ``separate_async``, where ``LLMServerManager`` calls ``init_standalone`` and verl's ``CheckpointEngineWorker``
  holds the adapter below).
- :class:`HFServerAdapter` (``_ROLLOUT_REGISTRY[("hf", "async")]``): lives in verl's hybrid actor/rollout worker, or
  in a standalone replica's ``CheckpointEngineWorker``. verl's naive weight sync calls ``update_weights`` with a
  generator of full tensors (every rank consumes it: the gather is collective); a checkpoint engine's
  ``receive_weights`` (:mod:`.checkpoint_engine`) hands an async generator. The leader rank of the replica sends the
  weights to the server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import ray
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutMode, RolloutReplica

from bots_verl.verl_cpu.hf_server import HFRolloutServer, ServerSettings, server_actor_name
from bots_verl.verl_cpu.known_answers import known_answers_path

logger = logging.getLogger(__name__)

__all__ = ["HFReplica", "HFServerAdapter", "server_settings"]


def _rollout_world_size(config: Any) -> int:
    return config.tensor_model_parallel_size * config.data_parallel_size * config.pipeline_model_parallel_size


def server_settings(config: Any, model_config: Any, replica_rank: int) -> ServerSettings:
    """The server's settings from verl's ``RolloutConfig`` and model config (resolved here, where verl is loaded).

    Args:
        config: verl's ``RolloutConfig``.
        model_config: ``actor_rollout_ref.model`` (DictConfig) or an ``HFModelConfig``.
        replica_rank: the replica's rank.
    """
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import HFModelConfig

    if not isinstance(model_config, HFModelConfig):
        model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
    tokenizer = model_config.tokenizer
    stops = set()
    generation = model_config.generation_config
    eos = getattr(generation, "eos_token_id", None) if generation is not None else None
    for value in ([eos] if isinstance(eos, int) else list(eos or [])) + [tokenizer.eos_token_id]:
        if value is not None:
            stops.add(int(value))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return ServerSettings(
        hf_config=model_config.hf_config,
        local_path=str(model_config.local_path),
        load_format=str(config.load_format),
        dtype=str(config.dtype),
        seed=int(config.seed),
        replica_rank=int(replica_rank),
        prompt_length=int(config.prompt_length),
        response_length=int(config.response_length),
        max_num_seqs=int(config.max_num_seqs),
        stop_token_ids=tuple(sorted(stops)),
        pad_token_id=int(pad),
        ignore_eos=bool(config.ignore_eos),
        known_answers=known_answers_path(getattr(config, "custom", None)),
    )


class HFReplica(RolloutReplica):
    """One ``hf`` rollout replica: a server actor generating with transformers."""

    async def launch_servers(self) -> None:
        """Start this replica's server actor and wait until its model is built.

        Raises:
            NotImplementedError: outside the hybrid mode, or with tensor/pipeline parallelism.
        """
        if self.rollout_mode not in (RolloutMode.HYBRID, RolloutMode.STANDALONE):
            raise NotImplementedError(
                "the hf rollout runs in verl's hybrid mode (actor and rollout colocated) or standalone mode (its own "
                f"resources, separate_async), not {self.rollout_mode}"
            )
        if _rollout_world_size(self.config) != 1:
            raise NotImplementedError(
                "the hf rollout needs tensor_model_parallel_size=1, data_parallel_size=1 and "
                "pipeline_model_parallel_size=1"
            )
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        name = server_actor_name(self.replica_rank)
        server = (
            ray.remote(HFRolloutServer)
            .options(
                name=name,
                num_cpus=0,
                max_concurrency=self.max_concurrency,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id, soft=False),
            )
            .remote(server_settings(self.config, self.model_config, self.replica_rank))
        )
        await server.ready.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf://{name}"


class HFServerAdapter(BaseRollout):
    """``BaseRollout`` of the ``hf`` rollout in verl's actor/rollout worker: forwards the trainer's weights.

    Args:
        config: verl's ``RolloutConfig``.
        model_config: verl's ``HFModelConfig``.
        device_mesh: the rollout device mesh (unused).
        replica_rank: this worker's replica, or -1 to derive it from ``RANK``.
    """

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = _rollout_world_size(self.config)
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader_rank = rank % world == 0
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        """Nothing to restore: the server keeps its weights and no device memory."""

    async def release(self) -> None:
        """Nothing to free."""

    async def update_weights(
        self, weights: Iterable[tuple[str, Any]], wire_format: str = "named_tensors", **kwargs: Any
    ) -> None:
        """Send the trainer's full weights to the server (leader rank); every rank drains the generator.

        Raises:
            NotImplementedError: for delta flushes or unmerged LoRA adapters.
        """
        if wire_format != "named_tensors":
            raise NotImplementedError(f"the hf rollout takes full named tensors, not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError("the hf rollout needs merged LoRA weights (actor_rollout_ref.model.lora.merge)")
        if hasattr(weights, "__aiter__"):  # a checkpoint engine's receive_weights (separate_async)
            state = {name: tensor.detach().to("cpu") async for name, tensor in weights}
        else:
            state = {name: tensor.detach().to("cpu") for name, tensor in weights}
        if self.is_leader_rank:
            await self._server_handle().update_weights.remote(state, kwargs.get("global_steps"))
