"""Evidence reading: a step's TransferQueue rows to per-task successes and attempts (:mod:`.outcomes`), their age in
the asynchronous modes (:mod:`.staleness`), the map between dataset positions and stable task ids
(:mod:`.task_index`), and the driver's checks of the pool's inputs before Ray (:mod:`.pool_checks`)."""
