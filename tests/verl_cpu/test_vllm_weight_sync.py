"""The vLLM plugin that keeps vLLM's CPU linear weights for verl's weight sync (issue 49).

Here, without vLLM: vLLM finds it among its plugins, and it stays out of every process that is not a CPU-backend run.
What it does inside vLLM (a weight sync that changes what vLLM generates) needs vLLM's CPU build:
``tests/verl_cpu/test_vllm_rollout_on_cpu.py``, marked ``vllm_cpu``.
"""

from __future__ import annotations

import builtins
from importlib import metadata

import pytest

from bots_verl.verl_cpu import vllm_weight_sync


def test_vllm_finds_the_plugin_in_its_entry_point_group():
    plugins = {ep.name: ep for ep in metadata.entry_points(group="vllm.general_plugins")}
    assert plugins["bots_verl_cpu_weight_sync"].load() is vllm_weight_sync.register


@pytest.mark.parametrize("platform", [None, "cuda", "npu"])
def test_outside_a_cpu_backend_run_it_imports_nothing_of_vllm(monkeypatch, platform):
    if platform is None:
        monkeypatch.delenv("VERL_PLATFORM", raising=False)
    else:
        monkeypatch.setenv("VERL_PLATFORM", platform)
    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name.split(".")[0] == "vllm":
            raise AssertionError(f"imported {name}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    vllm_weight_sync.register()
