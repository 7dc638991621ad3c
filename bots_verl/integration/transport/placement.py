"""Where the posterior actor runs on a Ray cluster of several nodes (``bots.actor.node_resource``).

verl's ``run_ppo`` starts its ``TaskRunner`` (one CPU) with Ray's default scheduling: the driver's node while that node
is lightly loaded, else any node with a free CPU. The trainer inside that task runner creates the posterior actor and
calls it on every step. So:

- **null (default): the task runner's node.** The actor is pinned there with a hard node-affinity strategy. Its
  select/update round trips never cross the network, and it shares fate with the trainer that owns it: a node that
  dies takes both, and the run resumes from its last checkpoint (the posterior travels in ``data.pt``).
- **a resource name: the node that declares it.** The actor asks for :data:`RESOURCE_SHARE` of that custom resource,
  so it lands on the node started with ``ray start ... --resources '{"<name>": 1}'`` (for example a CPU node that is
  never pre-empted). Ray's built-in ``node:__internal_head__`` resource pins it to the head node, and ``node:<ip>`` to
  the node of that address. A name no node declares is refused before the actor is created (Ray would otherwise keep
  it pending for ever and the run would hang at its first selection).

Either way the actor reserves no CPU or GPU (``num_cpus=0``), so it never takes a slot from verl's workers.
"""

from __future__ import annotations

import logging
from typing import Any

from bots_verl.config.bots_config import RESERVED_RESOURCES, check_node_resource

logger = logging.getLogger(__name__)

__all__ = ["RESOURCE_SHARE", "actor_node_id", "posterior_placement"]

#: the share of ``bots.actor.node_resource`` the posterior actor requests (any positive amount pins it to the node)
RESOURCE_SHARE = 0.001


def posterior_placement(node_resource: str | None) -> dict[str, Any]:
    """The Ray actor options that place the posterior actor as ``bots.actor.node_resource`` says.

    Call it in the process that creates the actor (verl's task runner), connected to the cluster.

    Args:
        node_resource: null for the calling process's node, else a resource that one or more nodes declare.

    Returns:
        ``{"scheduling_strategy": NodeAffinitySchedulingStrategy(<this node>, soft=False)}`` or
        ``{"resources": {node_resource: RESOURCE_SHARE}}``.

    Raises:
        ValueError: the name is not a custom resource (:func:`~bots_verl.config.bots_config.check_node_resource`),
            or no node of the cluster declares it (the message lists the resources that exist).
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    check_node_resource(node_resource)
    if node_resource is None:
        node_id = ray.get_runtime_context().get_node_id()
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)}
    declared = ray.cluster_resources()
    if declared.get(node_resource, 0.0) <= 0:
        custom = sorted(k for k in declared if k not in RESERVED_RESOURCES)
        raise ValueError(
            f"bots.actor.node_resource={node_resource!r}: no node of this Ray cluster declares that resource "
            f"(it has {custom}). Start the node that should hold the posterior with "
            f"ray start ... --resources '{{\"{node_resource}\": 1}}', or set bots.actor.node_resource=null to keep "
            "the posterior on the task runner's node"
        )
    return {"resources": {node_resource: RESOURCE_SHARE}}


def actor_node_id(handle: Any, timeout: float = 60.0) -> str:
    """The id of the Ray node an actor runs on (asked of the actor itself; no dashboard needed)."""
    import ray

    return ray.get(handle.__ray_call__.remote(_node_id_of), timeout=timeout)


def _node_id_of(_actor: Any) -> str:
    import ray

    return ray.get_runtime_context().get_node_id()
