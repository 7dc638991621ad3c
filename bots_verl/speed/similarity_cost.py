"""Benchmark: the task graph's one-off cost and the per-step cost of reference-free BOTS at pool scale (issue 36).

``python -m bots_verl.speed.similarity_cost`` builds, per embedding width (default 64 and 256 dims, 100,000
tasks, k = 16), a ``bots_noref`` selector from random float32 embeddings (the set-up: normalising, the exact chunked
top-k graph), and prints:

- the set-up time and the peak memory ``tracemalloc`` sees while building (the caller's embeddings excluded);
- the median select and update times over steps (batch 256, 16 attempts per task; the update includes the
  ``neighbours`` evidence's scatter and prediction) and the peak memory during the steps, beside paper ``bots``'s
  step on the same pool for scale;
- the one-off costs of partial references: choosing 10% of the pool to label (``spread``) and imputing the other 90%
  over the graph.

The issue's targets: per step <= 0.6 s (1% of a 60 s GPU step), memory <= 2 GiB. ``--out`` writes the table as a
markdown file (default ``recipes/results/speed/similarity_cost_results.md``).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bots_verl.core import Selector, build_selector
from bots_verl.core.task_graph import choose_labelled, impute_reference
from bots_verl.fileio import markdown_table, write_text_atomic
from bots_verl.speed.selector_speed import time_steps

logger = logging.getLogger(__name__)

__all__ = ["main", "measure"]

_GIB = 2**30


def _split_times(sel: Selector, batch: int, repeats: int, rng: np.random.Generator) -> tuple[float, float]:
    """Median milliseconds of select and of update over ``repeats`` steps (after one warm-up step)."""
    select_ms, update_ms = [], []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        idx = sel.select(batch)
        t1 = time.perf_counter()
        sel.update(idx, rng.binomial(16, 0.3, size=batch).astype(np.float64), np.full(batch, 16.0))
        if i:
            select_ms.append(1e3 * (t1 - t0))
            update_ms.append(1e3 * (time.perf_counter() - t1))
    return float(np.median(select_ms)), float(np.median(update_ms))


def measure(pool: int, dims: int, k: int, batch: int, repeats: int) -> dict[str, float]:
    """One row of the table: set-up, per-step and partial-reference costs at ``pool`` tasks and ``dims`` dims."""
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((pool, dims), dtype=np.float32)
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    sel = build_selector("bots_noref", pool, task_embeddings=emb, graph_k=k, seed=0)
    setup_s = time.perf_counter() - t0
    # CPU seconds of this process (every thread): what the set-up costs, less inflated than wall clock on a loaded box
    setup_cpu_s = time.process_time() - c0
    setup_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    select_ms, update_ms = _split_times(sel, batch, repeats, rng)
    step_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    graph = sel.task_graph
    assert graph is not None
    ref = np.sort(rng.integers(0, 17, size=(pool, 2)) / 16, axis=1)
    t0 = time.perf_counter()
    labelled = choose_labelled(emb, 0.1, "spread", seed=0)
    choose_s = time.perf_counter() - t0
    partial = np.full(ref.shape, np.nan)
    partial[labelled] = ref[labelled]
    t0 = time.perf_counter()
    impute_reference(partial, graph)
    impute_s = time.perf_counter() - t0
    bots_ms = time_steps(build_selector("bots", pool, reference_pass_rates=ref, seed=0), batch, repeats, rng)
    return {
        "setup_s": setup_s,
        "setup_cpu_s": setup_cpu_s,
        "setup_peak_gib": setup_peak / _GIB,
        "select_ms": select_ms,
        "update_ms": update_ms,
        "step_ms": select_ms + update_ms,
        "step_peak_gib": step_peak / _GIB,
        "bots_step_ms": bots_ms,
        "choose_s": choose_s,
        "impute_s": impute_s,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark (``--help`` for the options)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", type=int, default=100_000)
    parser.add_argument("--dims", default="64,256", help="embedding widths, comma separated")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20, help="steps timed (median)")
    parser.add_argument("--out", default="recipes/results/speed/similarity_cost_results.md", help="'' to skip")
    args = parser.parse_args(argv)
    rows = []
    for dims in (int(d) for d in args.dims.split(",")):
        r = measure(args.pool, dims, args.k, args.batch, args.repeats)
        rows.append(
            [
                f"{args.pool:,}",
                str(dims),
                f"{r['setup_s']:.1f}",
                f"{r['setup_cpu_s']:.1f}",
                f"{r['setup_peak_gib']:.2f}",
                f"{r['select_ms']:.0f} + {r['update_ms']:.0f} = {r['step_ms']:.0f}",
                f"{r['step_peak_gib']:.3f}",
                f"{r['bots_step_ms']:.0f}",
                f"{r['choose_s']:.1f}",
                f"{r['impute_s']:.2f}",
            ]
        )
        print(rows[-1], flush=True)
    header = [
        "pool",
        "dims",
        "set-up s (graph; wall clock)",
        "set-up CPU s",
        "set-up peak GiB",
        "bots_noref step ms (select + update)",
        "step peak GiB",
        "paper bots step ms",
        "choose 10% (spread) s",
        "impute 90% s",
    ]
    table = markdown_table(header, rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = "\n".join(
        [
            "# Task graph and reference-free BOTS: cost at pool scale (issue 36)",
            "",
            f"`python -m bots_verl.speed.similarity_cost` (k = {args.k}, batch {args.batch} x 16 attempts, "
            f"median of {args.repeats} steps; random float32 embeddings). Measured on {os.cpu_count()} CPU cores "
            f"shared with a running benchmark (load average {load:.1f} at the end), so the times are inflated and "
            "noisy. Peak memory: what `tracemalloc` sees (numpy's allocations), the caller's embeddings excluded. "
            "Targets (issue 36): per step <= 600 ms, memory <= 2 GiB.",
            "",
            table,
            "",
        ]
    )
    print(table)
    if args.out:
        write_text_atomic(Path(args.out), text)


if __name__ == "__main__":
    main()
