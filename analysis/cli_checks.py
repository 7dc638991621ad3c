"""Checks of the analysis commands' arguments, made before any work: one wording for every ``python -m analysis.*``.

Each returns the problem as a sentence naming the flag (``None`` when there is none), for ``parser.error``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["out_file_problem", "out_folder_problem", "unknown_names_problem"]


def out_file_problem(out: str | Path | None, flag: str = "--out") -> str | None:
    """The problem with ``out`` as a file to write (``None``: none, or not given): an existing folder."""
    if out is not None and Path(out).is_dir():
        return f"{flag} {out} is a folder; give the file to write (e.g. {Path(out) / 'out.md'})"
    return None


def out_folder_problem(out: str | Path | None, flag: str = "--out") -> str | None:
    """The problem with ``out`` as a folder to write into (``None``: none, or not given): an existing file."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        return f"{flag} {out} is a file; give a folder to write into"
    return None


def unknown_names_problem(given: Iterable[str], known: Iterable[str], flag: str, what: str) -> str | None:
    """The names in ``given`` that are not in ``known`` (``None``: none), with the known ones."""
    known = list(dict.fromkeys(known))
    unknown = [name for name in dict.fromkeys(given) if name not in known]
    if unknown:
        return f"{flag}: unknown {what} {unknown}; known: {known}"
    return None
