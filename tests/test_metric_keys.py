"""Metric keys come from one table (``bots_verl.core.metric_keys``): no metric-key string literal elsewhere.

The source of ``bots_verl/`` and ``analysis/`` is read with ``ast`` (nothing is imported). A string constant is a
metric key when it starts with a run-log namespace (``bots/``, ``val-core/``, ``timing_s/``, ``sim/``, ...) or with
one of the selector statistics' families (``batch/``, ``posterior/``, ``oracle/``, ...), also as the head of an
f-string or after a regex's ``^``, or when it equals a key of the table that has a ``/``. Docstrings are prose and are
not read. The table's names without a ``/`` (``rollouts``, ``select_ms``) are ordinary words that also name state and
in-memory fields, so the scan cannot tell them apart; their writers use the table's constants all the same.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from test_import_structure import import_graph

from bots_verl import runlog
from bots_verl.core import metric_keys

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("bots_verl", "analysis")
TABLE = ROOT / "bots_verl" / "core" / "metric_keys.py"

#: verl's and our run-log namespaces, and the families of the selectors' statistics (logged under bots/)
NAMESPACES = ("bots", "val-core", "val-aux", "train-pool", "timing_s", "sim")
STAT_FAMILIES = ("batch", "estimator", "selection", "posterior", "implicit", "oracle", "dps", "greso")
#: verl's other namespaces: nothing of ours reads them yet; one that starts to gets its key from the table too
VERL_NAMESPACES = ("actor", "critic", "response_length", "prompt_length", "perf", "training", "timing_per_token_ms")
KEY_LIKE = re.compile(r"^\^?(?:" + "|".join(re.escape(p) for p in NAMESPACES + STAT_FAMILIES + VERL_NAMESPACES) + r")/")


def table_entries() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(metric_keys).items()
        if name.endswith(("_STAT", "_EVIDENCE", "_METRIC")) and isinstance(value, str)
    }


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings or other bare string statements (prose, not keys)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def key_literals(source: str, known: set[str]) -> list[tuple[int, str]]:
    """``(line, text)`` of every string constant of ``source`` that reads as a metric key."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if KEY_LIKE.match(node.value) or node.value in known:
                found.append((node.lineno, node.value))
    return sorted(found)


def scan(root: Path = ROOT, table: Path = TABLE) -> list[str]:
    known = {value for value in table_entries().values() if "/" in value}
    hits = []
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            if path == table:
                continue
            for line, text in key_literals(path.read_text(), known):
                hits.append(f"{path.relative_to(root)}:{line}: {text!r}")
    return hits


def test_no_metric_key_literal_outside_the_table():
    hits = scan()
    assert not hits, "metric keys spelled outside bots_verl/core/metric_keys.py (use its constants):\n" + "\n".join(
        hits
    )


def test_the_scan_finds_keys_and_leaves_other_strings(tmp_path):
    source = (
        '"""Docstring naming bots/rollouts is prose."""\n'
        'A = "bots/select_ms"\n'
        'B = {"batch/success_rate": 1.0}\n'
        'C = f"bots/{name}"\n'
        'D = r"^val-core/(?P<s>.+)/acc/mean@(?P<n>\\d+)$"\n'
        'E = "timing_s/" + phase\n'
        'F = "sim/true_p_mean"\n'
        'G = "estimator/auc"\n'
        'H = ("runs/sim-demo", "recipes/results/sim/x.md", "bots.hparams", "bots_toy/addition", "n/a", "rollouts")\n'
        'I = f"{run}: no metric (val-core/<source>/acc/mean@<n>)"\n'
    )
    lines = [line for line, _ in key_literals(source, {"estimator/auc"})]
    assert lines == [2, 3, 4, 5, 6, 7, 8]


def test_the_table_names_each_key_once():
    entries = table_entries()
    by_value: dict[str, list[str]] = {}
    for name, value in entries.items():
        by_value.setdefault(value, []).append(name)
    stats = {v for n, v in entries.items() if n.endswith("_STAT")}
    twins = {v: n for v, n in by_value.items() if len(n) > 1}
    assert twins == {}
    for name, value in entries.items():
        if name.endswith("_EVIDENCE"):
            # a plug-in's figure is logged as bots/implicit/<name>: a bare name
            assert "/" not in value, name
        elif name.endswith("_STAT"):
            assert not value.startswith(metric_keys.BOTS_PREFIX) and value.split("/")[0] not in NAMESPACES, name
        else:
            assert value.split("/")[0] in NAMESPACES, name
            if value.startswith(metric_keys.BOTS_PREFIX):
                assert value.removeprefix(metric_keys.BOTS_PREFIX) in stats, name


def test_runlog_hands_the_readers_the_whole_table():
    assert set(metric_keys.__all__) <= set(runlog.__all__)
    assert all(getattr(runlog, name) is getattr(metric_keys, name) for name in metric_keys.__all__)
    # every name the table defines is in its __all__ (a star import would drop the others)
    assert set(table_entries()) <= set(metric_keys.__all__)


def test_keys_the_archived_runs_hold():
    # spelled out here once on purpose: archived metrics.jsonl files are read by these exact keys
    assert metric_keys.ETR_METRIC == "bots/batch/effective_task_ratio"
    assert metric_keys.STEP_TIME_METRIC == "timing_s/step"
    assert metric_keys.val_accuracy_key("sim-math", 1) == "val-core/sim-math/acc/mean@1"
    assert metric_keys.ACC_PATTERN.match("val-core/sim-math/acc/mean@1")["source"] == "sim-math"
    assert metric_keys.TOY_EXACT_METRIC == "val-core/toy__arith/acc/exact"


def test_the_table_stands_on_the_standard_library_alone():
    """Any layer may import the table, the core included, without an import circle."""
    graph = import_graph()
    assert graph["bots_verl.core.metric_keys"] <= set(sys.stdlib_module_names) | {"__future__"}
