"""Dry-run several ``bots_verl.main`` command lines in one process, as ``python -m bots_verl.main <argv>`` runs each.

Usage: ``python dry_run_arms.py ARGV_JSON`` where the file holds ``{name: [override, ...]}``. Each command line is
composed with hydra (``bots_trainer``, the entry point's config) and passed to :func:`bots_verl.main.run` with its
overrides, which applies the CPU backend's settings, runs the verl drift check and every config check and, with
``bots.dry_run=true``, prints the summary and returns: no Ray, no training. One process instead of one per command
line saves each its interpreter, torch and verl start-up (``tests/toy/test_benchmark.py``). Prints ``OK <name>``
per command line; the first failure ends the process with its traceback (exit status 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    """Command line (see the module docstring)."""
    from hydra import compose, initialize_config_module

    from bots_verl.main import run

    argvs: dict[str, list[str]] = json.loads(Path(sys.argv[1]).read_text())
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        for name, argv in argvs.items():
            run(compose(config_name="bots_trainer", overrides=argv), argv)
            print(f"OK {name}", flush=True)


if __name__ == "__main__":
    main()
