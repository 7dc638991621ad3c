"""``python -m bots_verl.toy.paired BENCHMARK_DIR_OR_SUMMARY_JSON [--baseline random] [--out DIR]``.

The toy benchmark's paired statistics (every selector against Random, seed by seed, with t and bootstrap intervals)
live in :mod:`analysis.paired`, next to the TTB/BSF/Roll/Time code they reuse: ``bots_verl`` does not import
``analysis`` at import time (the benchmark runs it as a subprocess), so this entry point imports it only when run.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run :func:`analysis.paired.main` (same arguments); returns its exit status."""
    from analysis.paired import main as paired_main

    return paired_main(argv)


if __name__ == "__main__":
    sys.exit(main())
