"""The trainer's side of the Ray hop to the selector service: calls, the incarnation check and their timings.

:class:`SelectorClient` wraps the :class:`~bots_verl.integration.transport.selector_service.SelectorActor` handle.
Every call is one ``ray.get`` on the service; every reply carries the service's incarnation token, and a token that
changes behind the client's back (the actor was re-created with the prior) or a dead actor is a
:class:`PosteriorLostError`: the run must resume from its last checkpoint instead of training on from the prior. The
client also sums the time selections take, in the service and with the round trip, for the step's
``bots/select_ms`` and ``bots/select_roundtrip_ms``.

:class:`InProcessSelectorClient` calls a :class:`~bots_verl.integration.transport.selector_service.SelectorService` in
this process instead (tests, benchmarks): the same replies and checks without Ray.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from bots_verl.integration.transport.sampler_state import from_torch_safe, to_torch_safe
from bots_verl.integration.transport.selector_service import SelectorActor, SelectorService

logger = logging.getLogger(__name__)

__all__ = ["InProcessSelectorClient", "PosteriorLostError", "SelectorClient"]


class PosteriorLostError(RuntimeError):
    """The posterior actor died or was re-created with another state; resume from the last checkpoint."""


def _death_reason(exc: Exception) -> str:
    """Ray's exception in one line: its type, then the lines that give a reason (a dead node is named), or its first.

    A node that is lost shows first as ``ActorUnavailableError`` ("Socket closed") and, once Ray's GCS has marked the
    node dead, as ``ActorDiedError`` ("... because its node has died").
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reasons = [line for line in lines if "because" in line or "node" in line.lower()] or lines[:1]
    return f"{type(exc).__name__}: {' '.join(reasons)}"[:400]


class SelectorClient:
    """Calls the run's selector service through Ray, checking its incarnation on every reply.

    Args:
        actor: the service's handle (:func:`~bots_verl.integration.transport.selector_service.create_selector_service`).
    """

    def __init__(self, actor: SelectorActor) -> None:
        self.actor = actor
        self._incarnation: str | None = None
        self.select_ms = 0.0  # service-side selection time since the last ``pop_timing``
        self.select_roundtrip_ms = 0.0  # the same including the Ray round trip

    def _call(self, method: str, *args: Any) -> Any:
        """``ray.get(actor.<method>.remote(*args))``; the one place a call crosses to the service."""
        import ray

        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except ray.exceptions.RayActorError as exc:
            raise PosteriorLostError(
                "the BOTS posterior actor died or became unreachable (its process or its node is gone; Ray: "
                f"{_death_reason(exc)}); its state is lost for this process. Resume from the last checkpoint "
                "(trainer.resume_mode=auto) to restore it from data.pt"
            ) from exc

    def _check_incarnation(self, token: str) -> None:
        if self._incarnation is None:
            self._incarnation = token
        elif token != self._incarnation:
            raise PosteriorLostError(
                "the BOTS posterior actor was re-created (restarted with the prior?) behind the trainer's back; "
                "refusing to continue from a reset posterior. Resume from the last checkpoint"
            )

    def select(self, count: int) -> list[int]:
        """The service's next ``count`` tasks, best first.

        Raises:
            PosteriorLostError: if the actor died or was re-created.
        """
        t0 = time.perf_counter()
        indices, token, ms = self._call("select", count)
        self._check_incarnation(token)
        self.select_ms += ms
        self.select_roundtrip_ms += (time.perf_counter() - t0) * 1e3
        return [int(i) for i in np.asarray(indices)]

    def remote_update(
        self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray, lags: np.ndarray | None = None
    ) -> tuple[dict[str, float], float]:
        """Send one step's evidence to the service (:meth:`SelectorService.update_selector`).

        Returns:
            ``(stats, update_ms)``: the selector's statistics after the update and the service-side update time.

        Raises:
            ValueError: for invalid evidence (the posterior is unchanged).
            PosteriorLostError: if the actor died or was re-created.
        """
        stats, token, ms = self._call("update_selector", indices, successes, attempts, lags)
        self._check_incarnation(token)
        return stats, ms

    def pull_state(self) -> dict[str, Any]:
        """The selector's whole state (RNG included), torch-safe for ``data.pt``
        (:func:`~bots_verl.integration.transport.sampler_state.to_torch_safe`).

        Raises:
            PosteriorLostError: if the actor died or was re-created.
        """
        state, token = self._call("state_dict")
        self._check_incarnation(token)
        return to_torch_safe(state)

    def push_state(self, state: dict[str, Any]) -> None:
        """Load a checkpointed (torch-safe) selector state into the service; its new incarnation becomes the expected
        one.

        Raises:
            ValueError: for a state of another selector or pool (nothing changes).
            PosteriorLostError: if the actor died.
        """
        self._incarnation = self._call("load_state_dict", from_torch_safe(state))

    def pop_timing(self) -> tuple[float, float]:
        """``(select_ms, select_roundtrip_ms)`` accumulated since the last call, then reset."""
        out = (self.select_ms, self.select_roundtrip_ms)
        self.select_ms = self.select_roundtrip_ms = 0.0
        return out


class InProcessSelectorClient(SelectorClient):
    """A :class:`SelectorClient` of a :class:`SelectorService` in this process (tests, benchmarks): no Ray hop.

    Args:
        service: the service.
    """

    def __init__(self, service: SelectorService) -> None:
        super().__init__(service)  # the service's methods, called directly instead of through .remote
        self.service = service

    def _call(self, method: str, *args: Any) -> Any:
        return getattr(self.service, method)(*args)
