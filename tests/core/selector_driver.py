"""A deterministic training loop for selector tests: select, then feed pseudo-outcomes that depend on index and step."""

import numpy as np


def drive(sel, steps: int, batch: int = 16, start: int = 0, mult: int = 7) -> list[np.ndarray]:
    """Run ``steps`` select/update rounds (successes ``(idx * mult + t) % 17`` of 16); return the selections.

    A selector with ``observe_truth`` (the oracle) is told the true pass rates ``((i * mult + t) % 17) / 16`` first.
    """
    out = []
    for t in range(start, start + steps):
        if hasattr(sel, "observe_truth"):  # the oracle: true pass rates that move with the step, before every select
            sel.observe_truth(((np.arange(sel.num_tasks) * mult + t) % 17) / 16)
        idx = sel.select(batch)
        out.append(idx.copy())
        sel.update(idx, (idx * mult + t) % 17, np.full(idx.size, 16))
    return out
