"""The run's selector as a named Ray actor.

One :class:`SelectorService` per run owns a :mod:`bots_verl.core` selector: a Beta posterior (``bots``, ``mopps``,
...) or any other registered one (``random``, ``sequential``, ``greso``, ...). The trainer (through
:class:`~bots_verl.integration.sampler.BOTSSampler`) is its only writer; any process in the Ray cluster can read it by
name, e.g. a monitoring script::

    actor = ray.get_actor("bots_posterior_<project>_<experiment>", namespace="bots")
    print(ray.get(actor.stats.remote()))

The actor takes no CPU slot (``num_cpus=0``): its work is a few milliseconds per step and must not compete with
rollout or reward workers for slots.

**Restarts.** The actor is created with ``max_restarts=0``. Every reply carries an ``incarnation`` token that changes
whenever the state is (re)created or loaded; the sampler checks it. A killed actor, or one that Ray restarted with the
prior, therefore makes the trainer fail loudly instead of silently training from the prior; resuming from the last
checkpoint (verl's ``trainer.resume_mode=auto``) restores the posterior from ``data.pt``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import numpy as np

from bots_verl.core import ROLLOUT_ALLOCATIONS, build_selector

logger = logging.getLogger(__name__)

__all__ = ["SelectorService", "create_selector_actor", "from_torch_safe", "to_torch_safe"]


class SelectorService:
    """Owns one selector; the body of the Ray actor (also usable in-process, e.g. in benchmarks).

    Args:
        selector: registered selector name.
        num_tasks: pool size.
        reference_pass_rates: ``(num_tasks, K)`` reference pass rates or None.
        seed: selector seed.
        hparams: selector hyperparameters.
    """

    def __init__(
        self,
        selector: str,
        num_tasks: int,
        reference_pass_rates: np.ndarray | None = None,
        seed: int = 0,
        hparams: dict[str, Any] | None = None,
    ) -> None:
        self.selector = build_selector(
            selector, num_tasks, reference_pass_rates=reference_pass_rates, seed=seed, **(hparams or {})
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

    def update(
        self, indices: np.ndarray, successes: np.ndarray, attempts: np.ndarray, lags: np.ndarray | None = None
    ) -> tuple[dict, str, float]:
        """Apply one step's evidence (validated by the selector; bad input raises and changes nothing).

        ``lags``: per task, how many policy versions old its evidence is (asynchronous training); None: all 0, the
        paper's update.

        Returns:
            ``(stats, incarnation, update_ms)`` with ``stats`` the selector's :meth:`stats` after the update.
        """
        t0 = time.perf_counter()
        self.selector.update(indices, successes, attempts, lags=lags)
        ms = (time.perf_counter() - t0) * 1e3
        return self.selector.stats(), self.incarnation, ms

    def allocate(
        self, indices: np.ndarray, budget: int, mode: str, params: dict[str, Any]
    ) -> tuple[np.ndarray, str, float]:
        """Rollouts per task for ``indices`` under the current posterior (:mod:`bots_verl.core.allocation`).

        Returns:
            ``(sizes, incarnation, allocate_ms)``.

        Raises:
            ValueError: for an unknown mode, a selector without a Beta posterior, or a bad budget or parameters.
        """
        t0 = time.perf_counter()
        rule = ROLLOUT_ALLOCATIONS.lookup(mode)
        if not hasattr(self.selector, "alpha"):
            raise ValueError(f"rollout allocation {mode!r} needs a Beta posterior; {type(self.selector).__name__}")
        idx = np.asarray(indices, dtype=np.int64)
        sizes = rule(self.selector.alpha[idx], self.selector.beta[idx], int(budget), **params)
        return sizes, self.incarnation, (time.perf_counter() - t0) * 1e3

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


def create_selector_actor(
    name: str,
    namespace: str,
    *,
    selector: str,
    num_tasks: int,
    reference_pass_rates: np.ndarray | None = None,
    seed: int = 0,
    hparams: dict[str, Any] | None = None,
):
    """Create the run's named selector actor (``num_cpus=0``, ``max_restarts=0``).

    Args:
        name: actor name (``bots.actor.name``).
        namespace: Ray namespace (``bots.actor.namespace``).
        selector, num_tasks, reference_pass_rates, seed, hparams: see :class:`SelectorService`.

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
    handle = actor_cls.options(name=name, namespace=namespace).remote(
        selector, num_tasks, reference_pass_rates, seed, hparams
    )
    # surface constructor errors (bad hparams, reference shape) here, not at the first batch
    try:
        ray.get(handle.incarnation_token.remote())
    except ray.exceptions.RayActorError as exc:
        cause = exc.__cause__ or exc
        raise ValueError(f"could not create the selector actor: {cause}") from exc
    logger.info("created selector actor %s/%s (%s, %d tasks)", namespace, name, selector, num_tasks)
    return handle


def to_torch_safe(value: Any) -> Any:
    """Replace numpy arrays and scalars by torch tensors and Python scalars, recursively.

    verl loads ``data.pt`` with ``torch.load(weights_only=False)``, which would accept numpy; converting anyway keeps
    the checkpoint loadable under ``weights_only=True`` (PyTorch's default) and free of pickled numpy internals.
    """
    import torch

    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [to_torch_safe(v) for v in value.tolist()]
        return {"__ndarray__": torch.from_numpy(np.array(value, copy=True))}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: to_torch_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_torch_safe(v) for v in value)
    return value


def from_torch_safe(value: Any) -> Any:
    """Inverse of :func:`to_torch_safe` (tensors marked as arrays become numpy arrays again)."""
    if isinstance(value, dict):
        if set(value) == {"__ndarray__"}:
            return value["__ndarray__"].numpy().copy()
        return {k: from_torch_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(from_torch_safe(v) for v in value)
    return value
