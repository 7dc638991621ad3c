"""The run's selector as a named Ray actor (a *service*: in verl, "actor" is the policy being trained).

One :class:`SelectorService` per run owns a :mod:`bots_verl.core` selector: a Beta posterior (``bots``, ``mopps``,
...) or any other registered one (``random``, ``sequential``, ``greso``, ...). The trainer (through
:class:`~bots_verl.integration.transport.selector_client.SelectorClient`) is its only writer; any process in the Ray
cluster can read it by name, e.g. a monitoring script::

    actor = ray.get_actor("bots_posterior_<project>_<experiment>", namespace="bots")
    print(ray.get(actor.stats.remote()))

The actor takes no CPU slot (``num_cpus=0``): its work is a few milliseconds per step and must not compete with
rollout or reward workers for slots.

**Restarts.** The actor is created with ``max_restarts=0``. Every reply carries an ``incarnation`` token that changes
whenever the state is (re)created or loaded; the client checks it. A killed actor, or one that Ray restarted with the
prior, therefore makes the trainer fail loudly instead of silently training from the prior; resuming from the last
checkpoint (verl's ``trainer.resume_mode=auto``) restores the posterior from ``data.pt``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Protocol, TypeVar

import numpy as np

from bots_verl.core.settings import SelectorSettings

logger = logging.getLogger(__name__)

__all__ = ["RemoteMethod", "SelectorActor", "SelectorService", "create_selector_service"]

_Result_co = TypeVar("_Result_co", covariant=True)


class RemoteMethod(Protocol[_Result_co]):
    """One method of a Ray actor handle: ``handle.method.remote(*args)`` runs it in the actor and returns an
    ``ObjectRef`` that ``ray.get`` turns into the method's result (``_Result_co``)."""

    def remote(self, *args: Any) -> Any:
        """Call the method in the actor (one Ray hop); returns the result's ``ObjectRef``."""
        ...


class SelectorActor(Protocol):
    """The handle :func:`create_selector_service` returns: :class:`SelectorService`'s methods across the Ray hop.

    Each attribute is called as ``handle.<method>.remote(...)``; the type parameter is what ``ray.get`` returns.
    """

    select: RemoteMethod[tuple[np.ndarray, str, float]]
    update_selector: RemoteMethod[tuple[dict[str, float], str, float]]
    stats: RemoteMethod[dict[str, float]]
    state_dict: RemoteMethod[tuple[dict[str, Any], str]]
    load_state_dict: RemoteMethod[str]
    incarnation_token: RemoteMethod[str]
    posterior: RemoteMethod[tuple[np.ndarray, np.ndarray] | None]


class SelectorService:
    """Owns one selector; the body of the Ray actor (also usable in-process, e.g. in benchmarks).

    Args:
        settings: the run's selector settings (resolved once by the driver, :mod:`bots_verl.config.settings`).
        num_tasks: pool size.
        reference_pass_rates: ``(num_tasks, K)`` reference pass rates or None.
        task_embeddings: ``(num_tasks, d)`` task embeddings aligned to the pool (``bots.task_embeddings``) or None;
            given only when set, so selectors that never read them are built exactly as before.
    """

    def __init__(
        self,
        settings: SelectorSettings,
        num_tasks: int,
        reference_pass_rates: np.ndarray | None = None,
        task_embeddings: np.ndarray | None = None,
    ) -> None:
        self.selector = settings.build(
            num_tasks, reference_pass_rates=reference_pass_rates, task_embeddings=task_embeddings
        )
        self.incarnation = uuid.uuid4().hex

    def select(self, batch_size: int) -> tuple[np.ndarray, str, float]:
        """Select the next batch.

        Returns:
            ``(indices, incarnation, select_ms)``.
        """
        t0 = time.perf_counter()
        indices = self.selector.select(batch_size)
        return indices, self.incarnation, (time.perf_counter() - t0) * 1e3

    def update_selector(
        self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray, lags: np.ndarray | None = None
    ) -> tuple[dict[str, float], str, float]:
        """Apply one step's evidence to the selector in this process (the core's ``Selector.update``, which validates
        it: bad input raises and changes nothing).

        ``lags``: per task, how many policy versions old its evidence is (asynchronous training); None: all 0, the
        paper's update.

        Returns:
            ``(stats, incarnation, update_ms)`` with ``stats`` the selector's :meth:`stats` after the update.
        """
        t0 = time.perf_counter()
        self.selector.update(indices, successes, attempts, lags=lags)
        ms = (time.perf_counter() - t0) * 1e3
        return self.selector.stats(), self.incarnation, ms

    def stats(self) -> dict[str, float]:
        """The selector's summary statistics (no prefix)."""
        return self.selector.stats()

    def state_dict(self) -> tuple[dict[str, Any], str]:
        """The selector's full state (RNG included) and the incarnation token."""
        return self.selector.state_dict(), self.incarnation

    def load_state_dict(self, state: dict[str, Any]) -> str:
        """Load a selector state; returns the new incarnation token.

        Raises:
            ValueError: for a state of another selector or pool (nothing changes).
        """
        self.selector.load_state_dict(state)
        self.incarnation = uuid.uuid4().hex
        return self.incarnation

    def incarnation_token(self) -> str:
        """The current incarnation token."""
        return self.incarnation

    def posterior(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(alpha, beta)`` copies for Beta selectors, else None (for monitoring)."""
        if hasattr(self.selector, "alpha"):
            return np.array(self.selector.alpha), np.array(self.selector.beta)
        return None


def create_selector_service(
    name: str,
    namespace: str,
    *,
    placement: dict[str, Any] | None = None,
    settings: SelectorSettings,
    num_tasks: int,
    reference_pass_rates: np.ndarray | None = None,
    task_embeddings: np.ndarray | None = None,
) -> SelectorActor:
    """Create the run's named selector service, a Ray actor (``num_cpus=0``, ``max_restarts=0``).

    Args:
        name: actor name (``bots.actor.name``).
        namespace: Ray namespace (``bots.actor.namespace``).
        placement: Ray options that choose its node (:func:`~bots_verl.integration.transport.placement.
            posterior_placement`); None: Ray's default.
        settings, num_tasks, reference_pass_rates, task_embeddings: see :class:`SelectorService`.

    Returns:
        The actor handle.

    Raises:
        ValueError: if an actor of that name is alive already (two runs would share one posterior), or for a bad
            selector configuration.
    """
    import ray

    try:
        ray.get_actor(name, namespace=namespace)
    except ValueError:
        pass
    else:
        raise ValueError(f"a posterior actor named {namespace}/{name} already exists; set bots.actor.name")
    actor_cls = ray.remote(num_cpus=0, max_restarts=0)(SelectorService)
    handle = actor_cls.options(name=name, namespace=namespace, **(placement or {})).remote(
        settings, num_tasks, reference_pass_rates, task_embeddings
    )
    # surface constructor errors (bad hparams, reference shape) here, not at the first batch
    try:
        ray.get(handle.incarnation_token.remote())
    except ray.exceptions.RayActorError as exc:
        cause = exc.__cause__ or exc
        raise ValueError(f"could not create the selector actor: {cause}") from exc
    logger.info("created selector actor %s/%s (%s, %d tasks)", namespace, name, settings.name, num_tasks)
    return handle
