"""The results file: one JSON object per evaluated prompt, appended batch by batch.

A line looks like::

    {"task_id": 17, "successes": 5, "attempts": 16, "mean_score": 0.31, "score_errors": 0,
     "data_source": "math__combined", "prompt_sha256": "…", "model": "/models/qwen2.5-7b",
     "sampling": {"n": 16, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 4096, "seed": 0,
                  "chat_template_kwargs": {}},
     "scorer": {"name": "bots_verl.rewards:compute_score", "success_rule": "auto", "success_threshold": 0.0},
     "settings_id": "3f2a…", "backend": "vllm", "time": 1717000000.0}

``settings_id`` hashes model + sampling + scorer. Every line of one file must share it: a pass rate is only meaningful
for one model under one sampling setup, so resuming with different settings is an error, not a silent mix.

Durability: each batch is written with one ``write``, then flushed and fsynced, so a crash loses at most the batch in
flight. A crash inside that write can leave a truncated last line; readers skip it with a warning and a resuming
writer cuts it off before appending (otherwise the next line would be glued to the fragment).

One writer at a time: :class:`ResultsWriter` holds ``<file>.lock`` (:class:`bots_verl.fileio.OutputLock`) while
open, so a second ``collect`` on the same file is refused with the first one's pid, host and start time.

Every line is checked when read (:func:`check_record`), with the file and line number in any error: counts must be
integers, not JSON booleans; successes cannot exceed the responses that were scored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bots_verl.fileio import OutputLock

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = [
    "MAX_RECORD_BYTES",
    "Settings",
    "ResultsError",
    "check_record",
    "read_results",
    "ResultsWriter",
    "record_key",
]

REQUIRED_FIELDS = ("task_id", "successes", "attempts", "settings_id")
# One record per prompt: even 128 saved responses of 32k tokens stay well below this; a longer line is not a record.
MAX_RECORD_BYTES = 64 * 2**20


class ResultsError(ValueError):
    """A results file is corrupt or mixes settings."""


@dataclass(frozen=True)
class Settings:
    """What a pass rate depends on besides the prompt.

    Attributes:
        model: The model path or name as given to collect.
        n: Samples per prompt.
        temperature: Sampling temperature.
        top_p: Nucleus mass.
        top_k: Top-k (-1 = off).
        max_tokens: Maximum new tokens per sample.
        seed: The base seed; each prompt's seed is derived from it and the task id.
        chat_template_kwargs: Extra chat-template arguments (e.g. ``enable_thinking``).
        scorer: The scoring function's ``module:function``.
        success_rule: The success rule (``bots_verl.rewards.success.SuccessRule``), as in training.
        success_threshold: Its score threshold.
    """

    model: str
    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    seed: int
    scorer: str
    success_rule: str = "auto"
    success_threshold: float = 0.0
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def sampling(self) -> dict[str, Any]:
        """The sampling part, as stored in each record."""
        keys = ("n", "temperature", "top_p", "top_k", "max_tokens", "seed", "chat_template_kwargs")
        return {k: getattr(self, k) for k in keys}

    def settings_id(self) -> str:
        """A short stable hash of all fields (sorted-key JSON)."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def describe(self) -> str:
        """A one-line human description for error messages."""
        return json.dumps(asdict(self), sort_keys=True)

    def record_fields(self) -> dict[str, Any]:
        """The settings fields every record carries."""
        return {
            "model": self.model,
            "sampling": self.sampling(),
            "scorer": {
                "name": self.scorer,
                "success_rule": self.success_rule,
                "success_threshold": self.success_threshold,
            },
            "settings_id": self.settings_id(),
        }


def record_key(task_id: Any) -> tuple[str, Any]:
    """A dict key for a task id that keeps 1 and "1" apart (JSON round trips preserve the type)."""
    return (type(task_id).__name__, task_id)


def check_record(rec: Any) -> None:
    """Check one parsed results line.

    Raises:
        ValueError: Naming the field and its value: ``task_id`` must be an int or a non-empty string, ``attempts`` a
            positive int, ``score_errors`` (optional, default 0) an int in [0, attempts] and ``successes`` a finite
            number in [0, attempts - score_errors] (responses whose scoring failed are never successes). ``bool`` is
            rejected everywhere: JSON ``true`` is not a count.
    """
    if not isinstance(rec, dict):
        raise ValueError(f"not a JSON object but {type(rec).__name__}")
    missing = [k for k in REQUIRED_FIELDS if k not in rec]
    if missing:
        raise ValueError(f"missing fields {missing}")
    task_id = rec["task_id"]
    if isinstance(task_id, bool) or not (isinstance(task_id, int) or (isinstance(task_id, str) and task_id)):
        raise ValueError(f"task_id must be an int or a non-empty string, got {task_id!r}")
    attempts = rec["attempts"]
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"task {task_id!r}: attempts must be a positive integer, got {attempts!r}")
    errors = rec.get("score_errors", 0)
    if isinstance(errors, bool) or not isinstance(errors, int) or not 0 <= errors <= attempts:
        raise ValueError(f"task {task_id!r}: score_errors must be an integer in [0, {attempts}], got {errors!r}")
    successes = rec["successes"]
    # fractional under the 'score' success rule (or a fractional 'acc'), so any number in range
    if (
        isinstance(successes, bool)
        or not isinstance(successes, int | float)
        or not math.isfinite(successes)
        or not 0 <= successes <= attempts - errors
    ):
        raise ValueError(
            f"task {task_id!r}: successes must be a number in [0, {attempts - errors}] (attempts - score_errors), "
            f"got {successes!r}"
        )
    if not isinstance(rec["settings_id"], str) or not rec["settings_id"]:
        raise ValueError(f"task {task_id!r}: settings_id must be a non-empty string, got {rec['settings_id']!r}")


def _scan(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Parse a results file, one line at a time (a file with saved responses can be larger than memory).

    Only newline-terminated lines count. A final fragment without a newline is what a crash mid-append leaves; it is
    dropped (its prompts are simply evaluated again) even if it happens to parse, so readers and a resuming writer
    always agree on the same records.

    Returns:
        ``(records, good_bytes, truncated)``: ``good_bytes`` is the length of the complete-line prefix.

    Raises:
        ResultsError: If a complete line is not a valid record, is nested too deeply to parse, or is longer than
            :data:`MAX_RECORD_BYTES`; the message names the file and the line.
    """
    records: list[dict[str, Any]] = []
    good = 0
    truncated = False
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; OSError must become a ResultsError
    except OSError as err:
        raise ResultsError(f"{path}: cannot read the results file: {err.strerror or err}") from err
    with f:
        line_no = 0
        while True:
            raw = f.readline(MAX_RECORD_BYTES + 1)
            if not raw:
                break
            line_no += 1
            if not raw.endswith(b"\n"):
                if len(raw) > MAX_RECORD_BYTES:
                    raise ResultsError(
                        f"{path}: line {line_no} is longer than {MAX_RECORD_BYTES} bytes; not a results file, or a "
                        "record no collect run writes"
                    )
                truncated = True
                break
            good += len(raw)
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                check_record(rec)
            except RecursionError:
                raise ResultsError(f"{path}: line {line_no} is nested too deeply to be a result record") from None
            except ValueError as err:
                raise ResultsError(f"{path}: line {line_no} is not a valid result record: {err}") from None
            records.append(rec)
    if truncated:
        size = path.stat().st_size
        logger.warning("%s: ignoring an incomplete last line (%d bytes, no newline)", path, size - good)
    return records, good, truncated


def read_results(path: str | os.PathLike, expect_settings_id: str | None = None) -> list[dict[str, Any]]:
    """Read every record of a results file, tolerating a truncated last line.

    Args:
        path: The JSON-lines file.
        expect_settings_id: If given, every record must carry it.

    Returns:
        The records in file order.

    Raises:
        ResultsError: On a corrupt line before the last, or records from different settings.
    """
    path = Path(path)
    records, _, _ = _scan(path)
    ids = {r["settings_id"] for r in records}
    if len(ids) > 1:
        raise ResultsError(f"{path}: records from {len(ids)} different settings ({sorted(ids)}); one file per setting")
    if expect_settings_id is not None and ids and ids != {expect_settings_id}:
        raise ResultsError(
            f"{path}: existing results were collected with settings {ids.pop()}, not {expect_settings_id}"
        )
    return records


class ResultsWriter:
    """Append records to a results file in batches, durably; the only writer of that file while open.

    Opening takes the file's lock (:class:`~bots_verl.fileio.OutputLock`), then checks the settings of the records
    already there and repairs a truncated last line.

    Args:
        path: The JSON-lines file (created with its parent directory if missing).
        settings: The settings of this collect run.
        command: What this writer is doing, shown to a second writer that is refused.

    Raises:
        LockError: If another process is writing the file (the message names it).
        ResultsError: If the file holds results from other settings, is corrupt, or cannot be created.
    """

    def __init__(self, path: str | os.PathLike, settings: Settings, command: str = "collect") -> None:
        self.path = Path(path)
        self.settings = settings
        self.existing: list[dict[str, Any]] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ResultsError(f"cannot create the folder of {self.path}: {err.strerror or err}") from err
        if self.path.is_dir():
            raise ResultsError(f"{self.path} is a directory; give a file name for the results")
        self._lock = OutputLock(self.path, command).acquire()
        try:
            self._open()
        except BaseException:
            self._lock.release()
            raise

    def _open(self) -> None:
        if self.path.exists():
            records, good, truncated = _scan(self.path)
            found = {r["settings_id"] for r in records}
            if found and found != {self.settings.settings_id()}:
                other = records[0]
                raise ResultsError(
                    f"{self.path} holds results for different settings (model={other.get('model')!r}, "
                    f"sampling={other.get('sampling')}, scorer={other.get('scorer')}); this run has "
                    f"{self.settings.describe()}. Use another --out file for these settings."
                )
            if truncated:
                with open(self.path, "r+b") as f:
                    f.truncate(good)
                    f.flush()
                    os.fsync(f.fileno())
                logger.warning("%s: cut off the incomplete last line; %d records kept", self.path, len(records))
            self.existing = records
        try:
            self._file = open(self.path, "ab")  # noqa: SIM115 - closed in close()
        except OSError as err:
            raise ResultsError(f"cannot open {self.path} for appending: {err.strerror or err}") from err

    def append(self, records: list[dict[str, Any]]) -> None:
        """Write a batch of records with one write, then flush and fsync.

        Args:
            records: The records (the settings fields are added here).

        Raises:
            ResultsError: If a record is longer than :data:`MAX_RECORD_BYTES` (nothing of the batch is written).
        """
        if not records:
            return
        common = self.settings.record_fields()
        # allow_nan=False: a NaN or infinity must never reach the file as a number.
        lines = [json.dumps({**rec, **common}, ensure_ascii=False, allow_nan=False) + "\n" for rec in records]
        payload = "".join(lines).encode("utf-8")
        longest = max(len(line.encode("utf-8")) for line in lines)
        if longest > MAX_RECORD_BYTES:
            raise ResultsError(
                f"a record of {longest} bytes exceeds {MAX_RECORD_BYTES}; collect without --save-responses or with "
                "fewer samples per prompt"
            )
        self._file.write(payload)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file and release its lock."""
        try:
            self._file.close()
        finally:
            self._lock.release()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
