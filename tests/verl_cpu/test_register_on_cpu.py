"""What ``VERL_USE_EXTERNAL_MODULES=bots_verl.verl_cpu.register`` does in a fresh process with ``VERL_PLATFORM=cpu``.

One subprocess (a fresh verl import, as in every Ray worker) checks the platform, the registrations (the ``cpu_gloo``
checkpoint engine included) and both compat fixes for real: a gloo process group comes up through verl's own
``initialize_global_process_group_ray`` (without the fix: ``Duplicate device type cpu in backend string``), and
verl's FSDP engine builds an unpinned CPU offload policy.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, torch, verl
from verl.plugin.platform import get_platform
from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device
from verl.checkpoint_engine import CheckpointEngineRegistry
from verl.workers.engine.base import EngineRegistry
from verl.workers.rollout.base import get_rollout_class
from verl.workers.rollout.replica import get_rollout_replica_class
import verl.workers.engine.fsdp.transformer_impl as impl
import verl.utils.distributed as distributed
import verl.workers.engine_workers as engine_workers
from torch.distributed.fsdp import CPUOffloadPolicy as TorchCPUOffloadPolicy

engine_workers.initialize_global_process_group_ray(timeout_second=None)
policy = impl.CPUOffloadPolicy(pin_memory=True)
device = get_torch_device()
print(json.dumps({
    "platform": type(get_platform()).__name__,
    "device": get_device_name(),
    "backend": get_nccl_backend(),
    "pg_backend": torch.distributed.get_backend(),
    "engine": EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
    "value_engine": EngineRegistry.get_engine_cls("value_model", "fsdp").__name__,
    "rollout": get_rollout_class("hf").__name__,
    "replica": get_rollout_replica_class("hf").__name__,
    "checkpoint_engine": CheckpointEngineRegistry.get("cpu_gloo").__name__,
    "pin_memory": policy.pin_memory,
    "offload_is_policy": isinstance(policy, TorchCPUOffloadPolicy),
    "rng_restores": bool(device.set_rng_state(device.get_rng_state()) is None),
    "memory": [device.memory_allocated(), device.max_memory_reserved(), device.mem_get_info()[1] > 0],
    "threads": torch.get_num_threads(),
}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_registration_and_compat_fixes_in_a_fresh_process(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "VERL_USE_EXTERNAL_MODULES": "bots_verl.verl_cpu.register",
        "VERL_PLATFORM": "cpu",
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "OMP_NUM_THREADS": "1",
        # the training worker's threads: set when verl's engine_workers module loads, over OMP_NUM_THREADS=1
        "BOTS_TRAIN_THREADS": "3",
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {
        "platform": "PlatformCPU",
        "device": "cpu",
        "backend": "gloo",
        "pg_backend": "gloo",
        "engine": "FSDPEngineWithLMHead",
        "value_engine": "FSDPEngineWithValueHead",
        "rollout": "HFServerAdapter",
        "replica": "HFReplica",
        "checkpoint_engine": "GlooCheckpointEngine",
        "pin_memory": False,
        "offload_is_policy": True,
        "rng_restores": True,
        "memory": [0, 0, True],
        "threads": 3,
    }
