"""``cpu_gloo``: a verl checkpoint engine that broadcasts the trainer's weights to separate rollout workers over gloo.

verl 0.9.1's ``separate_async`` trainer syncs the trainer's weights to a rollout pool on other resources through a
checkpoint engine (``actor_rollout_ref.rollout.checkpoint_engine.backend``) and refuses the in-process ``naive`` one;
the engines it ships stage weights in CUDA buffers (``nccl``, ``delta_sharded``), need an Ascend NPU (``hccl``) or RDMA
packages (``nixl``, ``mooncake``, ``kimi_ckpt_engine``). This engine does what ``nccl`` does, on CPU:

- ``prepare`` (every sync): the master (trainer rank 0) opens a ``TCPStore`` on a port the OS picks and reports its
  address; the other workers report nothing.
- ``build_topology``: one sender, as ``nccl`` with ``multi_sender=False``: trainer rank 0 is rank 0, the other
  trainer ranks sit out (rank -1: they still walk the weight generator, whose gathers are collective), rollout
  workers are ranks 1..R.
- ``init_process_group``: a ``torch.distributed.ProcessGroupGloo`` of those ranks over the store (TCP, so the rollout
  may be on another node). It is not the process's default group: the trainer's FSDP group is untouched.
- ``send_weights``: the weights, cut into chunks as verl's ``split_weight_chunks`` cuts them (a zero-element tensor
  as one empty chunk, where verl's yields none), are packed into buckets of at most ``bucket_size`` bytes
  (``checkpoint_engine.update_weights_bucket_megabytes``); each bucket is broadcast as a header
  (status, metadata length, payload length), its metadata (JSON: name, shape, dtype, offsets of each chunk) and its
  payload (each chunk at a 16-byte aligned offset). A weight stream that fails on the trainer (a non-tensor, a
  repeated name, any exception of the generator) broadcasts an abort with the reason, so the rollout workers raise
  it instead of waiting for the timeout.
- ``receive_weights``: each bucket lands in a fresh buffer and verl's ``merge_weight_chunks`` rebuilds the tensors, so a
  yielded tensor is never overwritten by the next bucket (the ``hf`` adapter keeps references, not copies). The last
  bucket carries the name, shape and dtype of every tensor sent (zero-element ones included: they travel as a chunk of
  0 bytes), and the sync fails naming any tensor that did not arrive whole, or arrived with another shape or dtype.
- ``finalize``: the group and the store are dropped; the next sync builds new ones (cheap on CPU: milliseconds).

Bytes travel as they are (``uint8`` views of each tensor), so the rollout gets the trainer's weights bit for bit
(``tests/verl_cpu/test_checkpoint_engine.py``). What it does not model: ``nccl``'s double-buffered pipelining (a bucket
is packed, sent, then the next one; on CPU the copy and the send compete for the same cores anyway), several senders,
and a group kept across syncs (``rebuild_group=False``).

Registered in verl's ``CheckpointEngineRegistry`` by :mod:`bots_verl.verl_cpu.verl_registrations` when verl imports
``verl.checkpoint_engine.base``.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from verl.checkpoint_engine.base import (
    CheckpointEngine,
    CheckpointEngineRegistry,
    TensorMeta,
    merge_weight_chunks,
)
from verl.workers.rollout.utils import ensure_async_iterator

logger = logging.getLogger(__name__)

__all__ = ["BACKEND", "ENGINE_KWARGS", "GlooCheckpointEngine", "GlooMaster", "WeightSyncError", "check_engine_settings"]

#: the name ``actor_rollout_ref.rollout.checkpoint_engine.backend`` selects this engine by
BACKEND = "cpu_gloo"

_OK, _ABORT = 0, 1
_HEADER = 3  # status, metadata bytes, payload bytes
_ALIGN = 16  # every chunk starts at a multiple of this in its bucket: a view as any dtype needs its element size


class WeightSyncError(RuntimeError):
    """The trainer's weight stream failed, or a rollout worker received a stream that does not add up."""


@dataclass(frozen=True)
class GlooMaster:
    """Where the master's store listens: handed by ``build_topology`` to every rank of the group."""

    host: str
    port: int


def _node_address() -> str:
    import ray

    return ray.util.get_node_ip_address().strip("[]") if ray.is_initialized() else "127.0.0.1"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise WeightSyncError(f"{BACKEND}: unknown dtype {name!r} in a bucket's metadata")
    return dtype


#: the keys of ``checkpoint_engine.engine_kwargs.cpu_gloo``: the engine's keyword arguments that verl does not set
ENGINE_KWARGS = ("timeout_s", "host")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_engine_settings(bucket_size: Any, engine_kwargs: Any) -> None:
    """The one check of the engine's settings: the driver's, before Ray (``bots_verl.main.check_config``), and the
    engine's own when a worker builds it.

    Args:
        bucket_size: bytes per bucket (verl passes ``update_weights_bucket_megabytes << 20``).
        engine_kwargs: ``checkpoint_engine.engine_kwargs.cpu_gloo`` (:data:`ENGINE_KWARGS`).

    Raises:
        ValueError: naming the key, for an unknown key, a bucket size that is not a positive integer, a timeout that
            is not a positive finite number of seconds, or a host that is not a non-empty string.
    """
    where = f"actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.{BACKEND}"
    if not isinstance(engine_kwargs, Mapping):
        raise ValueError(f"{where} must be a mapping of {list(ENGINE_KWARGS)}, got {engine_kwargs!r}")
    unknown = sorted(set(engine_kwargs) - set(ENGINE_KWARGS))
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}; {BACKEND} takes {list(ENGINE_KWARGS)}")
    if not (_number(bucket_size) and int(bucket_size) == bucket_size and bucket_size > 0):
        raise ValueError(
            f"{BACKEND}: bucket_size={bucket_size!r} bytes (actor_rollout_ref.rollout.checkpoint_engine."
            "update_weights_bucket_megabytes) must be a positive integer"
        )
    timeout = engine_kwargs.get("timeout_s", 600.0)
    if not (_number(timeout) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"{where}.timeout_s={timeout!r} must be a positive number of seconds")
    host = engine_kwargs.get("host", None)
    if host is not None and not (isinstance(host, str) and host.strip()):
        raise ValueError(f"{where}.host={host!r} must be an address or null (Ray's address of the node)")


@CheckpointEngineRegistry.register(BACKEND)
class GlooCheckpointEngine(CheckpointEngine):
    """Weights from trainer rank 0 to every rollout worker, broadcast in buckets over a gloo process group.

    Args:
        bucket_size: largest bucket in bytes (verl passes ``update_weights_bucket_megabytes << 20``); a tensor larger
            than a bucket is sent in chunks.
        is_master: True on trainer rank 0 (verl's actor worker sets it); the master hosts the group's store.
        timeout_s: how long a rank waits for the others in a collective before gloo raises.
        host: address the master's store listens on; by default Ray's address of this node (``127.0.0.1`` outside
            Ray).

    ``timeout_s`` and ``host`` come from verl's ``checkpoint_engine.engine_kwargs.cpu_gloo`` (e.g.
    ``+actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.cpu_gloo.timeout_s=1200``).

    Raises:
        ValueError: for settings :func:`check_engine_settings` refuses.
    """

    def __init__(self, bucket_size: int, is_master: bool = False, timeout_s: float = 600.0, host: str | None = None):
        check_engine_settings(bucket_size, {"timeout_s": timeout_s, "host": host})
        self.bucket_size = int(bucket_size)
        self.is_master = bool(is_master)
        self.timeout = datetime.timedelta(seconds=float(timeout_s))
        self.host = host
        self.rank: int | None = None
        self.world_size: int | None = None
        self._store: dist.Store | None = None
        self._group: Any = None

    # ------------------------------------------------------------------------------------------------ topology
    def prepare(self) -> GlooMaster | None:
        """Open the master's store (on a port the OS picks) and return its address; other workers return None."""
        if not self.is_master:
            return None
        host = self.host or _node_address()
        self._store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=self.timeout)
        return GlooMaster(host=host, port=int(self._store.port))

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[Any]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        """Trainer rank 0 sends (rank 0), the other trainer ranks sit out (-1), rollout workers receive (1..R).

        Raises:
            ValueError: when trainer rank 0 is not the master, or a worker other than it reported a store.
        """
        master = metadata[0] if metadata else None
        if not isinstance(master, GlooMaster):
            raise ValueError(f"{BACKEND}: trainer rank 0 must be the master (its prepare() returned {master!r})")
        others = [i for i, meta in enumerate(metadata[1:], start=1) if meta is not None]
        if others:
            raise ValueError(f"{BACKEND}: only trainer rank 0 may host the store; workers {others} did too")
        world_size = 1 + rollout_world_size
        actor = {
            "rank": [0] + [-1] * (actor_wg_world_size - 1),
            "world_size": [world_size] * actor_wg_world_size,
            "master": [master] * actor_wg_world_size,
        }
        rollout = {
            "rank": list(range(1, world_size)),
            "world_size": [world_size] * rollout_world_size,
            "master": [master] * rollout_world_size,
        }
        return actor, rollout

    def init_process_group(self, rank: int, world_size: int, master: GlooMaster) -> None:
        """Join this sync's gloo group (blocks until every rank has joined; rank -1 joins nothing).

        Raises:
            ValueError: for a rank outside the group.
        """
        self.rank, self.world_size = int(rank), int(world_size)
        if self.rank < 0:
            return
        if self.rank >= self.world_size:
            raise ValueError(f"{BACKEND}: rank {rank} outside a group of {world_size}")
        if self._store is None:
            self._store = dist.TCPStore(master.host, master.port, is_master=False, timeout=self.timeout)
        store = dist.PrefixStore(f"{BACKEND}/{master.port}", self._store)
        self._group = dist.ProcessGroupGloo(store, self.rank, self.world_size, self.timeout)
        logger.info("%s: rank %d of %d joined the weight-sync group", BACKEND, self.rank, self.world_size)

    def finalize(self) -> None:
        """Drop this sync's group and store (the next sync builds new ones)."""
        self._group = None
        self._store = None

    # ------------------------------------------------------------------------------------------------ wire
    def _require_group(self) -> Any:
        if self._group is None:
            raise WeightSyncError(f"{BACKEND}: no process group: call prepare() and init_process_group() first")
        return self._group

    async def _broadcast(self, tensor: torch.Tensor) -> None:
        options = dist.BroadcastOptions()
        options.rootRank = 0
        work = self._require_group().broadcast([tensor], options)
        await asyncio.to_thread(work.wait)

    async def _send_bucket(self, status: int, meta: dict[str, Any], payload: torch.Tensor) -> None:
        blob = torch.frombuffer(bytearray(json.dumps(meta).encode()), dtype=torch.uint8)
        await self._broadcast(torch.tensor([status, blob.numel(), payload.numel()], dtype=torch.int64))
        await self._broadcast(blob)
        if payload.numel():
            await self._broadcast(payload)

    async def _receive_bucket(self) -> tuple[int, dict[str, Any], torch.Tensor]:
        header = torch.zeros(_HEADER, dtype=torch.int64)
        await self._broadcast(header)
        status, meta_len, payload_len = (int(x) for x in header)
        blob = torch.zeros(meta_len, dtype=torch.uint8)
        await self._broadcast(blob)
        meta = json.loads(bytes(blob.numpy()).decode())
        payload = torch.empty(payload_len, dtype=torch.uint8)  # a fresh buffer: yielded tensors are views of it
        if payload_len:
            await self._broadcast(payload)
        return status, meta, payload

    # ------------------------------------------------------------------------------------------------ send
    @staticmethod
    async def _checked(weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator) -> AsyncGenerator:
        seen: set[str] = set()
        async for item in ensure_async_iterator(weights):
            if not (isinstance(item, tuple) and len(item) == 2):
                raise TypeError(f"{BACKEND}: the weight stream must yield (name, tensor) pairs, got {type(item)}")
            name, tensor = item
            if not isinstance(name, str) or not name:
                raise TypeError(f"{BACKEND}: a weight name must be a non-empty string, got {name!r}")
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"{BACKEND}: weight {name!r} is a {type(tensor).__name__}, not a torch.Tensor")
            if name in seen:
                raise ValueError(f"{BACKEND}: weight {name!r} appears twice in one sync")
            seen.add(name)
            yield name, tensor.detach().to("cpu").contiguous()

    @classmethod
    async def _split(
        cls, weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator, bucket_size: int
    ) -> AsyncGenerator[tuple[TensorMeta, torch.Tensor], None]:
        """Each checked tensor as chunks of at most ``bucket_size`` bytes; a zero-element tensor as one empty chunk.

        verl's ``split_weight_chunks`` yields no chunk at all for a tensor of 0 bytes, so its name and shape would
        never reach the rollout.
        """
        async for name, tensor in cls._checked(weights):
            data = tensor.view(-1).view(torch.uint8)
            offset = 0
            while True:
                size = min(bucket_size, tensor.nbytes - offset)
                meta = TensorMeta(
                    name=name, shape=tensor.shape, dtype=tensor.dtype, chunk_offset=offset, chunk_size=size, offset=0
                )
                yield meta, data[offset : offset + size]
                offset += size
                if offset >= tensor.nbytes:
                    break

    @torch.no_grad()
    async def send_weights(self, weights: Iterable[tuple[str, torch.Tensor]], global_steps: int | None = None) -> dict:
        """Broadcast the weights in buckets (trainer rank 0); other trainer ranks only walk the generator.

        Args:
            weights: ``(name, tensor)`` pairs (verl's ``get_per_tensor_param``), sync or async.
            global_steps: the weight version (logged only; verl passes it to the rollout itself).

        Returns:
            per-sync metrics for verl's trainer: the weights' bytes, the buckets and the seconds of this sync (empty
            off rank 0).

        Raises:
            WeightSyncError: on a rollout rank, or without a group.
            TypeError, ValueError: for a bad weight stream (the rollout ranks are told, and raise too).
        """
        if self.rank is None:
            raise WeightSyncError(f"{BACKEND}: init_process_group() was not called before send_weights()")
        if self.rank < 0:
            async for _ in ensure_async_iterator(weights):
                pass
            return {}
        if self.rank != 0:
            raise WeightSyncError(f"{BACKEND}: rank {self.rank} is a rollout worker: it receives, it does not send")
        start = time.monotonic()
        buffer = torch.empty(self.bucket_size, dtype=torch.uint8)
        chunks: list[dict[str, Any]] = []
        manifest: dict[str, dict[str, Any]] = {}  # every tensor sent: the receiver checks each arrived whole
        offset = buckets = sent = 0
        try:
            async for meta, chunk in self._split(weights, self.bucket_size):
                offset = -(-offset // _ALIGN) * _ALIGN  # the receiver views the bytes as the tensor's dtype
                if offset + meta.chunk_size > self.bucket_size:
                    await self._send_bucket(_OK, {"chunks": chunks, "is_last": False}, buffer[:offset])
                    buckets, chunks, offset = buckets + 1, [], 0
                buffer[offset : offset + meta.chunk_size] = chunk
                chunks.append(
                    {
                        "name": meta.name,
                        "shape": list(meta.shape),
                        "dtype": _dtype_name(meta.dtype),
                        "chunk_offset": meta.chunk_offset,
                        "chunk_size": meta.chunk_size,
                        "offset": offset,
                    }
                )
                offset += meta.chunk_size
                sent += meta.chunk_size
                if meta.chunk_offset == 0:
                    manifest[meta.name] = {"shape": list(meta.shape), "dtype": _dtype_name(meta.dtype)}
        except Exception as exc:
            try:  # tell the rollout ranks, so they raise the reason instead of waiting for the timeout
                await self._send_bucket(_ABORT, {"error": f"{type(exc).__name__}: {exc}"}, buffer[:0])
            except Exception:  # the group itself failed: the rollout ranks see gloo's error
                logger.exception("%s: could not tell the rollout ranks that the weight stream failed", BACKEND)
            raise
        await self._send_bucket(_OK, {"chunks": chunks, "is_last": True, "tensors": manifest}, buffer[:offset])
        buckets += 1
        seconds = time.monotonic() - start
        logger.info(
            "%s: sent %d tensors, %d bytes in %d buckets in %.3f s (step %s)",
            BACKEND,
            len(manifest),
            sent,
            buckets,
            seconds,
            global_steps,
        )
        return {
            f"{BACKEND}/bytes": float(sent),
            f"{BACKEND}/buckets": float(buckets),
            f"{BACKEND}/seconds": seconds,
        }

    # ------------------------------------------------------------------------------------------------ receive
    async def _received_chunks(
        self, sent: dict[str, dict[str, Any]]
    ) -> AsyncGenerator[tuple[TensorMeta, torch.Tensor], None]:
        """The chunks of every bucket, as they arrive; ``sent`` is filled with the tensors the last bucket lists.

        At the last bucket every tensor the trainer sent must have arrived whole, with the shape and dtype it was
        sent with (:func:`_check_arrived`).
        """
        if self.rank is None or self.rank < 1:
            raise WeightSyncError(f"{BACKEND}: only rollout ranks (>= 1) receive; this engine has rank {self.rank}")
        arrived: dict[str, dict[str, Any]] = {}  # name -> shape, dtype, bytes received
        partial: str | None = None  # the tensor whose chunks are arriving (verl's merge takes them in order)
        while True:
            status, meta, payload = await self._receive_bucket()
            if status == _ABORT:
                raise WeightSyncError(f"{BACKEND}: the trainer's weight stream failed: {meta.get('error')}")
            for entry in meta["chunks"]:
                name, start, size = entry["name"], int(entry["offset"]), int(entry["chunk_size"])
                if start < 0 or size < 0 or start + size > payload.numel():
                    raise WeightSyncError(f"{BACKEND}: chunk of {name!r} lies outside its bucket")
                got = arrived.setdefault(name, {"shape": entry["shape"], "dtype": entry["dtype"], "bytes": 0})
                if (got["shape"], got["dtype"]) != (entry["shape"], entry["dtype"]):
                    raise WeightSyncError(f"{BACKEND}: the chunks of {name!r} disagree on its shape or dtype")
                nbytes = _dtype(entry["dtype"]).itemsize * torch.Size(entry["shape"]).numel()
                if partial is not None and partial != name:
                    raise WeightSyncError(f"{BACKEND}: {partial!r} arrived short: the chunks of {name!r} came next")
                if int(entry["chunk_offset"]) != got["bytes"] or got["bytes"] + size > nbytes:
                    raise WeightSyncError(
                        f"{BACKEND}: {name!r}: a chunk of bytes {entry['chunk_offset']}..+{size} arrived after "
                        f"{got['bytes']} of its {nbytes} bytes"
                    )
                got["bytes"] += size
                partial = name if got["bytes"] < nbytes else None
                tensor_meta = TensorMeta(
                    name=name,
                    shape=torch.Size(entry["shape"]),
                    dtype=_dtype(entry["dtype"]),
                    chunk_offset=int(entry["chunk_offset"]),
                    chunk_size=size,
                    offset=start,
                )
                yield tensor_meta, payload[start : start + size]
            if meta["is_last"]:
                if not isinstance(meta.get("tensors"), dict):
                    raise WeightSyncError(f"{BACKEND}: the last bucket does not list the tensors sent")
                sent.update(meta["tensors"])
                _check_arrived(sent, arrived)
                return

    @torch.no_grad()
    async def receive_weights(self, global_steps: int | None = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        """Yield the trainer's tensors as they arrive (rollout ranks); each owns its storage.

        Raises:
            WeightSyncError: when the trainer's stream failed or the received stream does not add up: a tensor the
                trainer sent that did not arrive whole (named), or arrived with another shape or dtype.
        """
        sent: dict[str, dict[str, Any]] = {}
        merged: dict[str, dict[str, Any]] = {}
        async for name, tensor in merge_weight_chunks(self._received_chunks(sent), self.bucket_size):
            merged[name] = {"shape": list(tensor.shape), "dtype": _dtype_name(tensor.dtype), "bytes": tensor.nbytes}
            yield name, tensor
        # the chunks added up (checked above); this checks that every tensor also came out of the merge as sent
        _check_arrived(sent, merged)


def _check_arrived(sent: dict[str, dict[str, Any]], arrived: dict[str, dict[str, Any]]) -> None:
    """Every tensor in ``sent`` is in ``arrived`` with its shape, dtype and all its bytes, and nothing else is.

    Raises:
        WeightSyncError: naming the tensors that are missing, unexpected, short or of another shape or dtype.
    """
    missing = [name for name in sent if name not in arrived]
    if missing:
        raise WeightSyncError(f"{BACKEND}: the trainer sent {len(sent)} tensors, {missing} did not arrive")
    extra = [name for name in arrived if name not in sent]
    if extra:
        raise WeightSyncError(f"{BACKEND}: received tensors the trainer did not list as sent: {extra}")
    for name, want in sent.items():
        got = arrived[name]
        if list(got["shape"]) != list(want["shape"]) or got["dtype"] != want["dtype"]:
            raise WeightSyncError(
                f"{BACKEND}: {name!r} arrived as {got['dtype']} {list(got['shape'])}, "
                f"sent as {want['dtype']} {list(want['shape'])}"
            )
        nbytes = _dtype(want["dtype"]).itemsize * torch.Size(want["shape"]).numel()
        if got["bytes"] != nbytes:
            raise WeightSyncError(f"{BACKEND}: {name!r} arrived with {got['bytes']} of its {nbytes} bytes")
