"""The verl 0.9.1 code that bots-verl's glue and CPU backend depend on, pinned by a hash of its source.

``bots_verl.integration`` (trainer, replay buffer, task runner) and ``bots_verl.verl_cpu`` extend verl without
patching its files, but some of that extension touches private names (``_clear_groups``, ``_select_prompt_uids``,
``_ROLLOUT_REGISTRY``, the class rebinding of the replay buffer, the registry swap in the task runner) or relies on
what a function does (the trainer reading verl's dataloader, the weight version that seeds the rollout). Each entry
of :data:`PINS` names one verl object, the sha256 of its source in verl 0.9.1 and what of ours to re-check when it
changes;
``tests/integration/test_verl_pins_on_cpu.py`` fails with that message as soon as an installed verl differs.

After re-checking, update the hash with ``python -m bots_verl.integration.safety.verl_pins`` (prints the current
hashes).

:func:`check_verl_drift` refuses a run (``bots_verl.main``, before Ray starts, and its dry run) whose installed verl is
not :data:`VERL_VERSION`, whose pinned sources changed, or whose TransferQueue, torchdata or tensordict (whose
internals the glue reads: ``KVBatchMeta`` and the key/tag layout, ``StatefulDataLoader``'s sampler state and
``next_iter_state``, ``NonTensorData``) lies outside :data:`DEPENDENCY_VERSIONS`, the range tested and bounded in
``setup.py``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import logging
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

logger = logging.getLogger(__name__)

__all__ = [
    "DEPENDENCY_VERSIONS",
    "PINS",
    "VERL_VERSION",
    "VerlDriftError",
    "changed_pins",
    "check_verl_drift",
    "dependency_problems",
    "source_hash",
]

VERL_VERSION = "0.9.1"

# distribution -> the versions tested (kept in step with setup.py's "verl" extra)
DEPENDENCY_VERSIONS: dict[str, str] = {
    "TransferQueue": ">=0.1.10,<0.2",
    "torchdata": ">=0.11.0,<0.12",
    "tensordict": ">=0.10.0,<0.11",
}


class VerlDriftError(RuntimeError):
    """The installed verl (or a dependency whose internals the glue reads) is not the version bots-verl was built on."""


# "module:qualname" -> (sha256 of inspect.getsource, what depends on it)
PINS: dict[str, tuple[str, str]] = {
    "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer.__init__": (
        "0c37a4862999198830cd4b4835116df2d6e672d105caee9491487f748d94bb90",
        "adopt_replay_buffer sets the instance's poll_interval (bots.replay_poll_interval) after verl built it",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer._wait_for_next_poll": (
        "10088bf03da693830d23be51540b04ad3e21e34566f70cbe8863f2867873f8cd",
        "the poll sleeps self.poll_interval (BOTSReplayBuffer shortens it)",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer._clear_groups": (
        "46adae90d465f15a4bd3ff1154da6dba5c27a8288030e11aeb2bd477e8e87b42",
        "BOTSReplayBuffer._clear_groups reads evicted DAPO groups from self.partitions before calling it",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer._select_prompt_uids": (
        "d54921984c037a787c87aed3f59301fcbaafc66c2871a845ad37bad5104628ab",
        "BOTSReplayBuffer._select_prompt_uids re-implements it with a deterministic tie-break (same returns)",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer._materialize_batch": (
        "f9fe1d149509051822a4579c6d565ed424a489a8d00e092f3b93bf799cdfcbda",
        "BOTSReplayBuffer._materialize_batch sorts its train batch (canonical_order)",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer.sample": (
        "cdcecebeb7f0b44e9726b62e208fb6821023591d8b91b0a9ad56750a96363e43",
        "the three overrides above are the steps sample() calls; DAPO refills go through refill_fn",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._build_replay_buffer": (
        "c6c5bd0783311ea3ed37f2f5054eb1d23533deb76b181643419b2f37897f38be",
        "adopt_replay_buffer rebinds the built-in ReplayBuffer instance to BOTSReplayBuffer (keeps verl's DAPO kwargs)",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._init_dataloader": (
        "86cf3749e087b883b1ddfd5b153f1e8c0d1bc83aaa0c66bf43ce63c04602d3c4",
        "BOTSTrainer rebuilds train_dataloader from the loader verl built here (_with_sampler)",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._fetch_one_gen_batch": (
        "d62e586d520574133029d1362d2355d811d516987578a3b0e1076b8728a81232",
        "BOTSTrainer records the dispatch order of the uids assigned here",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._add_prompts_to_generate": (
        "93543f843e1a1966a03dec292ed140f7fa57b7bee007d738160a965ffad02f75",
        "verl's refill_fn (sync and async buffers): BOTSTrainer checks the step's generation-batch cap before it",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._resolve_filter_groups_metric": (
        "865586d748fd66fbc34565b75161c2aa154f880a0c65d72f7a2465ce05dbbc4b",
        "ignores algorithm.filter_groups.max_num_gen_batches (a warning only), so safety/refill_cap.py enforces it",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBufferAsync.wait_for_sampleable": (
        "5590a1b06f671763968213e1353f5bd93a64a342b620762f9ec9b2ecc8e5db56",
        "the async buffer refills evicted groups through refill_fn, where the generation-batch cap is checked",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._load_checkpoint": (
        "bb446d77c48ac6cc633e86c83b7195b78d899ece10d1b5e7150908acddb17265",
        "BOTSTrainer.init resolves the same resume folder; _load_checkpoint detects a missing data.pt through "
        "train_dataloader.next_iter_state",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer.step": (
        "e22f53aadb7805d2d15d16ba6528b6ef8628dfab5949ef00abbc339f5a35ec80",
        "BOTSTrainer.step brackets it (sampler.begin_step/end_step) and updates the posterior after it",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._compute_reward_colocate": (
        "f0092bcdfbd5baf70591b13d13f05d4e6cc9817ba7b987636bdfb6597ceb23c3",
        "outcomes.read_outcomes reads the reward extra keys (acc) it writes as top-level fields",
    ),
    "verl.trainer.ppo.v1.trainer_base:get_trainer_cls": (
        "a5b3ce304945430aab0745b6251336d8ddc9cf628015ca2cab4fac68d1f66663",
        "BOTSTaskRunner swaps TRAINER_REGISTRY[mode] for BOTSTrainer (trainer_registered)",
    ),
    "verl.trainer.main_ppo:TaskRunnerV1.run": (
        "26be986901db888bb7ccbec7a7b8eb90365de42a426e6fbf119e6e8d445dde7c",
        "BOTSTaskRunner.run calls it with BOTSTrainer registered for the mode it looks up",
    ),
    "verl.trainer.ppo.v1.trainer_sync:PPOTrainerSync": (
        "beb30ff5187a75b9ddb4737abf789a098ed5547cae50ff37394be14eadcbaa4a",
        "weights reach the rollout with global_steps = the step just trained (the hf server's seed version)",
    ),
    "verl.trainer.ppo.v1.agent_loop_tq:AgentLoopWorkerTQ._agent_loop_postprocess": (
        "523edacbff73640dee470baf8c1f09fb3450e4095c05d5d2226f9ef706604b5b",
        "trajectory keys {uid}_{session}_{output} and the fields outcomes.py and canonical_order read; "
        "verl_cpu.agent_loop.GroupedAgentLoopWorker overrides it and writes the same records, keys and tags",
    ),
    "verl.trainer.ppo.v1.agent_loop_tq:AgentLoopWorkerTQ._run_prompt": (
        "3d9bca6b0ea5fe25f5f99d3d86ba874a87f649fe362d379dc434409228cd6d32",
        "GroupedAgentLoopWorker._run_prompt re-implements it (running/finished/failure statuses, n, greedy override)",
    ),
    "verl.trainer.ppo.v1.agent_loop_tq:AgentLoopManagerTQ.__init__": (
        "9f1e99d66170d3326c6c1d0062ba37ad35dcff0585fdf38e7998acd38efe8de5",
        "GroupedAgentLoopManager replaces the agent_loop_workers_class set here after calling it",
    ),
    "verl.experimental.agent_loop.agent_loop:AgentLoopManager._init_agent_loop_workers": (
        "7c577f83ba5d9f44213267fbdbe1883afb3ddf3fe0fb55e2e1686d3ec1320fb1",
        "creates the workers from self.agent_loop_workers_class (GroupedAgentLoopManager's worker)",
    ),
    "verl.experimental.agent_loop.agent_loop:AgentLoopWorker._run_agent_loop": (
        "32c3d607c5d4c9fa124c9d53a476689b63aeb2662f28c9cc1933fc6ec3e9e989",
        "returns what _agent_loop_postprocess returns (GroupedAgentLoopWorker's session, scored and written later); "
        "GroupedAgentLoopWorker._run_agent_loop re-implements it with one shared single-turn loop",
    ),
    "verl.experimental.agent_loop.single_turn_agent_loop:SingleTurnAgentLoop": (
        "5d907b67971c7660f5e931dbf3b00aec1d8c8742c742f7b677ac8957bb452332",
        "keeps no state between runs, so GroupedAgentLoopWorker shares one instance across sessions",
    ),
    "verl.experimental.agent_loop.agent_loop:AgentLoopBase.__init__": (
        "8d0c1cd056eaeeec4f9563f17ed4e80e4bd914be3c94aa779c0e497b61848068",
        "sets only per-worker state (config, tokenizer, token builder): the shared single-turn loop relies on it",
    ),
    "verl.workers.rollout.llm_server:LLMServerClient": (
        "0d3f0edbd4eb704599674fa25eb376891bf32a42b880712b2070e63501322db3",
        "agent_loop.SingleReplicaClient overrides _acquire_server/_release_server and copies the client's attributes",
    ),
    "verl.workers.rollout.router:GlobalRequestLoadBalancer.get_all_servers": (
        "1eddd017c5dd0d8e521942c35529fcb3c2be7dacb4281441941bb239be43422b",
        "SingleReplicaClient goes direct only when it lists exactly the server the balancer handed out",
    ),
    "verl.experimental.agent_loop.agent_loop:AgentLoopWorker._compute_score": (
        "cf4b57719ad3c1b236e49fb99dddc4f6cf05bc0fb125e1475ce5c2534af2b742",
        "GroupedAgentLoopWorker._score_batch builds the same reward rows (one per session) and falls back to it",
    ),
    "verl.experimental.reward_loop.reward_loop:RewardLoopWorker.compute_score_batch": (
        "9852cc45bd3fc72deaa3a195fee09401fefeb1d809e9fdd21c25986adba238b9",
        "scores each row as its own compute_score call (GroupedAgentLoopWorker's one reward call per group)",
    ),
    # [async] bots_verl.integration.hooks.async_trainer, inflight, staleness
    "verl.trainer.ppo.v1.trainer_colocate_async:PPOTrainerColocateAsync": (
        "678d665bb28cbed489cd4c783ee945a0457d6c774cf105a8c820a0388f04bce8",
        "BOTSColocateAsyncTrainer takes back its on_init_end/on_step_end/on_sample_end (async_trainer.SYNC_HOOKS)",
    ),
    "verl.trainer.ppo.v1.trainer_separate_async:PPOTrainerSeparateAsync.__init__": (
        "418e5369c827b110184ae9a772e3b04c134736ea32f54a6b5d3f2666d3dd50a7",
        "settings._check_separate_async names the settings it asserts on before Ray starts",
    ),
    "verl.trainer.ppo.v1.trainer_separate_async:PPOTrainerSeparateAsync.on_step_end": (
        "33ea28ad74a3d0164f475629b8e33cb8f5e6b99aeb1578a024e632785f63eaba",
        "weights reach the standalone rollout as version global_steps after the step (staleness: lag = t - 1 - v)",
    ),
    # [separate_async on CPU] bots_verl.verl_cpu.checkpoint_engine (cpu_gloo), hf_rollout (standalone replica)
    "verl.checkpoint_engine.base:split_weight_chunks": (
        "ffa53988596348a613ee082a8ba166d3f6885c4ac0f33956f30b4bab3386dab7",
        "cpu_gloo packs the chunks it yields (uint8 views, at most bucket_size bytes each) into its buckets",
    ),
    "verl.checkpoint_engine.base:merge_weight_chunks": (
        "239c4caf9c74255a32dd7e23757ad4db487b069bf9209de6eaa245a491863378",
        "cpu_gloo's receiver rebuilds tensors with it; small tensors are views of the chunk (aligned offsets needed)",
    ),
    "verl.checkpoint_engine.base:CheckpointEngineWorker": (
        "61d4bf91141135dc78960c9577a79e9639b88fa806ee281592816d32ddb6e2e7",
        "builds the engine with bucket_size and engine_kwargs only, hands receive_weights (an async generator) to "
        "HFServerAdapter.update_weights, and passes replica_rank to the adapter",
    ),
    "verl.checkpoint_engine.base:CheckpointEngineManager.update_weights": (
        "7dc90230efef777a647bfc35fc21c7bddababcf35b4b870ef57655e1f42bad3e",
        "the lifecycle cpu_gloo follows every sync: abort, prepare, build_topology, init_process_group, send/receive, "
        "finalize",
    ),
    "verl.trainer.ppo.v1.replay_buffer:ReplayBufferAsync": (
        "26c6f64d5fa7c44099ae79ecfbb0a8c754a5ce104699ca85ed4a7c234482a81c",
        "stale/failed/DAPO groups evicted by clearing their prompt key (the in-flight ledger follows the registry); "
        "the staleness span convention InflightLedger.stale_after mirrors",
    ),
    "verl.workers.rollout.llm_server:FullyAsyncLLMServerClient.generate": (
        "3d6399350ff024fd974ac921bc42f8a061ad81adaca593db1de2265cba43f6b0",
        "min_global_steps = the oldest weight version of a resumed partial rollout (staleness.VERSION_TAG)",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._reissue_inflight_prompts": (
        "64f2191e335dec93bac26b803e819c80e5341cbf51e269fb469c1a395bc42ae9",
        "a resumed async run re-issues in-flight prompts under their own uids (the ledger in data.pt names them)",
    ),
    "verl.trainer.ppo.v1.trainer_base:PPOTrainer._save_checkpoint": (
        "8c2435b577e54f19ab6012e1eb5f44f01e6c8f4dd6380467914cb6afb9ab9d23",
        "data.pt (posterior + ledger) and the TransferQueue checkpoint are written together after the update",
    ),
    "verl.utils.dataset.rl_dataset:RLHFDataset._download": (
        "3c801c9bdead5d2c24eb3345ba5323d338aa6c2eb559710ab00fd2b5e47a3467",
        "BOTSTrainer reads reference columns from dataset.data_files, the local copies made here",
    ),
    "verl.utils.distributed:initialize_global_process_group_ray": (
        "761a94d1a2e058d31a0ac231c89a142abf5daf822e333bac75e84cafcf7507ac",
        "verl_cpu.compat.gloo_process_group passes backend='gloo' when the caller gives none",
    ),
    "verl.workers.engine.fsdp.transformer_impl:FSDPEngine._build_fsdp_module": (
        "35b7b539858443e45894da2d9675fb5a1d7b2bbb7c7c8b35605b0746d3179213",
        "verl_cpu.compat.unpinned_offload_policy replaces the CPUOffloadPolicy this constructs",
    ),
    "verl.workers.engine.base:EngineRegistry": (
        "f07ea16011005a58e50c947fd25b18b43da47c2b86aea5e0f51ad9db15033421",
        "verl_cpu.verl_registrations registers the FSDP engines for device cpu through EngineRegistry.register",
    ),
    "verl.workers.rollout.base:get_rollout_class": (
        "d0be5827f1214f04fa25ce71c8df8b6297540e8dd714bec35245ec63f932fb74",
        "verl_cpu.verl_registrations adds ('hf', 'async') to the private _ROLLOUT_REGISTRY this reads",
    ),
    "verl.workers.rollout.replica:RolloutReplica": (
        "5983e713558c4e04aee091e92a47ba52269def5bea650ab1bebc2868fbcb5775",
        "verl_cpu.hf_rollout.HFReplica subclasses it (launch_servers, servers, _server_handle, max_concurrency)",
    ),
    "verl.workers.rollout.replica:RolloutReplicaRegistry": (
        "3f6c8ceeaee4b6b2cfc1aa0d4e3abfa048d5510929da01f73f0209ee299ba280",
        "verl_cpu.verl_registrations registers the hf replica",
    ),
    "verl.workers.rollout.llm_server:LLMServerClient.generate": (
        "45f4cf4029f0be37b7de9c19972b0606b8052cf81c937e1b0f836c38d022acdb",
        "the keyword arguments and TokenOutput fields of the hf server's generate",
    ),
    "verl.workers.engine_workers:ActorRolloutRefWorker.update_weights": (
        "ea8f2ec1eb8a448116158a58f1bf402657e312858ef4b0e45f799682c7efd11c",
        "how HFServerAdapter.update_weights is called (generator of full tensors, global_steps, peft_config)",
    ),
    "verl.plugin.platform.platform_manager:_detect_platform_name": (
        "8dffc2174390e96d2f5465fa2d5aa55cd1195b21583c0ed0665f7256034a3983",
        "VERL_PLATFORM=cpu selects verl_cpu's registered platform",
    ),
    "verl.plugin.platform.platform_base:PlatformBase": (
        "a521d0ace428d2367866ad6dd829c74c684dcc6e175526ae37409550a3f7840c",
        "verl_cpu.platform.PlatformCPU implements this interface",
    ),
}


def _resolve(target: str) -> Any:
    module_name, qualname = target.split(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def source_hash(target: str) -> str:
    """sha256 of the source of ``module:qualname``."""
    return hashlib.sha256(inspect.getsource(_resolve(target)).encode()).hexdigest()


def changed_pins() -> list[str]:
    """One message per pinned object whose source differs from verl 0.9.1's (empty when all match)."""
    messages = []
    for target, (pinned, depends) in PINS.items():
        try:
            current = source_hash(target)
        except (ImportError, AttributeError, OSError, TypeError) as exc:
            messages.append(f"{target}: cannot be read ({exc}); re-check: {depends}")
            continue
        if current != pinned:
            messages.append(f"{target} changed since verl {VERL_VERSION}; re-check: {depends}")
    return messages


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def dependency_problems() -> list[str]:
    """One message per distribution of :data:`DEPENDENCY_VERSIONS` missing or outside its tested range."""
    problems = []
    for distribution, spec in DEPENDENCY_VERSIONS.items():
        installed = _installed_version(distribution)
        try:
            inside = installed is not None and Version(installed) in SpecifierSet(spec)
        except InvalidVersion:
            inside = False
        if not inside:
            problems.append(f"{distribution}{spec} is needed, {installed or 'none'} is installed")
    return problems


def check_verl_drift() -> None:
    """Refuse to run on a verl, or a dependency, other than the versions the glue was written and tested against.

    Raises:
        VerlDriftError: naming the verl version needed and the installed one, every pinned verl object whose source
            changed (with what of ours to re-check), and every dependency outside its tested range.
    """
    import verl

    problems = []
    installed = getattr(verl, "__version__", None)
    if installed != VERL_VERSION:
        problems.append(f"verl {VERL_VERSION} is needed, {installed} is installed")
    problems += [f"verl source {message}" for message in changed_pins()]
    problems += dependency_problems()
    if problems:
        raise VerlDriftError(
            f"bots-verl extends verl {VERL_VERSION} through private code that must not have changed (bots_verl/"
            "integration/safety/verl_pins.py), so it refuses to run here:\n  - "
            + "\n  - ".join(problems)
            + f"\nInstall the tested versions: pip install 'verl[verl-core]=={VERL_VERSION}' "
            + " ".join(f"'{d}{spec}'" for d, spec in DEPENDENCY_VERSIONS.items())
            + ". Moving to another version means re-checking every pin named above, then updating PINS "
            "(python -m bots_verl.integration.safety.verl_pins prints the current hashes) and VERL_VERSION"
        )


def main() -> None:
    """Print the current hash of every pinned object (to update :data:`PINS` after re-checking)."""
    for target in PINS:
        print(f"{target} {source_hash(target)}")


if __name__ == "__main__":
    main()
