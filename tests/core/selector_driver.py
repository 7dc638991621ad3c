"""A deterministic training loop for selector tests: select, then feed pseudo-outcomes that depend on index and step."""

import numpy as np


def drive(sel, steps: int, batch: int = 16, start: int = 0, mult: int = 7) -> list[np.ndarray]:
    """Run ``steps`` select/update rounds (successes ``(idx * mult + t) % 17`` of 16); return the selections."""
    out = []
    for t in range(start, start + steps):
        idx = sel.select(batch)
        out.append(idx.copy())
        sel.update(idx, (idx * mult + t) % 17, np.full(idx.size, 16))
    return out
