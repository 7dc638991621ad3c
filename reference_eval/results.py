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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("REFERENCE_EVAL_LOGGING_LEVEL", "INFO"))

__all__ = ["Settings", "ResultsError", "read_results", "ResultsWriter", "record_key"]

REQUIRED_FIELDS = ("task_id", "successes", "attempts", "settings_id")


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


def _scan(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Parse a results file.

    Only newline-terminated lines count. A final fragment without a newline is what a crash mid-append leaves; it is
    dropped (its prompts are simply evaluated again) even if it happens to parse, so readers and a resuming writer
    always agree on the same records.

    Returns:
        ``(records, good_bytes, truncated)``: ``good_bytes`` is the length of the complete-line prefix.

    Raises:
        ResultsError: If a complete line is not a valid record.
    """
    data = path.read_bytes()
    good = data.rfind(b"\n") + 1
    records: list[dict[str, Any]] = []
    for i, raw in enumerate(data[:good].split(b"\n")[:-1]):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict) or any(k not in rec for k in REQUIRED_FIELDS):
                raise ValueError(f"not an object with {REQUIRED_FIELDS}")
        except ValueError as err:
            raise ResultsError(f"{path}: line {i + 1} is not a valid result record: {err}") from err
        records.append(rec)
    truncated = good < len(data)
    if truncated:
        logger.warning("%s: ignoring an incomplete last line (%d bytes, no newline)", path, len(data) - good)
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
    """Append records to a results file in batches, durably.

    Opening an existing file checks its settings and repairs a truncated last line.

    Args:
        path: The JSON-lines file (created with its parent directory if missing).
        settings: The settings of this collect run.

    Raises:
        ResultsError: If the file holds results from other settings.
    """

    def __init__(self, path: str | os.PathLike, settings: Settings) -> None:
        self.path = Path(path)
        self.settings = settings
        self.existing: list[dict[str, Any]] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            records, good, truncated = _scan(self.path)
            found = {r["settings_id"] for r in records}
            if found and found != {settings.settings_id()}:
                other = records[0]
                raise ResultsError(
                    f"{self.path} holds results for different settings (model={other.get('model')!r}, "
                    f"sampling={other.get('sampling')}, scorer={other.get('scorer')}); this run has "
                    f"{settings.describe()}. Use another --out file for these settings."
                )
            if truncated:
                with open(self.path, "r+b") as f:
                    f.truncate(good)
                    f.flush()
                    os.fsync(f.fileno())
                logger.warning("%s: cut off the incomplete last line; %d records kept", self.path, len(records))
            self.existing = records
        self._file = open(self.path, "ab")  # noqa: SIM115 - closed in close()

    def append(self, records: list[dict[str, Any]]) -> None:
        """Write a batch of records with one write, then flush and fsync.

        Args:
            records: The records (the settings fields are added here).
        """
        if not records:
            return
        common = self.settings.record_fields()
        payload = "".join(json.dumps({**rec, **common}, ensure_ascii=False) + "\n" for rec in records)
        self._file.write(payload.encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
