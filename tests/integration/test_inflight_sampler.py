"""The sampler's in-flight rule and its checkpoint with the posterior service in this process (no Ray: fast).

``test_async_on_cpu.py`` runs the same rules with the Ray actor, TransferQueue and verl's replay buffer; here the
prompt registry is a plain set that the test edits as verl would (register on dispatch, delete when trained).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from bots_verl.core.settings import SelectorSettings
from bots_verl.integration.transport.inflight import InflightLedger
from bots_verl.integration.transport.sampler import BOTSSampler
from bots_verl.integration.transport.selector_client import InProcessSelectorClient
from bots_verl.integration.transport.selector_service import SelectorService

N, B = 6, 4
REF = np.sort(np.random.default_rng(0).integers(0, 17, size=(N, 2)) / 16, axis=1)


class Run:
    """A sampler with its ledger, and the prompt registry verl's TransferQueue would hold."""

    def __init__(self, registry: set[str], seed: int = 3) -> None:
        self.registry = registry
        self.sampler = BOTSSampler(
            InProcessSelectorClient(SelectorService(SelectorSettings("bots", seed=seed), N, REF)), N, B, list(range(N))
        )
        self.sampler.track_inflight(InflightLedger(stale_after=2), lambda: set(self.registry))
        self.it = iter(self.sampler)

    def dispatch(self, count: int, step: int, tag: str) -> list[int]:
        out = []
        for i in range(count):
            out.append(next(self.it))
            uid = f"{tag}{step}x{i}"
            self.registry.add(uid)
            self.sampler.bind_uids([uid], step)
        return out


def test_in_flight_tasks_sit_out_and_a_small_pool_falls_back():
    run = Run(set())
    run.sampler.begin_step(1)
    first = run.dispatch(B, 1, "a")
    run.sampler.forward_update(np.array([5]), np.array([1.0]), np.array([4.0]))
    second = run.dispatch(B, 1, "b")
    assert set(range(N)) - set(first) <= set(second) and len(set(second)) == B
    figures = run.sampler.end_step()
    assert figures["inflight_fallbacks"] == 2.0 and figures["inflight_groups"] == 2 * B


def test_bad_lags_reach_the_actor_and_are_refused_without_change():
    run = Run(set())
    run.sampler.begin_step(1)
    run.dispatch(B, 1, "a")
    before, _ = run.sampler.client._call("state_dict")
    with pytest.raises(ValueError, match="lags"):
        run.sampler.forward_update(np.array([0, 1]), np.array([1.0, 2.0]), np.array([4.0, 4.0]), np.array([0, -2]))
    after, _ = run.sampler.client._call("state_dict")
    assert after["steps"] == before["steps"]
    np.testing.assert_array_equal(after["extra"]["posterior"]["alpha"], before["extra"]["posterior"]["alpha"])
    assert run.sampler.updates == 0


def test_the_ledger_rides_in_the_checkpoint_and_the_resumed_run_selects_alike():
    registry: set[str] = set()
    run = Run(registry)
    run.sampler.begin_step(1)
    run.dispatch(B, 1, "a")
    run.sampler.forward_update(np.array([0, 1]), np.array([1.0, 2.0]), np.array([4.0, 4.0]), np.array([0, 2]))
    buffer = io.BytesIO()
    torch.save(run.sampler.state_dict(), buffer)  # data.pt; torch-loadable under weights_only
    saved_registry = set(registry)
    uninterrupted = run.dispatch(B, 2, "c")

    registry.clear()
    registry.update(saved_registry)  # verl's TransferQueue checkpoint restores the same prompts
    resumed = Run(registry, seed=99)  # the checkpoint's RNG wins
    buffer.seek(0)
    resumed.sampler.load_state_dict(torch.load(buffer, weights_only=True))
    assert resumed.sampler.inflight.positions() == {
        u: p for u, p in run.sampler.inflight.positions().items() if u in saved_registry
    }
    assert resumed.dispatch(B, 2, "c") == uninterrupted
    assert resumed.sampler.rollouts_received == run.sampler.rollouts_received == 8.0
