"""Evidence reading: a step's TransferQueue rows to per-task successes and attempts (:mod:`.outcomes`), their age in
the asynchronous modes (:mod:`.staleness`), and the map between dataset positions and stable task ids
(:mod:`.task_index`)."""
