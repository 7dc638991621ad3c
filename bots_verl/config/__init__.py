"""Hydra configs of ``python -m bots_verl.main`` (a package so that ``pkg://bots_verl.config`` resolves)."""
