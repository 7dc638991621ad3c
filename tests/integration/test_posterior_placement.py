"""Where the posterior actor runs (``bots.actor.node_resource``, :mod:`bots_verl.integration.transport.placement`),
on the session's real local Ray cluster (one node; the two-node placement is ``test_two_node_cluster.py``)."""

from __future__ import annotations

import uuid

import pytest

from bots_verl.config.bots_config import ActorConfig
from bots_verl.core.settings import SelectorSettings
from bots_verl.integration.transport.placement import actor_node_id, posterior_placement
from bots_verl.integration.transport.selector_service import create_selector_service


@pytest.mark.parametrize("bad", ["", "  ", "CPU", "GPU", "memory", "object_store_memory"])
def test_a_node_resource_that_names_no_custom_resource_is_refused_by_the_config(bad) -> None:
    with pytest.raises(ValueError, match="bots.actor.node_resource"):
        ActorConfig(name="a", node_resource=bad)
    assert ActorConfig(name="a", node_resource="bots_posterior").node_resource == "bots_posterior"


def test_by_default_the_posterior_lands_on_the_node_of_the_process_that_creates_it(ray_tq) -> None:
    import ray

    @ray.remote(num_cpus=0)
    def create_and_locate(name: str) -> tuple[str, str]:
        # as verl's task runner does: create the actor from a Ray worker, with the default placement
        handle = create_selector_service(
            name, "bots", placement=posterior_placement(None), settings=SelectorSettings("random"), num_tasks=4
        )
        try:
            return ray.get_runtime_context().get_node_id(), actor_node_id(handle)
        finally:
            ray.kill(handle)

    creator, posterior = ray.get(create_and_locate.remote(f"placement_{uuid.uuid4().hex[:8]}"), timeout=120)
    assert posterior == creator
    strategy = posterior_placement(None)["scheduling_strategy"]
    assert strategy.node_id == ray.get_runtime_context().get_node_id() and strategy.soft is False


def test_a_node_resource_no_node_declares_is_refused_before_the_actor_is_created(ray_tq) -> None:
    import ray

    name = f"placement_{uuid.uuid4().hex[:8]}"
    with pytest.raises(ValueError) as refused:
        create_selector_service(
            name,
            "bots",
            placement=posterior_placement("bots_posterior_nowhere"),
            settings=SelectorSettings("random"),
            num_tasks=4,
        )
    message = str(refused.value)
    assert "bots.actor.node_resource='bots_posterior_nowhere': no node of this Ray cluster declares" in message
    assert "--resources '{\"bots_posterior_nowhere\": 1}'" in message
    with pytest.raises(ValueError):
        ray.get_actor(name, namespace="bots")  # nothing was created


def test_a_declared_resource_is_requested_in_a_share_that_leaves_it_for_others(ray_tq) -> None:
    import ray

    # every node declares its node:<ip> resource: the placement of bots.actor.node_resource=node:<this ip>
    resource = next(k for k in ray.cluster_resources() if k.startswith("node:") and k != "node:__internal_head__")
    handle = create_selector_service(
        f"placement_{uuid.uuid4().hex[:8]}",
        "bots",
        placement=posterior_placement(resource),
        settings=SelectorSettings("random"),
        num_tasks=4,
    )
    try:
        assert actor_node_id(handle) == ray.get_runtime_context().get_node_id()
        assert 0 < posterior_placement(resource)["resources"][resource] < 0.01
    finally:
        ray.kill(handle)
