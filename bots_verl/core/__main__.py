"""``python -m bots_verl.core --list``: every registered selector, evidence plug-in, selection rule and Beta-selector
option, grouped as the paper's, the peers' and ours."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from bots_verl.core import EVIDENCE, SELECTION_RULES, SELECTORS
from bots_verl.core.paper.bots_selectors import BETA_OPTIONS
from bots_verl.core.registry import GROUPS, OTHER_GROUP, Registry, defaults_of, summary_of

logger = logging.getLogger(__name__)

_SECTIONS: tuple[tuple[str, Registry[Any], str], ...] = (
    ("selectors", SELECTORS, "build_selector(name, ...) / bots.selector=<name>"),
    ("evidence plug-ins", EVIDENCE, "hyperparameter evidence=<name> of the Beta selectors"),
    ("selection rules", SELECTION_RULES, "hyperparameter selection=<name> of the Beta selectors"),
    ("options", BETA_OPTIONS, "every Beta selector takes them; at these defaults it is the paper's"),
)


def listing() -> str:
    """The text ``--list`` prints: each registry's entries by group (paper, peers, ours), each with its parameters."""
    lines = []
    for title, registry, usage in _SECTIONS:
        lines.append(f"{title} ({usage}):")
        by_group: dict[str, list[str]] = {}
        for name in sorted(registry):
            by_group.setdefault(registry.group_of(name), []).append(name)
        for group in (*GROUPS, OTHER_GROUP):
            if group not in by_group:
                continue
            lines.append(f"  {group}: {GROUPS.get(group, 'registered outside bots_verl.core')}")
            for name in by_group[group]:
                entry = registry[name]
                lines.append(f"    {name:<18} {summary_of(entry)}")
                params = defaults_of(entry)
                fixed = getattr(entry, "FIXED", {})
                if params:
                    text = ", ".join(f"{k}={v!r}" + (" (fixed)" if k in fixed else "") for k, v in params.items())
                    lines.append(f"    {'':<18} {text}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bots_verl.core", description=__doc__)
    parser.add_argument("--list", action="store_true", help="print every registered name with its hyperparameters")
    parser.add_argument("--names", choices=["selectors", "evidence", "selection"], help="print only these names")
    args = parser.parse_args(argv)
    if args.names:
        by_flag: dict[str, Registry[Any]] = {
            "selectors": SELECTORS,
            "evidence": EVIDENCE,
            "selection": SELECTION_RULES,
        }
        registry = by_flag[args.names]
        print(" ".join(sorted(registry)))
    elif args.list:
        print(listing(), end="")
    else:
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
