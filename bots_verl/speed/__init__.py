"""Speed and memory benchmarks: entry points that time or size parts of BOTS; nothing in the library imports them.

Each module runs as ``python -m bots_verl.speed.<name> [--help]``:

| module | what it measures | needs |
|---|---|---|
| ``selector_speed`` | ms per select + update, ``bots`` beside the plain paper rules; ``--memory``: bytes/task | numpy |
| ``actor_roundtrip`` | select + update through the Ray selector actor, as the trainer pays it per step | Ray |
| ``canonical_order_cost`` | what sorting a step's rows by content costs the driver (``hf`` rollout) | verl |
| ``reward_throughput`` | answers per second of the code and math rewards, this tree against ``--baseline`` | rewards |
| ``reward_flood`` | peak memory of the code reward under answers that flood stdout | rewards, bubblewrap |
| ``cpu_step_time`` | verl's step time and start-up on the CPU backend at the toy testbed's shape | verl |
| ``gpu_actor_memory`` | the recipes' actor micro-batches (time, activations), verl's FSDP memory per GPU | CUDA |
"""
