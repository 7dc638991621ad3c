"""Train with ``bots_verl.main.run`` in this process and kill the BOTS posterior actor once step N is checkpointed.

Usage: ``python kill_posterior_run.py N CHECKPOINT_DIR <bots_verl.main overrides...>``. A thread watches
``CHECKPOINT_DIR/latest_checkpointed_iteration.txt``; when it reads N, it kills the posterior actor (the Ray actor
that owns the posterior) from this driver process, as an operator or a node failure would. The training must then
stop with ``PosteriorLostError`` (``tests/integration/test_e2e_on_cpu.py``).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path


def _kill_after(step: int, ckpt: Path, name: str, namespace: str) -> None:
    import ray

    tracker = ckpt / "latest_checkpointed_iteration.txt"
    while not (tracker.is_file() and tracker.read_text().strip() == str(step)):
        time.sleep(0.05)
    ray.kill(ray.get_actor(name, namespace=namespace), no_restart=True)
    print(f"killed posterior actor {namespace}/{name} after the step-{step} checkpoint", flush=True)


def main() -> None:
    """Command line (see the module docstring)."""
    from hydra import compose, initialize_config_module

    from bots_verl.config.bots_config import read_bots_config
    from bots_verl.main import run

    step, ckpt, overrides = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        config = compose(config_name="bots_trainer", overrides=overrides)
    bots = read_bots_config(config)
    killer = threading.Thread(target=_kill_after, args=(step, ckpt, bots.actor.name, bots.actor.namespace), daemon=True)
    killer.start()
    run(config, overrides)


if __name__ == "__main__":
    main()
