"""The ``cpu_gloo`` checkpoint engine: the weight sync of ``separate_async`` on CPU, checked bit for bit.

Each rank of a sync runs in its own thread with its own event loop and its own engine, as verl's
``CheckpointEngineManager`` drives them in separate Ray workers: ``prepare`` on every rank, ``build_topology``, then
``init_process_group`` on every rank at once (a real gloo group over a real ``TCPStore`` on 127.0.0.1), then
``send_weights`` on the trainer ranks and ``receive_weights`` on the rollout ranks, then ``finalize``. Nothing is
mocked; Ray is not needed for the transport itself (the engine falls back to 127.0.0.1 outside Ray). The last test
hands the received weights to the real ``hf`` rollout server (a Ray actor) and reads its model back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch
from verl.checkpoint_engine import CheckpointEngineRegistry

import bots_verl.verl_cpu.checkpoint_engine as engine_module
from bots_verl.verl_cpu.checkpoint_engine import BACKEND, GlooCheckpointEngine, GlooMaster, WeightSyncError

TIMEOUT_S = 60.0


def _weights() -> dict[str, torch.Tensor]:
    """Tensors of several dtypes and sizes, with bit patterns a lossy path would change (NaN payloads, -0.0)."""
    gen = torch.Generator().manual_seed(0)
    odd = torch.randn(7, 3, generator=gen)
    odd[0, 0], odd[1, 1], odd[2, 2] = float("nan"), -0.0, float("inf")
    return {
        "embed.weight": torch.randn(64, 16, generator=gen),  # 4096 bytes: larger than a 1 KiB bucket, sent in chunks
        "layer.0.weight": torch.randn(16, 16, generator=gen).to(torch.bfloat16),
        "layer.0.bias": torch.randn(16, generator=gen).double(),
        "odd": odd,
        "steps": torch.arange(5, dtype=torch.int64),
        "transposed": torch.randn(4, 6, generator=gen).t(),  # not contiguous: sent as its values
        "scalar": torch.tensor(3.5),
    }


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))


def _sync(
    weights: Callable[[], Iterable[tuple[str, Any]]],
    *,
    bucket_size: int,
    actor_ranks: int = 1,
    rollout_ranks: int = 1,
    wire: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[Any], list[Any]]:
    """One weight sync as verl's manager runs it; returns what each trainer rank and each rollout rank ended with.

    A trainer rank ends with its ``send_weights`` metrics, a rollout rank with the dict it received; a rank that
    raised ends with the exception. ``wire`` may change each bucket's metadata after the sender built it (a bucket
    damaged on its way).
    """
    actors = [GlooCheckpointEngine(bucket_size, is_master=(i == 0), timeout_s=TIMEOUT_S) for i in range(actor_ranks)]
    if wire is not None:
        send_bucket = actors[0]._send_bucket

        async def damaged(status: int, meta: dict[str, Any], payload: torch.Tensor) -> None:
            wire(meta)
            await send_bucket(status, meta, payload)

        actors[0]._send_bucket = damaged  # type: ignore[method-assign]
    rollouts = [GlooCheckpointEngine(bucket_size, timeout_s=TIMEOUT_S) for _ in range(rollout_ranks)]
    metadata = [e.prepare() for e in actors] + [e.prepare() for e in rollouts]
    actor_kwargs, rollout_kwargs = GlooCheckpointEngine.build_topology(actor_ranks, rollout_ranks, metadata)
    results: list[Any] = [None] * (actor_ranks + rollout_ranks)

    async def receive(engine: GlooCheckpointEngine) -> dict[str, torch.Tensor]:
        return {name: tensor async for name, tensor in engine.receive_weights(global_steps=1)}

    def run(index: int, engine: GlooCheckpointEngine, kwargs: dict[str, Any], sender: bool) -> None:
        try:
            engine.init_process_group(**kwargs)
            if sender:
                results[index] = asyncio.run(engine.send_weights(weights(), global_steps=1))
            else:
                results[index] = asyncio.run(receive(engine))
        except Exception as exc:  # the test inspects it
            results[index] = exc
        finally:
            engine.finalize()

    threads = []
    for i, engine in enumerate(actors):
        kwargs = {k: v[i] for k, v in actor_kwargs.items()}
        threads.append(threading.Thread(target=run, args=(i, engine, kwargs, True)))
    for j, engine in enumerate(rollouts):
        kwargs = {k: v[j] for k, v in rollout_kwargs.items()}
        threads.append(threading.Thread(target=run, args=(actor_ranks + j, engine, kwargs, False)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=2 * TIMEOUT_S)
        assert not thread.is_alive(), "a rank of the weight sync hung"
    return results[:actor_ranks], results[actor_ranks:]


def test_the_engine_is_in_verls_registry_under_its_backend_name():
    assert CheckpointEngineRegistry.get(BACKEND) is GlooCheckpointEngine
    engine = CheckpointEngineRegistry.new(BACKEND, bucket_size=1 << 20, is_master=True)
    assert isinstance(engine, GlooCheckpointEngine) and engine.bucket_size == 1 << 20


def test_every_rollout_rank_receives_the_trainers_weights_bit_for_bit_over_several_buckets():
    sent = _weights()
    senders, receivers = _sync(lambda: iter(sent.items()), bucket_size=1024, actor_ranks=2, rollout_ranks=2)
    metrics, idle = senders
    assert idle == {}  # trainer rank 1 only walked the generator
    total = sum(t.numel() * t.element_size() for t in sent.values())
    assert metrics[f"{BACKEND}/bytes"] == total
    assert metrics[f"{BACKEND}/buckets"] >= total // 1024  # respects the bucket size
    for received in receivers:
        assert not isinstance(received, Exception), received
        assert list(received) == list(sent)
        for name, tensor in sent.items():
            assert _same_bits(received[name], tensor), name
        # each tensor owns memory no later bucket overwrites
        assert len({t.untyped_storage().data_ptr() for t in received.values()}) > 1


def test_one_bucket_when_everything_fits_and_async_weight_streams_are_taken():
    sent = _weights()

    async def stream():
        for item in sent.items():
            yield item

    senders, (received,) = _sync(stream, bucket_size=1 << 20)
    assert senders[0][f"{BACKEND}/buckets"] == 1
    assert all(_same_bits(received[name], tensor) for name, tensor in sent.items())


def _with_empty_tensors() -> dict[str, torch.Tensor]:
    """The weights with zero-element tensors first, in the middle (between chunked ones) and last."""
    weights = _weights()
    return {
        "empty.first": torch.zeros(0),
        **dict(list(weights.items())[:3]),
        "empty.rows": torch.zeros(0, 16, dtype=torch.bfloat16),
        "empty.cols": torch.zeros(3, 0, dtype=torch.int64),
        **dict(list(weights.items())[3:]),
        "empty.last": torch.zeros(2, 0, 5),
    }


@pytest.mark.parametrize("bucket_size", [64, 1024, 1 << 20])
def test_zero_element_tensors_arrive_with_their_shape_and_dtype(bucket_size: int):
    sent = _with_empty_tensors()
    (metrics,), receivers = _sync(lambda: iter(sent.items()), bucket_size=bucket_size, rollout_ranks=2)
    assert not isinstance(metrics, Exception), metrics
    for received in receivers:
        assert not isinstance(received, Exception), received
        assert list(received) == list(sent)
        for name, tensor in sent.items():
            assert _same_bits(received[name], tensor), name
    assert received["empty.rows"].shape == (0, 16) and received["empty.rows"].dtype == torch.bfloat16
    assert received["empty.cols"].shape == (3, 0) and received["empty.last"].shape == (2, 0, 5)


def test_a_stream_of_only_empty_tensors_arrives_whole():
    sent = {"a": torch.zeros(0), "b": torch.zeros(0, 4, dtype=torch.float16)}
    (metrics,), (received,) = _sync(lambda: iter(sent.items()), bucket_size=1024)
    assert metrics[f"{BACKEND}/bytes"] == 0 and metrics[f"{BACKEND}/buckets"] == 1
    assert {k: (v.shape, v.dtype) for k, v in received.items()} == {k: (v.shape, v.dtype) for k, v in sent.items()}


@pytest.mark.parametrize("lost", ["empty.rows", "embed.weight", "scalar"])
def test_a_tensor_lost_on_the_way_fails_the_sync_naming_it(lost: str):
    def drop(meta: dict[str, Any]) -> None:
        meta["chunks"] = [c for c in meta.get("chunks", []) if c["name"] != lost]

    sent = _with_empty_tensors()
    _, (received,) = _sync(lambda: iter(sent.items()), bucket_size=1024, wire=drop)
    assert isinstance(received, WeightSyncError), received
    assert f"['{lost}'] did not arrive" in str(received)


def test_a_tensor_that_arrives_short_or_with_another_shape_fails_the_sync_naming_it():
    sent = _with_empty_tensors()

    def reshape(meta: dict[str, Any]) -> None:
        if meta.get("is_last"):
            meta["tensors"]["empty.cols"]["shape"] = [0, 3]

    _, (received,) = _sync(lambda: iter(sent.items()), bucket_size=1024, wire=reshape)
    assert isinstance(
        received, WeightSyncError
    ) and "'empty.cols' arrived as int64 [3, 0], sent as int64 [0, 3]" in str(received)

    def drop_second_chunk(meta: dict[str, Any]) -> None:
        meta["chunks"] = [c for c in meta.get("chunks", []) if (c["name"], c["chunk_offset"]) != ("embed.weight", 1024)]

    _, (received,) = _sync(lambda: iter(sent.items()), bucket_size=1024, wire=drop_second_chunk)
    assert isinstance(received, WeightSyncError) and "'embed.weight'" in str(received)


@pytest.mark.parametrize(
    "bad, sender_error, message",
    [
        (("layer.1.weight", [1.0, 2.0]), TypeError, "'layer.1.weight' is a list, not a torch.Tensor"),
        (("odd", torch.zeros(2)), ValueError, "'odd' appears twice"),
        ((7, torch.zeros(2)), TypeError, "non-empty string"),
    ],
)
def test_a_bad_weight_stream_fails_the_trainer_and_every_rollout_rank_with_the_reason(bad, sender_error, message):
    def weights():
        items = list(_weights().items())
        yield from items[:4]  # several buckets go out before the bad item
        yield bad
        yield from items[4:]

    (sender,), receivers = _sync(weights, bucket_size=512, rollout_ranks=2)
    assert isinstance(sender, sender_error) and message in str(sender)
    for received in receivers:
        assert isinstance(received, WeightSyncError)
        assert "the trainer's weight stream failed" in str(received) and message in str(received)


def test_a_generator_that_raises_is_reported_to_the_rollout():
    def weights():
        yield "embed.weight", torch.zeros(4)
        raise RuntimeError("gather failed on rank 3")

    (sender,), (received,) = _sync(weights, bucket_size=1024)
    assert isinstance(sender, RuntimeError) and "gather failed" in str(sender)
    assert isinstance(received, WeightSyncError) and "gather failed on rank 3" in str(received)


def test_topology_and_settings_errors_are_clear():
    master = GlooMaster("127.0.0.1", 1)
    with pytest.raises(ValueError, match="trainer rank 0 must be the master"):
        GlooCheckpointEngine.build_topology(1, 1, [None, None])
    with pytest.raises(ValueError, match=r"workers \[1\] did too"):
        GlooCheckpointEngine.build_topology(1, 1, [master, master])
    actor, rollout = GlooCheckpointEngine.build_topology(3, 2, [master, None, None, None, None])
    assert actor["rank"] == [0, -1, -1] and rollout["rank"] == [1, 2] and set(actor["world_size"]) == {3}
    with pytest.raises(ValueError, match="bucket_size"):
        GlooCheckpointEngine(0)
    with pytest.raises(WeightSyncError, match="init_process_group"):
        asyncio.run(GlooCheckpointEngine(1024).send_weights(iter([])))
    with pytest.raises(WeightSyncError, match="only rollout ranks"):

        async def drain():
            return [x async for x in GlooCheckpointEngine(1024).receive_weights()]

        asyncio.run(drain())


def test_unknown_dtype_in_metadata_is_an_error():
    with pytest.raises(WeightSyncError, match="unknown dtype"):
        engine_module._dtype("Tensor")


def test_the_hf_rollout_server_ends_with_the_trainers_weights_bit_for_bit(local_ray, toy_model_dir):
    """Trainer weights (the toy model, changed) -> cpu_gloo -> the ``hf`` server's ``update_weights`` -> its model."""
    import ray
    from test_hf_server_on_cpu import _settings
    from transformers import AutoModelForCausalLM

    from bots_verl.verl_cpu.hf_server import HFRolloutServer

    gen = torch.Generator().manual_seed(1)
    model = AutoModelForCausalLM.from_pretrained(toy_model_dir, dtype=torch.float32)
    trained = {k: v + 0.01 * torch.randn(v.shape, generator=gen) for k, v in model.state_dict().items()}
    _, (received,) = _sync(lambda: iter(trained.items()), bucket_size=4096)
    server = ray.remote(HFRolloutServer).options(num_cpus=0).remote(_settings(toy_model_dir))
    try:
        ray.get(server.update_weights.remote(received, 5))
        served = ray.get(server.weights.remote())
        assert sorted(served) == sorted(trained)
        assert all(_same_bits(served[k], trained[k]) for k in trained)
        # a sync that lost a tensor, or carries one of the wrong shape, is refused and changes nothing
        name = next(iter(trained))
        short = {k: v for k, v in received.items() if k != name}
        with pytest.raises(ray.exceptions.RayTaskError, match=f"misses rollout parameters: \\['{name}'"):
            ray.get(server.update_weights.remote(short, 6))
        wrong = {**received, name: torch.zeros(3, 3)}
        with pytest.raises(ray.exceptions.RayTaskError, match="wrong shapes"):
            ray.get(server.update_weights.remote(wrong, 6))
        assert all(_same_bits(v, trained[k]) for k, v in ray.get(server.weights.remote()).items())
    finally:
        ray.kill(server)
