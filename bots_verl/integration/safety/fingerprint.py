"""What a checkpointed posterior means, stored with it, and the check that a resume still means the same.

A BOTS posterior is a Beta per **position** of the training pool, shaped by the reference columns and by the selector
and its hyperparameters. ``data.pt`` restores it whatever the run it is loaded into, so without a record of what it
was built for, swapped reference columns, regenerated prompts under the same ids, or another ``alpha0`` resume
silently. :func:`run_fingerprint` records:

- ``pool``: the number of tasks, a sha256 of the task ids in position order and a sha256 of the prompts (the
  dataset's ``data.prompt_key`` column, row by row);
- ``reference_columns``: their names (weak -> strong) and a sha256 of the ``(N, K)`` values aligned to positions;
- ``selector``: the selector name and every hyperparameter it runs with (defaults included);
- ``success``: ``bots.success`` (rule and threshold), which turns a rollout's reward into the success the posterior
  counts: verl's training never reads it (the gradient uses the reward), so it is part of what the posterior means,
  not of the training settings (:mod:`~bots_verl.integration.safety.training_record`). A checkpoint written before
  this part existed is resumed with a warning (nothing to compare);
- ``task_embeddings`` (only with ``bots.task_embeddings``): a sha256 of the ``(N, d)`` embeddings aligned to positions,
  so a resume with another embedding file (another similarity graph) is refused unless accepted.

The sampler stores it in ``data.pt`` (:class:`~bots_verl.integration.transport.sampler.BOTSSampler`). On resume
:func:`check_fingerprint` compares the checkpoint's with this run's before any worker starts and refuses a change
unless ``bots.resume.accept_changed`` names it (:data:`bots_verl.config.bots_config.ACCEPTABLE`). Some changes no
override can accept: another selector, another set of task ids (the posterior is indexed by position) and a
hyperparameter whose value lives in the checkpointed state (``alpha0``/``beta0``: the prior is restored with the
posterior, so a new value would not apply).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from bots_verl.core import SELECTORS

logger = logging.getLogger(__name__)

__all__ = [
    "FINGERPRINT_VERSION",
    "Change",
    "check_fingerprint",
    "dataset_prompts_digest",
    "fingerprint_changes",
    "run_fingerprint",
    "same_value",
]

FINGERPRINT_VERSION = 1

_OVERRIDE = "bots.resume.accept_changed"
_ROWS_PER_BATCH = 8192


@dataclasses.dataclass(frozen=True)
class Change:
    """One difference between a checkpoint's fingerprint and this run's.

    Attributes:
        part: what changed, e.g. ``pool`` or ``hparams``.
        what: the difference in words.
        accept: the ``bots.resume.accept_changed`` value that accepts it, or ``None`` if nothing can.
        why_not: for ``accept=None``, why no override can.
        key: the one setting that changed, when ``<accept>.<key>`` may accept it alone (``training.<verl key>``).
    """

    part: str
    what: str
    accept: str | None
    why_not: str = ""
    key: str = ""

    def accepted_by(self, accept: Collection[str]) -> bool:
        """Whether ``bots.resume.accept_changed`` accepts this change."""
        return self.accept is not None and (self.accept in accept or bool(self.key) and self.override in accept)

    @property
    def override(self) -> str:
        """The narrowest ``bots.resume.accept_changed`` value that accepts it."""
        return f"{self.accept}.{self.key}" if self.key else str(self.accept)


def _sha256_lines(values: Iterable[Any]) -> str:
    """sha256 over one canonical JSON line per value (layout-independent: same values, same digest)."""
    digest = hashlib.sha256()
    for value in values:
        digest.update(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def dataset_prompts_digest(dataset: Any, prompt_key: str) -> str | None:
    """sha256 of the ``prompt_key`` column of a verl ``RLHFDataset``'s rows, in position order.

    Reads the column from the dataset's ``dataframe`` (a ``datasets.Dataset``, after ``train_max_samples`` and
    filtering) in Arrow batches; no tokenisation.

    Returns:
        The hex digest, or ``None`` when the dataset has no such column (a custom dataset): its prompts are then not
        part of the fingerprint (logged).
    """
    frame = getattr(dataset, "dataframe", None)
    if frame is None or prompt_key not in getattr(frame, "column_names", ()):
        logger.warning(
            "the train dataset has no %r column (data.prompt_key): checkpoints cannot tell regenerated prompts apart",
            prompt_key,
        )
        return None
    t0 = time.perf_counter()
    if hasattr(frame, "select_columns") and hasattr(frame, "with_format"):
        column = frame.select_columns([prompt_key]).with_format("arrow")

        def rows() -> Iterable[Any]:
            for start in range(0, len(column), _ROWS_PER_BATCH):
                yield from column[start : start + _ROWS_PER_BATCH].column(0).to_pylist()

        values: Iterable[Any] = rows()
    else:
        # a custom dataset's table-like dataframe: its column as a sequence
        values = frame[prompt_key]
    digest = _sha256_lines(values)
    logger.info("hashed the prompts for the checkpoint fingerprint in %.1f s", time.perf_counter() - t0)
    return digest


def run_fingerprint(
    *,
    task_ids: Sequence[int | str] | None,
    prompts_sha256: str | None,
    reference_columns: Sequence[str],
    reference: np.ndarray | None,
    selector: str,
    hparams: Mapping[str, Any],
    success_rule: str,
    success_threshold: float,
    task_embeddings_sha256: str | None = None,
) -> dict[str, Any]:
    """The fingerprint of a run: plain Python (torch-saveable under ``weights_only=True``).

    Args:
        task_ids: the task id of every position; ``None`` leaves the pool out (the driver, before the dataset exists).
        prompts_sha256: :func:`dataset_prompts_digest` of the pool.
        reference_columns: reference column names, weak -> strong.
        reference: their ``(N, K)`` values aligned to positions, or ``None`` (not read, or no columns).
        selector: the selector name.
        hparams: every hyperparameter the selector runs with (:class:`~bots_verl.core.settings.SelectorSettings`).
        success_rule: ``bots.success.rule``.
        success_threshold: ``bots.success.threshold``.
        task_embeddings_sha256: :func:`~bots_verl.integration.evidence.embeddings.embeddings_sha256` of the task
            embeddings aligned to positions, or ``None`` (none set: the part is left out, so runs without embeddings
            keep their fingerprint).
    """
    out: dict[str, Any] = {
        "version": FINGERPRINT_VERSION,
        "reference_columns": {"names": list(reference_columns)},
        "selector": {"name": selector, "hparams": dict(hparams)},
        "success": {"rule": success_rule, "threshold": success_threshold},
    }
    if reference is not None:
        values = np.ascontiguousarray(reference, dtype=np.float64)
        digest = hashlib.sha256(str(values.shape).encode())
        digest.update(values.tobytes())
        out["reference_columns"]["values_sha256"] = digest.hexdigest()
    if task_embeddings_sha256 is not None:
        out["task_embeddings"] = {"sha256": task_embeddings_sha256}
    if task_ids is not None:
        ids_sha256 = _sha256_lines(task_ids)
        out["pool"] = {"size": len(task_ids), "task_ids_sha256": ids_sha256, "prompts_sha256": prompts_sha256}
    return out


def _short(digest: str | None) -> str:
    return "none (not hashed)" if digest is None else digest[:12]


def same_value(a: Any, b: Any) -> bool:
    """Whether two recorded settings are the same: numbers with a tolerance (not booleans), the rest by ``==``."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return bool(np.isclose(float(a), float(b), rtol=1e-9, atol=1e-12))
    return a == b


def _malformed(saved: Any) -> str | None:
    """What is wrong with the shape of a checkpoint's fingerprint (hand-edited or damaged), or None if nothing is.

    Every part :func:`fingerprint_changes` reads must have the type :func:`run_fingerprint` writes, so that a wrong
    one is named instead of surfacing as an ``AttributeError`` or ``TypeError`` deep in the comparison.
    """

    def kind(value: Any) -> str:
        return type(value).__name__

    if not isinstance(saved, Mapping):
        return f"the fingerprint is a {kind(saved)}, not an object"
    if saved.get("version") != FINGERPRINT_VERSION:
        return None  # another version is refused as such, whatever its layout
    expected: list[tuple[str, Any, tuple[type, ...], bool]] = [
        ("selector", saved.get("selector"), (Mapping,), True),
        ("reference_columns", saved.get("reference_columns"), (Mapping,), True),
        ("pool", saved.get("pool"), (Mapping,), False),
        ("task_embeddings", saved.get("task_embeddings"), (Mapping,), False),
        ("success", saved.get("success"), (Mapping,), False),
    ]
    for name, value, types, required in expected:
        if value is None and not required and name not in saved:
            continue
        if not isinstance(value, types):
            return f"'{name}' is a {kind(value)}, not an object"
    selector, refs, pool = saved["selector"], saved["reference_columns"], saved.get("pool")
    parts: list[tuple[str, Any, tuple[type, ...]]] = [
        ("selector.name", selector.get("name"), (str,)),
        ("selector.hparams", selector.get("hparams", {}), (Mapping,)),
        ("reference_columns.names", refs.get("names"), (list, tuple)),
        ("reference_columns.values_sha256", refs.get("values_sha256", ""), (str,)),
    ]
    if pool is not None:
        parts += [
            ("pool.size", pool.get("size"), (int,)),
            ("pool.task_ids_sha256", pool.get("task_ids_sha256"), (str,)),
            ("pool.prompts_sha256", pool.get("prompts_sha256") or "", (str,)),
        ]
    if "success" in saved:
        parts += [
            ("success.rule", saved["success"].get("rule"), (str,)),
            ("success.threshold", saved["success"].get("threshold"), (float, int)),
        ]
    for name, value, types in parts:
        if not isinstance(value, types) or isinstance(value, bool):
            wanted = {Mapping: "an object", str: "a string", int: "an integer", float: "a number", list: "a list"}
            wanted = wanted[types[0]]
            return f"'{name}' is {value!r:.60} (a {kind(value)}), not {wanted}"
    if not all(isinstance(n, str) for n in refs["names"]):
        return f"'reference_columns.names' holds something other than names: {refs['names']!r:.80}"
    return None


def _success_changes(was: Mapping[str, Any] | None, now: Mapping[str, Any]) -> list[Change]:
    """A changed ``bots.success`` rule or threshold; none for a checkpoint that did not record it (said)."""
    if was is None:
        logger.warning(
            "the checkpoint's fingerprint does not record bots.success (written before it was): the success rule "
            "cannot be checked on this resume; the next checkpoint records it"
        )
        return []
    if was.get("rule") == now["rule"] and same_value(was.get("threshold"), now["threshold"]):
        return []
    what = f"rule {was.get('rule')!r} threshold {was.get('threshold')!r} -> rule {now['rule']!r} threshold "
    return [Change("success", what + repr(now["threshold"]), "success")]


def fingerprint_changes(saved: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[Change]:
    """Every difference between a checkpoint's fingerprint (``saved``) and this run's (``current``).

    Only what ``current`` has is compared (the driver's fingerprint has no pool and no reference values). A fingerprint
    of the wrong shape (hand-edited or damaged) is one change that no override accepts.
    """
    if saved is None:
        return [Change("fingerprint", "the checkpoint has none (written before fingerprints)", "missing_fingerprint")]
    broken = _malformed(saved)
    if broken is not None:
        return [
            Change(
                "fingerprint",
                f"malformed: {broken}",
                None,
                "its data.pt was edited or damaged, so what its posterior means cannot be checked; restore it",
            )
        ]
    if saved.get("version") != FINGERPRINT_VERSION:
        return [
            Change(
                "fingerprint",
                f"version {saved.get('version')!r}, this bots-verl reads {FINGERPRINT_VERSION}",
                None,
                "written by another bots-verl; resume with that version",
            )
        ]
    changes: list[Change] = []
    was, now = saved.get("selector", {}), current["selector"]
    if was.get("name") != now["name"]:
        changes.append(
            Change(
                "selector",
                f"{was.get('name')!r} -> {now['name']!r}",
                None,
                "the posterior in the checkpoint is another selector's state",
            )
        )
    else:
        in_state = SELECTORS[now["name"]].CHECKPOINT_HPARAMS if now["name"] in SELECTORS else ()
        old, new = was.get("hparams", {}), now["hparams"]
        for key in sorted(set(old) | set(new)):
            if same_value(old.get(key), new.get(key)):
                continue
            what = f"{key} {old.get(key)!r} -> {new.get(key)!r}"
            if key in in_state:
                reason = f"{key} lives in the checkpoint's posterior and would not apply; set it back to "
                reason += repr(old.get(key))
                changes.append(Change("hparams", what, None, reason))
            else:
                changes.append(Change("hparams", what, "hparams"))
    changes += _success_changes(saved.get("success"), current["success"])
    was_refs, now_refs = saved.get("reference_columns", {}), current["reference_columns"]
    if was_refs.get("names") != now_refs["names"]:
        changes.append(
            Change("reference_columns", f"names {was_refs.get('names')} -> {now_refs['names']}", "reference_columns")
        )
    elif "values_sha256" in now_refs and was_refs.get("values_sha256") != now_refs["values_sha256"]:
        changes.append(
            Change(
                "reference_columns",
                f"values (sha256 {_short(was_refs.get('values_sha256'))} -> {_short(now_refs['values_sha256'])})",
                "reference_columns",
            )
        )
    if "pool" in current:
        # the embeddings are read with the pool (the trainer); the driver's fingerprint has neither
        was_emb = (saved.get("task_embeddings") or {}).get("sha256")
        now_emb = (current.get("task_embeddings") or {}).get("sha256")
        if was_emb != now_emb:
            changes.append(
                Change(
                    "task_embeddings",
                    f"task embeddings (sha256 {_short(was_emb)} -> {_short(now_emb)})",
                    "task_embeddings",
                )
            )
        was_pool, now_pool = saved.get("pool", {}), current["pool"]
        if (was_pool.get("size"), was_pool.get("task_ids_sha256")) != (now_pool["size"], now_pool["task_ids_sha256"]):
            changes.append(
                Change(
                    "pool",
                    f"{was_pool.get('size')} tasks -> {now_pool['size']} tasks, task ids (bots.task_id_field) or "
                    f"their order differ (sha256 {_short(was_pool.get('task_ids_sha256'))} -> "
                    f"{_short(now_pool['task_ids_sha256'])})",
                    None,
                    "the posterior is indexed by the pool's positions; other data files, data.train_max_samples or "
                    "filtering give other tasks",
                )
            )
        elif was_pool.get("prompts_sha256") != now_pool["prompts_sha256"]:
            changes.append(
                Change(
                    "pool",
                    f"the same {now_pool['size']} task ids with other prompts (sha256 "
                    f"{_short(was_pool.get('prompts_sha256'))} -> {_short(now_pool['prompts_sha256'])})",
                    "pool",
                )
            )
    return changes


def check_fingerprint(
    folder: str,
    saved: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    accept: Collection[str],
    also: Sequence[Change] = (),
) -> None:
    """Refuse to resume ``folder`` if the posterior it holds was built for another pool, references or selector.

    Args:
        folder: the checkpoint folder, for messages.
        saved: the checkpoint's fingerprint (``None`` for a checkpoint written before fingerprints).
        current: this run's :func:`run_fingerprint`.
        accept: ``bots.resume.accept_changed``.
        also: changes found elsewhere, refused or accepted the same way (the training settings,
            :mod:`bots_verl.integration.safety.training_record`).

    Raises:
        ValueError: listing every change not accepted, each with the override that accepts it or why none can.
    """
    changes = [*fingerprint_changes(saved, current), *also]
    accepted = [c for c in changes if c.accepted_by(accept)]
    refused = [c for c in changes if c not in accepted]
    for change in accepted:
        logger.warning(
            "resuming from %s with %s changed, accepted by %s: %s", folder, change.part, _OVERRIDE, change.what
        )
    if not refused:
        return
    lines = []
    for change in refused:
        how = f"accept with {_OVERRIDE}=[{change.override}]" if change.accept else f"no override: {change.why_not}"
        lines.append(f"  - {change.part}: {change.what} ({how})")
    overrides = sorted({c.accept for c in changes if c.accept is not None})
    remedy = (
        f"Restore what the checkpoint was written with, accept the changes with {_OVERRIDE}=[{','.join(overrides)}]"
        if overrides and all(c.accept for c in refused)
        else "Restore what the checkpoint was written with"
    )
    if all(c.part == "training" for c in refused):
        header = f"resuming from {folder}, but this launch changes the training settings the run was started with"
    elif saved is None:
        header = (
            f"resuming from {folder}, but its data.pt does not record what its BOTS posterior was built for (pool, "
            "reference columns, selector), so a change would resume silently"
        )
    elif any(c.what.startswith("malformed: ") for c in refused):
        header = f"resuming from {folder}, but the fingerprint in its data.pt is malformed"
    else:
        header = (
            f"resuming from {folder}, but its BOTS posterior was built for another run; resumed as is, it would "
            "silently mean something else"
        )
    raise ValueError(
        f"{header}:\n"
        + "\n".join(lines)
        + f"\n{remedy}, or start a new run (trainer.resume_mode=disable or another trainer.default_local_dir)"
    )
