"""An agent-loop manager that scores and stores each prompt's ``n`` rollouts together (``rollout.agent``'s class).

verl's :class:`~verl.trainer.ppo.v1.agent_loop_tq.AgentLoopWorkerTQ` finishes every rollout on its own: one Ray call
to a ``RewardLoopWorker`` for its score and one ``tq.async_kv_batch_put`` (round trips to TransferQueue's controller
and storage) for its one-row record. On CPU, with a toy model, that per-rollout framework cost is a large share of
the generation phase. :class:`GroupedAgentLoopWorker` waits until the ``n`` sessions of a prompt have settled, then

- scores the sessions' outputs with one ``RewardLoopWorker.compute_score_batch`` call (one row per session, each row
  scored by the same ``compute_score`` verl calls per session), and
- writes all their records with one ``tq.async_kv_batch_put``,

before the prompt's terminal status, as verl does. What lands in TransferQueue is what verl's worker writes: keys
``{uid}_{session}_{index}``, the same fields (``output.as_dict()`` plus the prompt's fields, ``input_ids``,
``position_ids``, ``loss_mask``, ``multi_modal_inputs``), tags, ``rm_scores`` and ``reward_extra_info``; the prompt's
status goes ``running`` then ``finished`` (or ``failure`` when a session failed), the latter only after every
session settled and every surviving record was written. Differences: the records of a prompt appear together, not
one by one as sessions finish, and ``metrics.compute_score`` of a session is the time of its group's call.

Two more per-session costs of verl's worker go, where they buy nothing:

- verl builds a new agent loop for every session (``hydra.utils.instantiate`` of its registry entry, with its
  tokenizer wiring). verl's :class:`~verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop` keeps
  no state between runs (a run's inputs are its arguments and its locals), so one instance per agent name serves
  every session. Other agent loops, and registry entries with settings of their own, are built per session.
- verl's :class:`~verl.workers.rollout.llm_server.LLMServerClient` asks the global load balancer (a Ray actor) for a
  server before every request and tells it afterwards: two Ray calls per session. With one rollout replica the
  answer is always the same server, so :class:`SingleReplicaClient` asks once, then calls that server directly.

Sessions with several outputs (multi-turn agent loops that return a list), multi-modal position ids and sessions whose
agent loop already set a score go through verl's own per-session ``_compute_score``. When a group's batched call
fails, its sessions are scored one by one with verl's ``_compute_score`` so that exactly the sessions verl would lose
fail. :class:`GroupedAgentLoopManager` is verl's ``AgentLoopManagerTQ`` with this worker; the CPU backend selects it
(``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` in ``bots_verl/config/cpu_backend.yaml``).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import random
import time
from typing import Any

import hydra
import numpy as np
import ray
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ, apply_greedy_sampling_params
from verl.utils.rollout_trace import rollout_trace_attr
from verl.utils.tensordict_utils import list_of_dict_to_tensordict
from verl.workers.rollout.llm_server import LLMServerClient

logger = logging.getLogger(__name__)

_SETUP_ERRORS_SEEN: set[str] = set()


def _is_setup_error(error: BaseException) -> bool:
    """A reward that cannot score anything here (bubblewrap or math-verify missing), as opposed to one bad row.

    Ray re-raises a remote error as a subclass of both ``RayTaskError`` and the original class, so ``isinstance``
    sees the scorer's own exception type.
    """
    from bots_verl.rewards.sandbox import SandboxUnavailableError

    return isinstance(error, SandboxUnavailableError | ImportError)


def _report_setup_error(error: BaseException) -> None:
    """Log a setup error once per process: its first line names what to install."""
    cause = getattr(error, "cause", None) or error
    message = str(cause).strip().splitlines()[0] if str(cause).strip() else repr(cause)
    if message not in _SETUP_ERRORS_SEEN:
        _SETUP_ERRORS_SEEN.add(message)
        logger.error("the reward cannot score on this machine; the run stops: %s", message)


__all__ = ["GroupedAgentLoopManager", "GroupedAgentLoopWorker", "MANAGER_CLASS", "SingleReplicaClient"]

MANAGER_CLASS = "bots_verl.verl_cpu.agent_loop.GroupedAgentLoopManager"
# the registry entry verl's @register("single_turn_agent") writes: the stateless loop one instance can serve
SINGLE_TURN_ENTRY = {"_target_": f"{SingleTurnAgentLoop.__module__}.{SingleTurnAgentLoop.__qualname__}"}


class SingleReplicaClient(LLMServerClient):
    """verl's LLM server client that skips the load balancer once it knows there is only one server.

    The first request is routed and released through the load balancer as in verl; if the balancer then lists a
    single server, later requests go straight to it (the balancer's sticky sessions and in-flight counts choose
    among servers, and there is nothing to choose). With several servers every request goes through the balancer.

    Args:
        client: verl's client, whose settings (config, balancer handle, tokenizer) this one takes over.
    """

    def __init__(self, client: LLMServerClient) -> None:
        super().__init__(client.config, load_balancer_handle=client._load_balancer)
        vars(self).update(vars(client))
        self._direct: asyncio.Future | None = None

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        if self._direct is None:
            # one resolution shared by the sessions that arrive together
            self._direct = asyncio.ensure_future(self._resolve(request_id, **extra))
        direct = await self._direct
        return direct if direct is not None else await super()._acquire_server(request_id, **extra)

    async def _resolve(self, request_id: str, **extra: Any) -> tuple[str, Any] | None:
        """The only server ``(id, handle)``, or None when the balancer has several (or cannot say)."""
        try:
            server_id, server = await super()._acquire_server(request_id, **extra)
            super()._release_server(server_id, request_id=request_id)
            servers = await self._load_balancer.get_all_servers.remote()
        except Exception as e:
            logger.warning("could not ask the load balancer for its servers (%r); routing every request", e)
            return None
        return (server_id, server) if list(servers) == [server_id] else None

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        direct = self._direct
        if direct is not None and direct.done() and direct.result() is not None:
            return  # never acquired from the balancer
        super()._release_server(server_id, request_id=request_id)


@dataclasses.dataclass
class _Session:
    """One finished session of a prompt, held until its group is scored and written.

    Attributes:
        outputs: the agent loop's outputs (one for single-turn loops).
        kwargs: the prompt's fields and ``session_id``, as verl's ``_agent_loop_postprocess`` receives them.
        validate: whether the session belongs to validation.
        tensors: per output, ``(input_ids, position_ids, multi_modal_inputs)`` as verl's record has them.
    """

    outputs: list[AgentLoopOutput]
    kwargs: dict[str, Any]
    validate: bool
    tensors: list[tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]]


def _pad(rows: list[torch.Tensor]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=0)


class GroupedAgentLoopWorker(AgentLoopWorkerTQ.__ray_actor_class__):
    """verl's TransferQueue agent-loop worker with one reward call and one put per prompt group (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Ray wraps every method of an actor class, inherited ones too, into the class it ships to the worker process.
        # verl's __init__ cannot be pickled by name (its module attribute is the @ray.remote wrapper), so it would be
        # shipped by value with a copy of AgentLoopWorkerTQ for its super(), a class not in this one's MRO; this
        # __init__ pickles by name and its super() chain runs on the real classes.
        super().__init__(*args, **kwargs)
        # exactly verl's client (not a subclass with its own routing, e.g. a test's or the fully async one)
        if type(self.llm_client) is LLMServerClient and self.llm_client._load_balancer is not None:
            self.llm_client = SingleReplicaClient(self.llm_client)
        self._shared_loops: dict[str, SingleTurnAgentLoop] = {}

    async def _run_agent_loop(
        self,
        sampling_params: dict[str, Any],
        trajectory: dict[str, Any],
        *,
        agent_name: str,
        trace: bool = True,
        **kwargs: Any,
    ) -> Any:
        """verl's ``_run_agent_loop``, with one shared instance of the stateless single-turn loop (module docstring)."""
        if dict(_agent_loop_registry.get(agent_name, {})) != SINGLE_TURN_ENTRY:
            return await super()._run_agent_loop(
                sampling_params, trajectory, agent_name=agent_name, trace=trace, **kwargs
            )
        agent_loop = self._shared_loops.get(agent_name)
        if agent_loop is None:
            agent_loop = hydra.utils.instantiate(
                config=_agent_loop_registry[agent_name],
                trainer_config=DictConfigWrap(config=self.config),
                server_manager=self.llm_client,
                tokenizer=self.tokenizer,
                processor=self.processor,
                hf_model_type=self.hf_model_type,
                dataset_cls=self.dataset_cls,
                data_config=DictConfigWrap(self.config.data),
                tools=ToolListWrap(self.tools),
            )
            self._shared_loops[agent_name] = agent_loop
        with rollout_trace_attr(
            step=trajectory["step"],
            sample_index=trajectory["sample_index"],
            rollout_n=trajectory["rollout_n"],
            validate=trajectory["validate"],
            name="agent_loop",
            trace=trace,
        ):
            output = await agent_loop.run(sampling_params, **kwargs)
            return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)

    async def _agent_loop_postprocess(
        self, output: AgentLoopOutput | list[AgentLoopOutput], validate: bool, **kwargs: Any
    ) -> _Session | None:
        """Prepare a finished session's tensors; scoring and writing wait for its siblings (``_run_prompt``)."""
        outputs = output if isinstance(output, list) else [output]
        if not outputs:
            logger.warning("Empty output for prompt %s_%s", kwargs["uid"], kwargs["session_id"])
            return None
        # verl's worker puts each session's fields separately; one put of the whole group would pickle the prompt's
        # shared dicts (extra_info, raw_prompt) once, and the stored rows, and the reward rows, would alias them
        kwargs = copy.deepcopy(kwargs)
        tensors = []
        for item in outputs:
            input_ids = torch.tensor(item.prompt_ids + item.response_ids, dtype=torch.int64)
            attention_mask = torch.ones_like(input_ids, dtype=torch.int64)
            multi_modal_inputs = self._compute_multi_modal_inputs(item, input_ids)
            position_ids = self._compute_position_ids(
                input_ids.unsqueeze(0), attention_mask.unsqueeze(0), multi_modal_inputs
            ).squeeze(0)
            tensors.append((input_ids, position_ids, multi_modal_inputs))
        return _Session(outputs, kwargs, validate, tensors)

    async def _run_prompt(self, prompt: dict, sampling_params: dict, trajectory: dict, trace: bool = False) -> None:
        """verl's ``_run_prompt`` that scores and writes the settled sessions together before the terminal status."""
        uid, partition_id = prompt["uid"], "train" if not trajectory["validate"] else "val"
        await tq.async_kv_put(key=uid, partition_id=partition_id, tag={"status": "running"})
        tasks = []
        try:
            config = self.config.actor_rollout_ref.rollout
            n = prompt.pop("__rollout_n__", config.n if not trajectory["validate"] else config.val_kwargs.n)
            do_sample = prompt.pop("__do_sample__", True)
            run_sampling_params = dict(sampling_params)
            if not trajectory["validate"] and not do_sample:
                apply_greedy_sampling_params(run_sampling_params)
            tasks = [
                asyncio.create_task(
                    self._run_agent_loop(
                        run_sampling_params, trajectory=trajectory, trace=trace, session_id=i, **prompt
                    )
                )
                for i in range(n)
            ]
            results = await asyncio.gather(*tasks, return_exceptions=True)
            errors = [result for result in results if isinstance(result, BaseException)]
            sessions = [result for result in results if isinstance(result, _Session)]
            errors += await self._finish_group(sessions, partition_id)
            for error in errors:
                logger.error("Error in _run_prompt for uid=%s", uid, exc_info=(type(error), error, error.__traceback__))
            await tq.async_kv_put(
                key=uid, partition_id=partition_id, tag={"status": "failure" if errors else "finished"}
            )
        except Exception as e:
            logger.exception("Error in _run_prompt: %s", e)
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await tq.async_kv_put(key=uid, partition_id=partition_id, tag={"status": "failure"})

    async def _finish_group(self, sessions: list[_Session], partition_id: str) -> list[BaseException]:
        """Score the sessions, add teacher log-probs, write their records; returns the errors of the sessions lost.

        A session lost to its reward or teacher call is left out of the put, as in verl where it raises before its put.
        """
        errors: list[BaseException] = []
        scored = []
        for session, error in zip(sessions, await self._score(sessions), strict=True):
            if error is None:
                scored.append(session)
            else:
                errors.append(error)
        teacher = await asyncio.gather(
            *(
                self._compute_teacher_logprobs(
                    s.outputs[-1],
                    prompt_ids=s.outputs[-1].prompt_ids,
                    response_ids=s.outputs[-1].response_ids,
                    validate=s.validate,
                    sample_kwargs=s.kwargs,
                )
                for s in scored
            ),
            return_exceptions=True,
        )
        survivors = []
        for session, result in zip(scored, teacher, strict=True):
            if isinstance(result, BaseException):
                errors.append(result)
            else:
                survivors.append(session)
        # one put per distinct set of fields (normally one): list_of_dict_to_tensordict takes the first row's fields
        puts: dict[frozenset[str], tuple[list, list, list]] = {}
        for session in sorted(survivors, key=lambda s: s.kwargs["session_id"]):
            for key, field, tag in self._records(session):
                keys, fields, tags = puts.setdefault(frozenset(field), ([], [], []))
                keys.append(key)
                fields.append(field)
                tags.append(tag)
        for keys, fields, tags in puts.values():
            await tq.async_kv_batch_put(
                keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags, partition_id=partition_id
            )
        return errors

    async def _score(self, sessions: list[_Session]) -> list[BaseException | None]:
        """Give the sessions' final outputs their reward score; returns each session's error (None: scored)."""
        if self.reward_loop_worker_handles is None:
            return [None] * len(sessions)
        # one batched call per prompt length: right padding to a common width then leaves each row's valid response
        # (attention_mask[-response_length:].sum(), as verl's reward managers read it) as verl's unpadded row has it
        batches: dict[int, list[int]] = {}
        for i, session in enumerate(sessions):
            final = session.outputs[-1]
            if len(session.outputs) == 1 and final.reward_score is None and session.tensors[0][1].dim() == 1:
                batches.setdefault(len(final.prompt_ids), []).append(i)
        batched = {i for rows in batches.values() for i in rows}
        singles = [i for i in range(len(sessions)) if i not in batched]
        results = await asyncio.gather(
            *(self._score_batch([sessions[i] for i in rows]) for rows in batches.values()),
            self._score_each([sessions[i] for i in singles]),
        )
        errors: list[BaseException | None] = [None] * len(sessions)
        for rows, result in zip([*batches.values(), singles], results, strict=True):
            for i, error in zip(rows, result, strict=True):
                errors[i] = error
        return errors

    async def _score_each(self, sessions: list[_Session]) -> list[BaseException | None]:
        """verl's own per-session scoring (a no-op for outputs that already carry a score)."""
        results = await asyncio.gather(
            *(self._compute_score(s.outputs, kwargs=s.kwargs) for s in sessions), return_exceptions=True
        )
        return [result if isinstance(result, BaseException) else None for result in results]

    async def _score_batch(self, sessions: list[_Session]) -> list[BaseException | None]:
        """Score single-output sessions with one ``compute_score_batch`` call (rows as verl's ``_compute_score``)."""
        outputs = [s.outputs[0] for s in sessions]
        start = time.perf_counter()
        try:
            input_ids = [s.tensors[0][0] for s in sessions]
            batch = TensorDict(
                {
                    "prompts": _pad([torch.tensor(o.prompt_ids, dtype=torch.int64) for o in outputs]),
                    "responses": _pad([torch.tensor(o.response_ids, dtype=torch.int64) for o in outputs]),
                    "attention_mask": _pad([torch.ones_like(ids) for ids in input_ids]),
                    "input_ids": _pad(input_ids),
                    "position_ids": _pad([s.tensors[0][1] for s in sessions]),
                },
                batch_size=len(sessions),
            )
            non_tensor_batch = {
                **{key: np.array([s.kwargs[key] for s in sessions]) for key in sessions[0].kwargs},
                "__num_turns__": np.array([o.num_turns for o in outputs]),
                "tool_extra_fields": np.array([o.extra_fields for o in outputs], dtype=object),
                "prompt_len": np.array([len(o.prompt_ids) for o in outputs]),
                "response_len": np.array([len(o.response_ids) for o in outputs]),
            }
            handle = random.choice(self.reward_loop_worker_handles)
            results = await handle.compute_score_batch.remote(DataProto(batch=batch, non_tensor_batch=non_tensor_batch))
            scores = [(result["reward_score"], result["reward_extra_info"]) for result in results]
            if len(scores) != len(outputs):
                raise RuntimeError(f"compute_score_batch returned {len(scores)} results for {len(outputs)} rows")
        except Exception as e:
            if _is_setup_error(e):
                # the scorer cannot work here at all (no sandbox, no math-verify): scoring row by row would only repeat
                # the error per rollout; every session fails with it and the run stops, said once per worker
                _report_setup_error(e)
                return [e] * len(sessions)
            # one failing row fails the whole call: score one by one so that only the sessions verl loses fail
            logger.warning("batched reward call failed (%r); scoring %d sessions one by one", e, len(sessions))
            return await self._score_each(sessions)
        elapsed = time.perf_counter() - start
        for output, (score, extra_info) in zip(outputs, scores, strict=True):
            output.reward_score = score
            output.extra_fields["reward_extra_info"] = extra_info
            output.metrics.compute_score = elapsed
        return [None] * len(sessions)

    def _records(self, session: _Session) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """``(key, fields, tag)`` of each output, exactly as verl's ``_agent_loop_postprocess`` puts them."""
        outputs, kwargs = session.outputs, session.kwargs
        final = outputs[-1]
        if final.reward_score is not None:
            for output in outputs[:-1]:
                output.reward_score = final.reward_score
                output.extra_fields["reward_extra_info"] = final.extra_fields["reward_extra_info"]
        records = []
        for i, (output, (input_ids, position_ids, multi_modal_inputs)) in enumerate(
            zip(outputs, session.tensors, strict=True)
        ):
            field = output.as_dict()
            field.update(kwargs)
            field.pop("multi_modal_data", None)
            field["loss_mask"] = field["response_mask"]
            field["input_ids"] = input_ids
            field["position_ids"] = position_ids
            field["multi_modal_inputs"] = multi_modal_inputs
            prompt_len, response_len = field["prompts"].size(0), field["responses"].size(0)
            tag = {
                "status": "success",
                "prompt_len": prompt_len,
                "response_len": response_len,
                "seq_len": prompt_len + response_len,
                "global_steps": kwargs["global_steps"],
                "min_global_steps": field["extra_fields"].get("min_global_steps"),
                "max_global_steps": field["extra_fields"].get("max_global_steps"),
            }
            records.append((f"{kwargs['uid']}_{kwargs['session_id']}_{i}", field, tag))
        return records


class GroupedAgentLoopManager(AgentLoopManagerTQ):
    """verl's ``AgentLoopManagerTQ`` whose workers are :class:`GroupedAgentLoopWorker`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # read by _init_agent_loop_workers, which create() calls after __init__
        self.agent_loop_workers_class = ray.remote(GroupedAgentLoopWorker)
