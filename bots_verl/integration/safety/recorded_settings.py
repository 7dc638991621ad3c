"""Which of verl's settings define an experiment: what the run folder's record holds
(:mod:`bots_verl.integration.safety.training_record`).

Derived from verl's composed config, not listed by hand: every setting under :data:`RECORDED_SECTIONS`, except the
ones :data:`HARMLESS` names with why they do not change what is trained. A setting verl adds under those sections is
recorded without a change here; ``tests/integration/test_training_record.py`` composes verl's config and checks that
every setting is recorded or harmless, and that every harmless entry names a setting verl has.
"""

from __future__ import annotations

__all__ = ["HARMLESS", "MODULE_KEYS", "PATH_KEYS", "RECORDED_SECTIONS", "harmless"]

#: the sections of verl's config that define an experiment: every setting under them is recorded, :data:`HARMLESS`
#: aside (``actor_rollout_ref.ref`` is left out: the reference model is the actor's starting weights, recorded with
#: the model, and its settings are the actor's engine settings)
RECORDED_SECTIONS = (
    "data",
    "actor_rollout_ref.model",
    "actor_rollout_ref.actor",
    "actor_rollout_ref.rollout",
    "reward",
    "algorithm",
)

_LAYOUT = "parallelism or placement: the same training on another layout"
_MEMORY = "memory or speed (offload, checkpointing, chunking, kernels, compilation): the same computation"
_LOGS = "logging, profiling or monitoring: nothing trained reads it"
_COPY = "an interpolated copy of a setting recorded under its own name"
_BATCHING = "how a batch is split into micro-batches or packed: the same update, summed in another order"
_ENGINE = "the rollout engine's capacity and scheduling: the same sampling distribution"

#: settings under :data:`RECORDED_SECTIONS` that do not change what is trained: a dotted key (or a section standing
#: for every key under it) -> why. Every other setting there is recorded, one verl adds included
#: (``tests/integration/test_training_record.py`` composes verl's config and checks both ways).
HARMLESS: dict[str, str] = {
    "actor_rollout_ref.actor.optim.total_training_steps": "written by verl during a run (the schedule's length)",
    "data.use_shm": _MEMORY,
    "data.dataloader_num_workers": "BOTS requires 0 (bots_verl.config); workers load, they do not choose",
    "data.filter_overlong_prompts_workers": _LAYOUT,
    "data.val_batch_size": _BATCHING,
    "data.trust_remote_code": "a permission to run the dataset's code, not what it computes",
    "data.tool_config_path": _COPY + " (actor_rollout_ref.rollout.multi_turn.tool_config_path)",
    "data.function_tool_path": _COPY + " (actor_rollout_ref.rollout.multi_turn.function_tool_path)",
    "actor_rollout_ref.model.use_shm": _MEMORY,
    "actor_rollout_ref.model.enable_gradient_checkpointing": _MEMORY,
    "actor_rollout_ref.model.enable_activation_offload": _MEMORY,
    "actor_rollout_ref.model.use_remove_padding": _MEMORY,
    "actor_rollout_ref.model.use_liger": _MEMORY,
    "actor_rollout_ref.model.use_fused_kernels": _MEMORY,
    "actor_rollout_ref.model.fused_kernel_options": _MEMORY,
    "actor_rollout_ref.model.tiled_mlp": _MEMORY,
    "actor_rollout_ref.model.trust_remote_code": "a permission to run the model's code, not what it computes",
    "actor_rollout_ref.actor.strategy": _LAYOUT + " (fsdp, fsdp2, megatron)",
    "actor_rollout_ref.actor.rollout_n": _COPY + " (actor_rollout_ref.rollout.n)",
    "actor_rollout_ref.actor.ppo_micro_batch_size": _BATCHING,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": _BATCHING,
    "actor_rollout_ref.actor.use_dynamic_bsz": _BATCHING,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": _BATCHING,
    "actor_rollout_ref.actor.use_prefix_grouper": _MEMORY,
    "actor_rollout_ref.actor.use_torch_compile": _MEMORY,
    "actor_rollout_ref.actor.use_fused_kernels": _MEMORY,
    "actor_rollout_ref.actor.use_remove_padding": _MEMORY,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": _LAYOUT,
    "actor_rollout_ref.actor.entropy_from_logits_with_chunking": _MEMORY,
    "actor_rollout_ref.actor.entropy_from_logits_chunk_size": _MEMORY,
    "actor_rollout_ref.actor.entropy_checkpointing": _MEMORY,
    "actor_rollout_ref.actor.pad_to_length": _MEMORY,
    "actor_rollout_ref.actor.calculate_entropy": _LOGS + " (the entropy metric; entropy_coeff is recorded)",
    "actor_rollout_ref.actor.profiler": _LOGS,
    "actor_rollout_ref.actor.checkpoint.save_contents": "what a checkpoint holds (load_contents, recorded, is what "
    "a resume reads)",
    "actor_rollout_ref.actor.checkpoint.async_save": _MEMORY,
    # the engine's numerics (dtype, model_dtype, seed, full_determinism, qat) stay recorded
    "actor_rollout_ref.actor.fsdp_config.wrap_policy": _LAYOUT,
    "actor_rollout_ref.actor.fsdp_config.param_offload": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.offload_policy": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.reshard_after_forward": _LAYOUT,
    "actor_rollout_ref.actor.fsdp_config.fsdp_size": _LAYOUT,
    "actor_rollout_ref.actor.fsdp_config.forward_prefetch": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.use_orig_params": _LAYOUT,
    "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size": _LAYOUT,
    "actor_rollout_ref.actor.fsdp_config.entropy_from_logits_with_chunking": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.entropy_from_logits_chunk_size": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.entropy_checkpointing": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.use_no_sync_for_gradient_accumulation": _BATCHING,
    "actor_rollout_ref.actor.fsdp_config.pad_to_length": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.pad_to_length_bucket": _MEMORY,
    "actor_rollout_ref.actor.fsdp_config.forward_only": "set by verl per role (the actor trains)",
    "actor_rollout_ref.actor.fsdp_config.strategy": _LAYOUT,
    "actor_rollout_ref.actor.fsdp_config.turbo_config": _LAYOUT,
    "actor_rollout_ref.rollout.mode": _ENGINE,
    "actor_rollout_ref.rollout.nnodes": _LAYOUT,
    "actor_rollout_ref.rollout.n_gpus_per_node": _LAYOUT,
    "actor_rollout_ref.rollout.gpu_memory_utilization": _ENGINE,
    "actor_rollout_ref.rollout.enforce_eager": _MEMORY,
    "actor_rollout_ref.rollout.cudagraph_capture_sizes": _MEMORY,
    "actor_rollout_ref.rollout.free_cache_engine": _MEMORY,
    "actor_rollout_ref.rollout.enable_sleep_mode": _MEMORY,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": _LAYOUT,
    "actor_rollout_ref.rollout.data_parallel_size": _LAYOUT,
    "actor_rollout_ref.rollout.expert_parallel_size": _LAYOUT,
    "actor_rollout_ref.rollout.pipeline_model_parallel_size": _LAYOUT,
    "actor_rollout_ref.rollout.max_num_batched_tokens": _ENGINE,
    "actor_rollout_ref.rollout.max_model_len": _ENGINE + " (the lengths are data.max_*_length, recorded)",
    "actor_rollout_ref.rollout.max_num_seqs": _ENGINE,
    "actor_rollout_ref.rollout.enable_chunked_prefill": _ENGINE,
    "actor_rollout_ref.rollout.enable_prefix_caching": _ENGINE,
    "actor_rollout_ref.rollout.scheduling_policy": _ENGINE,
    "actor_rollout_ref.rollout.load_format": "how the engine's first weights load: the actor's are synced in",
    "actor_rollout_ref.rollout.layered_summon": _MEMORY,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size": _BATCHING,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": _BATCHING,
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": _BATCHING,
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": _BATCHING,
    "actor_rollout_ref.rollout.disable_log_stats": _LOGS,
    "actor_rollout_ref.rollout.multi_stage_wake_up": _MEMORY,
    "actor_rollout_ref.rollout.skip_tokenizer_init": _ENGINE,
    "actor_rollout_ref.rollout.agent.num_workers": _LAYOUT,
    "actor_rollout_ref.rollout.agent.agent_loop_manager_class": _LAYOUT + " (how rollouts are dispatched)",
    "actor_rollout_ref.rollout.checkpoint_engine": "how the actor's weights reach the rollout: the same weights",
    "actor_rollout_ref.rollout.router_config_path": _LAYOUT + " (how requests are routed among replicas)",
    "actor_rollout_ref.rollout.multi_turn.max_parallel_calls": _LAYOUT,
    "actor_rollout_ref.rollout.trace": _LOGS,
    "actor_rollout_ref.rollout.profiler": _LOGS,
    "actor_rollout_ref.rollout.prometheus": _LOGS,
    "actor_rollout_ref.rollout.moe_load_balance_metrics_interval": _LOGS,
    "actor_rollout_ref.rollout.disaggregation": _LAYOUT,
    "reward.num_workers": _LAYOUT,
    "reward.reward_model.enable_resource_pool": _LAYOUT,
    "reward.reward_model.n_gpus_per_node": _LAYOUT,
    "reward.reward_model.nnodes": _LAYOUT,
    "reward.reward_model.rollout.gpu_memory_utilization": _ENGINE,
    "reward.reward_model.rollout.enforce_eager": _MEMORY,
    "reward.reward_model.rollout.cudagraph_capture_sizes": _MEMORY,
    "reward.reward_model.rollout.free_cache_engine": _MEMORY,
    "reward.reward_model.rollout.data_parallel_size": _LAYOUT,
    "reward.reward_model.rollout.expert_parallel_size": _LAYOUT,
    "reward.reward_model.rollout.tensor_model_parallel_size": _LAYOUT,
    "reward.reward_model.rollout.pipeline_model_parallel_size": _LAYOUT,
    "reward.reward_model.rollout.max_num_batched_tokens": _ENGINE,
    "reward.reward_model.rollout.max_num_seqs": _ENGINE,
    "reward.reward_model.rollout.load_format": _ENGINE,
    "reward.reward_model.rollout.layered_summon": _MEMORY,
    "reward.reward_model.rollout.scheduling_policy": _ENGINE,
    "reward.reward_model.rollout.multi_stage_wake_up": _MEMORY,
    "reward.reward_model.rollout.enable_chunked_prefill": _ENGINE,
    "reward.reward_model.rollout.enable_prefix_caching": _ENGINE,
    "reward.reward_model.rollout.disable_log_stats": _LOGS,
    "reward.reward_model.rollout.skip_tokenizer_init": _ENGINE,
    "reward.reward_model.rollout.disaggregation": _LAYOUT,
    "reward.sandbox_fusion.url": "where the code sandbox answers (its limits, recorded, decide the verdicts)",
    "reward.sandbox_fusion.max_concurrent": _LAYOUT,
}

#: the settings that name a local file or folder: recorded by content
#: (:func:`~bots_verl.integration.safety.training_record.content_identity`)
PATH_KEYS = (
    "data.train_files",
    "data.val_files",
    "data.tokenizer",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.model.tokenizer_path",
    "actor_rollout_ref.model.hf_config_path",
    "actor_rollout_ref.model.lora_adapter_path",
    "actor_rollout_ref.model.lora.adapter_path",
    "actor_rollout_ref.rollout.multi_turn.tool_config_path",
    "actor_rollout_ref.rollout.agent.agent_loop_config_path",
    "actor_rollout_ref.rollout.custom.known_answers",
    "reward.reward_model.model_path",
)
#: the settings that name code verl loads (``pkg://a.b``, ``file://x.py`` or a file): by content
#: (:func:`~bots_verl.integration.safety.training_record.module_identity`)
MODULE_KEYS = (
    "data.custom_cls.path",
    "reward.custom_reward_function.path",
    "reward.reward_manager.module.path",
    "actor_rollout_ref.rollout.agent.custom_async_server.path",
)


def harmless(key: str) -> bool:
    """Whether the dotted setting ``key`` is one :data:`HARMLESS` leaves out of the record (itself or its section)."""
    return any(key == name or key.startswith(name + ".") for name in HARMLESS)
