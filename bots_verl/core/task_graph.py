"""Task similarity from embeddings: a k-nearest-neighbour graph, reference imputation over it, and labelling plans.

BOTS's implicit evidence needs reference pass rates on every task (arXiv 2510.26374, Sec. 3.3; the paper names the
cost of computing them as its limitation). This module lets what is known about some tasks stand in for what is not
known about similar ones. Similarity is the cosine of task embeddings (any ``(N, d)`` array: the policy's own hidden
states of the prompts at step 0, or a small text encoder's), nothing hand-made for one domain.

- :class:`TaskGraph`: each task's ``k`` most similar other tasks and their similarity weights, exact, computed by
  chunked matrix products (never a dense ``N x N`` matrix; each chunk's block is at most :data:`BLOCK_BYTES`).
- :func:`impute_reference`: reference pass rates for unlabelled tasks from their labelled neighbours.
- :func:`choose_labelled`: which tasks to label when the labelling budget is a fraction of the pool.

The ``neighbours`` implicit-evidence plug-in (:mod:`bots_verl.core.ours.neighbour_evidence`) propagates each step's
explicit evidence over the same graph. Costs at 100k tasks: ``python -m bots_verl.speed.similarity_cost``.
"""

from __future__ import annotations

import hashlib
import logging
import math
from typing import Any

import numpy as np

from bots_verl.core.memory import available_memory_bytes
from bots_verl.core.validation import real_array

logger = logging.getLogger(__name__)

__all__ = [
    "BLOCK_BYTES",
    "LABELLING_METHODS",
    "TaskGraph",
    "check_embeddings",
    "check_graph_fits",
    "check_graph_k",
    "choose_labelled",
    "impute_reference",
    "impute_reference_report",
]

#: The most bytes one chunk of the graph build (its similarity block and the partition's indices) may take.
BLOCK_BYTES = 256 * 2**20
#: The ways :func:`choose_labelled` picks tasks.
LABELLING_METHODS = ("uniform", "spread")
# Per similarity entry of a chunk: the float32 similarity, argpartition's int64 index and a boolean comparison.
_BYTES_PER_ENTRY = 13
# Rounds of batched k-means++ seeding in choose_labelled(method="spread").
_SPREAD_ROUNDS = 64


def check_graph_k(k: Any, num_tasks: int | None = None) -> int:
    """Return the task graph's neighbours per task ``k`` as an int: a positive integer, fewer than ``num_tasks`` when
    the pool is known.

    Raises:
        ValueError: naming ``graph_k`` (and the pool size, when given).
    """
    if isinstance(k, bool | np.bool_) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"graph_k must be a positive integer (neighbours per task), got {k!r}")
    if num_tasks is not None and not k < num_tasks:
        raise ValueError(
            f"graph_k must be an integer in [1, {num_tasks - 1}] (fewer than the {num_tasks} tasks), got {k!r}"
        )
    return int(k)


def check_embeddings(embeddings: Any, num_tasks: int | None = None) -> np.ndarray:
    """Return ``embeddings`` as a 2-D float array with finite, non-zero rows (no copy when it already is one).

    Args:
        embeddings: ``(N, d)`` task embeddings, one row per task of the pool, in task-index order.
        num_tasks: the pool size the rows must match (None: any).

    Raises:
        ValueError: for a shape other than ``(num_tasks, d)``, values that are not real numbers, NaN or infinite
            values, or an all-zero row (its direction, hence its similarities, are undefined).
    """
    arr = real_array("task embeddings", embeddings)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"task embeddings must be a 2-D array (tasks, dims), got shape {arr.shape}")
    if num_tasks is not None and arr.shape[0] != num_tasks:
        raise ValueError(
            f"task embeddings have {arr.shape[0]} rows, but the pool has {num_tasks} tasks (one row per task, "
            "in task-index order)"
        )
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    # einsum reduces row by row without an (N, d) temporary
    sq = np.einsum("ij,ij->i", arr, arr, dtype=np.float64)
    if not np.all(np.isfinite(sq)):
        bad = np.flatnonzero(~np.isfinite(sq))[:5].tolist()
        raise ValueError(f"task embeddings hold NaN or infinite values (rows {bad})")
    if np.any(sq == 0):
        bad = np.flatnonzero(sq == 0)[:5].tolist()
        raise ValueError(f"task embeddings have all-zero rows {bad}: their similarity is undefined")
    return arr


def _normalised(x: np.ndarray, rows: int) -> np.ndarray:
    """``x``'s rows scaled to unit length, as float32, computed ``rows`` at a time."""
    out = np.empty(x.shape, dtype=np.float32)
    for a in range(0, x.shape[0], rows):
        block = x[a : a + rows].astype(np.float64)
        block /= np.sqrt(np.einsum("ij,ij->i", block, block))[:, None]
        out[a : a + rows] = block
    return out


class TaskGraph:
    """The ``k`` most similar other tasks of every task, with non-negative similarity weights.

    Attributes:
        neighbours: ``(N, k)`` int32 task indices, most similar first (ties: lower index first); never the task itself.
        weights: ``(N, k)`` float32 cosine similarities, clipped at 0 (an unrelated task weighs nothing).

    Args:
        neighbours: as above.
        weights: as above.

    Raises:
        ValueError: for shapes that differ, indices outside the pool or equal to their row, or weights that are
            negative or not finite.
    """

    def __init__(self, neighbours: np.ndarray, weights: np.ndarray) -> None:
        nb = np.asarray(neighbours)
        w = np.asarray(weights)
        if nb.ndim != 2 or nb.shape != w.shape or nb.shape[1] < 1:
            raise ValueError(f"neighbours and weights must be (N, k) arrays of one shape, got {nb.shape}, {w.shape}")
        if nb.dtype.kind not in "iu" or w.dtype.kind != "f":
            raise ValueError(f"neighbours must be integers and weights floats, got {nb.dtype} and {w.dtype}")
        n = nb.shape[0]
        if nb.size and (int(nb.min()) < 0 or int(nb.max()) >= n):
            raise ValueError(f"neighbour indices must lie in [0, {n})")
        if np.any(nb == np.arange(n)[:, None]):
            raise ValueError("a task cannot be its own neighbour")
        if not (np.all(np.isfinite(w)) and (w.size == 0 or float(w.min()) >= 0.0)):
            raise ValueError("similarity weights must be finite and non-negative")
        self.neighbours = np.ascontiguousarray(nb, dtype=np.int32)
        self.weights = np.ascontiguousarray(w, dtype=np.float32)
        self._fingerprint: str | None = None

    @property
    def num_tasks(self) -> int:
        """The pool size N."""
        return int(self.neighbours.shape[0])

    @property
    def k(self) -> int:
        """Neighbours per task."""
        return int(self.neighbours.shape[1])

    @staticmethod
    def bytes_per_task(k: int) -> int:
        """Bytes the graph holds per task: ``k`` int32 indices and ``k`` float32 weights."""
        return 8 * int(k)

    def fingerprint(self) -> str:
        """A short hash of the graph (both arrays); checkpoints carry it so they load only onto the same graph."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(np.asarray(self.neighbours.shape, dtype=np.int64).tobytes())
            h.update(self.neighbours.tobytes())
            h.update(self.weights.tobytes())
            self._fingerprint = h.hexdigest()[:32]
        return self._fingerprint

    @staticmethod
    def chunk_rows_for(num_tasks: int) -> int:
        """The default rows per chunk of :meth:`from_embeddings`: a block within :data:`BLOCK_BYTES`."""
        return max(1, min(num_tasks, BLOCK_BYTES // (_BYTES_PER_ENTRY * num_tasks)))

    @staticmethod
    def build_transient_bytes(num_tasks: int, dims: int, chunk_rows: int | None = None) -> int:
        """The most :meth:`from_embeddings` allocates beyond the graph it returns: the normalised float32 embeddings
        and one chunk's block."""
        rows = TaskGraph.chunk_rows_for(num_tasks) if chunk_rows is None else min(chunk_rows, num_tasks)
        return num_tasks * 4 * dims + rows * num_tasks * _BYTES_PER_ENTRY

    @classmethod
    def from_embeddings(cls, embeddings: Any, k: int = 16, *, chunk_rows: int | None = None) -> TaskGraph:
        """The exact ``k``-nearest-neighbour graph by cosine similarity of the rows of ``embeddings``.

        Rows are L2-normalised (float32), then ``chunk_rows`` rows at a time are multiplied by the whole matrix and
        their top ``k`` kept (``argpartition``, then sorted by similarity, ties by the lower index). Time
        ``O(N^2 d)``, once per run; memory: the normalised copy, the graph and one chunk's block.

        Args:
            embeddings: ``(N, d)`` task embeddings (see :func:`check_embeddings`).
            k: neighbours per task, ``1 <= k < N``.
            chunk_rows: rows per chunk (default: as many as keep a block within :data:`BLOCK_BYTES`).

        Raises:
            ValueError: for invalid embeddings or ``k``, or when the graph build would not fit in the available
                memory (the estimate is in the message).
        """
        x = check_embeddings(embeddings)
        n, d = x.shape
        k = check_graph_k(k, n)
        if chunk_rows is None:
            chunk_rows = cls.chunk_rows_for(n)
        elif isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int | np.integer) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
        rows = int(min(chunk_rows, n))
        need = n * cls.bytes_per_task(k) + cls.build_transient_bytes(n, d, rows)
        available = available_memory_bytes()
        if available is not None and need > available:
            raise ValueError(
                f"the task graph of {n:,} tasks ({d} embedding dims, k = {k}) needs about {need / 1e9:.2f} GB "
                f"(normalised embeddings, the graph and one {rows}-row chunk), but only {available / 1e9:.2f} GB are "
                "available; use fewer embedding dims, a smaller chunk_rows, or a machine with more memory"
            )
        xf = _normalised(x, rows)
        neighbours = np.empty((n, k), dtype=np.int32)
        weights = np.empty((n, k), dtype=np.float32)
        for a in range(0, n, rows):
            b = min(a + rows, n)
            idx, vals = _top_k(xf[a:b] @ xf.T, a, k)
            neighbours[a:b] = idx
            np.maximum(vals, 0.0, out=weights[a:b])
        logger.info("task graph: %d tasks, %d dims, k = %d, chunks of %d rows", n, d, k, rows)
        return cls(neighbours, weights)


def _top_k(sims: np.ndarray, first_row: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a ``(r, N)`` similarity block (rows ``first_row ..``), the top ``k`` other tasks, sorted.

    The order is by similarity, then by task index; where equal similarities straddle the k-th place, the lower
    indices are kept, so the graph depends on the embeddings alone.
    """
    r, n = sims.shape
    rows = np.arange(r)
    sims[rows, first_row + rows] = -np.inf  # a task is not its own neighbour
    idx = np.argpartition(sims, n - k, axis=1)[:, n - k :].copy()  # the copy frees the (r, N) index array
    vals = np.take_along_axis(sims, idx, axis=1)
    kth = vals.min(axis=1)
    above = np.count_nonzero(sims > kth[:, None], axis=1)
    tied = np.count_nonzero(sims == kth[:, None], axis=1)
    for i in np.flatnonzero(above + tied > k):  # rare: the k-th similarity is shared beyond the k-th place
        row = sims[i]
        keep = np.concatenate([np.flatnonzero(row > kth[i]), np.flatnonzero(row == kth[i])[: k - above[i]]])
        idx[i], vals[i] = keep, row[keep]
    order = np.lexsort((idx, -vals), axis=1)
    return np.take_along_axis(idx, order, axis=1), np.take_along_axis(vals, order, axis=1)


# ------------------------------------------------------------------------------------------------------ imputation
#: How :func:`impute_reference_report` names the paths a task's values came from.
IMPUTATION_PATHS = ("labelled", "one_hop", "two_hops", "labelled_mean")
# Rows per chunk of the imputation's neighbour gathers.
_IMPUTE_ROWS = 4096


def _check_partial_reference(reference: Any, num_tasks: int) -> np.ndarray:
    try:
        ref = np.array(reference, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"reference pass rates are not an array of numbers: {exc}") from exc
    if ref.ndim == 1:
        ref = ref[:, None]
    if ref.ndim != 2 or ref.shape[0] != num_tasks or ref.shape[1] < 1:
        raise ValueError(f"reference pass rates must have shape ({num_tasks},) or ({num_tasks}, K), got {ref.shape}")
    if np.any(np.isinf(ref)):
        raise ValueError("reference pass rates contain infinite values")
    missing = np.isnan(ref)
    counts = missing.sum(axis=0)
    if np.any(counts == num_tasks):
        raise ValueError(
            f"a reference column has no labelled task at all (NaN counts per column {counts.tolist()} of "
            f"{num_tasks}): nothing to impute from"
        )
    lo, hi = float(np.nanmin(ref)), float(np.nanmax(ref))
    if lo < 0.0 or hi > 1.0:
        raise ValueError(f"reference pass rates must lie in [0, 1], got range [{lo}, {hi}]")
    return ref


def _hop(values: np.ndarray, known: np.ndarray, graph: TaskGraph, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Similarity-weighted mean of the known neighbours' ``values`` for ``rows``; and whether any neighbour was known.

    Computed :data:`_IMPUTE_ROWS` rows at a time, so its temporaries do not grow with the pool.
    """
    mean = np.zeros(rows.size)
    found = np.zeros(rows.size, dtype=bool)
    for a in range(0, rows.size, _IMPUTE_ROWS):
        part = rows[a : a + _IMPUTE_ROWS]
        nb = graph.neighbours[part]
        w = graph.weights[part].astype(np.float64) * known[nb]
        total = w.sum(axis=1)
        ok = total > 0
        m = np.einsum("ij,ij->i", w, values[nb])  # unknown neighbours have weight 0 (and value 0)
        m[ok] /= total[ok]
        mean[a : a + _IMPUTE_ROWS], found[a : a + _IMPUTE_ROWS] = m, ok
    return mean, found


def impute_reference_report(reference: Any, graph: TaskGraph) -> tuple[np.ndarray, dict[str, int]]:
    """:func:`impute_reference`, and how many tasks each path filled (keys :data:`IMPUTATION_PATHS`).

    A task counts under the deepest path any of its missing values took.
    """
    ref = _check_partial_reference(reference, graph.num_tasks)
    missing = np.isnan(ref)
    out = ref.copy()
    depth = np.zeros(ref.shape, dtype=np.int8)  # 0 labelled, 1 one hop, 2 two hops, 3 labelled mean
    for c in range(ref.shape[1]):
        known = ~missing[:, c]
        values = np.where(known, ref[:, c], 0.0)
        # one hop from the labelled tasks, then one more from those just filled; the rest get the labelled mean
        for hop in (1, 2):
            rows = np.flatnonzero(~known)
            if rows.size == 0:
                break
            mean, found = _hop(values, known, graph, rows)
            filled = rows[found]
            values[filled] = mean[found]
            depth[filled, c] = hop
            known = known.copy()
            known[filled] = True
        rest = np.flatnonzero(~known)
        values[rest] = ref[~missing[:, c], c].mean()
        depth[rest, c] = 3
        out[missing[:, c], c] = values[missing[:, c]]
    task_depth = depth.max(axis=1)
    report = {name: int(np.count_nonzero(task_depth == i)) for i, name in enumerate(IMPUTATION_PATHS)}
    return out, report


def impute_reference(reference: Any, graph: TaskGraph) -> np.ndarray:
    """Reference pass rates for the unlabelled tasks (NaN) from their labelled neighbours on ``graph``.

    Per column, each missing value becomes the similarity-weighted mean of its labelled neighbours' values, in
    probability space (the space the paper's interpolation evidence is linear in; measured against the logit space
    in ``recipes/results/sim/noref_results.md``). A task with no labelled neighbour takes the same mean over its
    neighbours filled in the first pass (two hops); a task with none of those either takes the column's labelled
    mean. The number of tasks per path is logged (:func:`impute_reference_report` returns it). Labelled values are
    returned unchanged, bit for bit.

    Args:
        reference: ``(N,)`` or ``(N, K)`` reference pass rates in [0, 1], NaN where unlabelled.
        graph: the pool's task graph (``N`` rows).

    Returns:
        ``(N, K)`` float64 pass rates without NaN.

    Raises:
        ValueError: for a wrong shape, values outside [0, 1] or infinite, or a column with no labelled task.
    """
    out, report = impute_reference_report(reference, graph)
    logger.info("reference imputation over the task graph, tasks per path: %s", report)
    return out


# ------------------------------------------------------------------------------------------------------- labelling
def _labelling_budget(fraction: Any, num_tasks: int) -> int:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float | np.integer | np.floating):
        raise ValueError(f"the labelled fraction must be a number in (0, 1], got {fraction!r}")
    f = float(fraction)
    if not (math.isfinite(f) and 0.0 < f <= 1.0):
        raise ValueError(f"the labelled fraction must lie in (0, 1], got {fraction!r}")
    return max(1, min(num_tasks, round(f * num_tasks)))


def choose_labelled(embeddings: Any, fraction: float, method: str, seed: int) -> np.ndarray:
    """The tasks to label when the budget is ``fraction`` of the pool: sorted int64 task indices.

    - ``"uniform"``: a seeded uniform random subset.
    - ``"spread"``: cover the embedding space: k-means++ seeding in cosine distance (each task drawn with
      probability proportional to its squared distance to the nearest chosen task), in
      :data:`_SPREAD_ROUNDS` batched rounds (each round draws its share without replacement by the Gumbel top-k
      trick, then updates every task's distance with one ``(N, d) x (d, m)`` product): ``O(N * budget * d)``. Unlike
      farthest-point sampling it is not drawn to outliers, since dense regions hold most of the squared distance.

    Args:
        embeddings: ``(N, d)`` task embeddings.
        fraction: the labelling budget as a share of the pool, in (0, 1]; at least one task is labelled.
        method: ``"uniform"`` or ``"spread"``.
        seed: seed of the random choices (same seed, same tasks).

    Raises:
        ValueError: for invalid embeddings, a fraction outside (0, 1], or an unknown method.
    """
    x = check_embeddings(embeddings)
    n = x.shape[0]
    budget = _labelling_budget(fraction, n)
    if method not in LABELLING_METHODS:
        raise ValueError(f"unknown labelling method {method!r}; known: {list(LABELLING_METHODS)}")
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    if budget == n:
        return np.arange(n, dtype=np.int64)
    if method == "uniform":
        return np.sort(rng.choice(n, size=budget, replace=False)).astype(np.int64)
    xf = _normalised(x, max(1, BLOCK_BYTES // (8 * x.shape[1])))
    chosen = np.zeros(n, dtype=bool)
    first = int(rng.integers(n))
    chosen[first] = True
    # 1 - cos to the nearest chosen task: half the squared Euclidean distance between unit vectors (k-means++'s D^2)
    dist = np.clip(1.0 - xf @ xf[first], 0.0, None).astype(np.float64)
    left = budget - 1
    per_round = max(1, math.ceil(left / _SPREAD_ROUNDS))
    per_round = min(per_round, max(1, BLOCK_BYTES // (4 * n)))
    while left > 0:
        m = min(per_round, left)
        weight = dist.copy()
        weight[chosen] = 0.0
        with np.errstate(divide="ignore"):
            keys = np.log(weight) - np.log(-np.log(rng.random(n)))  # Gumbel top-k: sampling without replacement
        keys[chosen] = -np.inf
        new = np.argpartition(keys, n - m)[n - m :]
        new = new[np.isfinite(keys[new])]
        if new.size < m:  # every unchosen task sits on a chosen one (duplicates): fill uniformly
            rest = np.flatnonzero(~chosen)
            rest = rest[~np.isin(rest, new)]
            new = np.concatenate([new, rng.choice(rest, size=m - new.size, replace=False)])
        chosen[new] = True
        left -= new.size
        np.minimum(dist, np.clip(1.0 - (xf @ xf[new].T).max(axis=1), 0.0, None), out=dist)
    return np.flatnonzero(chosen).astype(np.int64)


def check_graph_fits(num_tasks: int, dims: int, k: int, available: int | None = None) -> int:
    """Refuse, before a trainer starts, a task graph that would not fit in memory here (its selector builds it).

    The estimate is :class:`TaskGraph`'s own (the graph, the normalised
    embeddings and one chunk of similarities; never a dense task-by-task matrix).

    Args:
        num_tasks: pool size.
        dims: embedding coordinates.
        k: neighbours per task (``bots.hparams.graph_k``).
        available: bytes available (default: :func:`~bots_verl.core.memory.available_memory_bytes`).

    Returns:
        The estimated bytes.

    Raises:
        ValueError: when the estimate exceeds the available memory, naming both and what to change.
    """
    from bots_verl.core import memory  # looked up at the call: tests replace what it reports

    need = num_tasks * TaskGraph.bytes_per_task(k) + TaskGraph.build_transient_bytes(num_tasks, dims)
    have = memory.available_memory_bytes() if available is None else available
    if have is not None and need > have:
        raise ValueError(
            f"the task-similarity graph of {num_tasks:,} tasks x {dims} dims with graph_k={k} needs about "
            f"{need / 2**30:.2f} GiB, more than the {have / 2**30:.2f} GiB available here; use fewer embedding "
            "dimensions (reference_eval embed --dims) or a smaller bots.hparams.graph_k"
        )
    return need
