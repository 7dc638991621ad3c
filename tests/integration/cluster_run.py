"""Train with ``bots_verl.main.run`` in this process and record the node the BOTS posterior actor runs on.

Usage: ``python cluster_run.py RECORD_FILE <bots_verl.main overrides...>`` (attached to a cluster through
``RAY_ADDRESS``). A thread waits for the posterior actor (``bots.actor.name`` in ``bots.actor.namespace``), asks it
for its node (:func:`bots_verl.integration.transport.placement.actor_node_id`) and writes
``{"posterior_node": ..., "driver_node": ...}`` to RECORD_FILE (``tests/integration/test_two_node_cluster.py``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path


def _record(path: Path, name: str, namespace: str) -> None:
    import ray

    from bots_verl.integration.transport.placement import actor_node_id

    while True:
        time.sleep(0.2)
        if not ray.is_initialized():
            continue
        try:
            actor = ray.get_actor(name, namespace=namespace)
            node = actor_node_id(actor)
        except Exception:  # not created yet
            continue
        driver = ray.get_runtime_context().get_node_id()
        path.write_text(json.dumps({"posterior_node": node, "driver_node": driver}))
        print(f"posterior actor {namespace}/{name} runs on node {node}", flush=True)
        return


def main() -> None:
    """Command line (see the module docstring)."""
    from hydra import compose, initialize_config_module

    from bots_verl.config.bots_config import read_bots_config
    from bots_verl.main import run

    record, overrides = Path(sys.argv[1]), sys.argv[2:]
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        config = compose(config_name="bots_trainer", overrides=overrides)
    bots = read_bots_config(config)
    threading.Thread(target=_record, args=(record, bots.actor.name, bots.actor.namespace), daemon=True).start()
    run(config, overrides)


if __name__ == "__main__":
    main()
