"""The module map holds: no import circles, the core stands on numpy alone, the simulator below the toy testbed.

Imports are read from the source with ``ast`` (nothing is imported), including those inside functions and under
``TYPE_CHECKING``: a reader follows those too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bots_verl", "analysis", "reference_eval")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports, and every outside top-level name."""
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the module pkg.mod; ``from pkg import name`` imports pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            if target in known:
                out.add(target)
            else:
                # the nearest known parent (bots_verl.core.x.y -> bots_verl.core.x), else the outside top-level name
                parent = target
                while parent and parent not in known:
                    parent = parent.rpartition(".")[0]
                out.add(parent or target.split(".")[0])
    return out


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    files = {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    known = set(files)
    return {name: imported_modules(p.read_text(), name, p.name == "__init__.py", known) for name, p in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _under(graph: dict[str, set[str]], prefix: str) -> dict[str, set[str]]:
    return {m: deps for m, deps in graph.items() if m == prefix or m.startswith(prefix + ".")}


def _is_package(module: str) -> bool:
    """True for a module of a package's own tree (an ``__init__`` whose arrows only hand names on is not a circle)."""
    return (ROOT / Path(*module.split(".")) / "__init__.py").exists()


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_module_circles(graph):
    # a package's __init__ re-exporting its modules is not a loop a reader follows: leave packages out
    modules = {m: {d for d in deps if not _is_package(d)} for m, deps in graph.items() if not _is_package(m)}
    assert circles(modules) == []


def test_core_imports_only_numpy_the_standard_library_and_itself(graph):
    allowed = set(sys.stdlib_module_names) | {"numpy", "__future__"}
    outside = {
        (m, d)
        for m, deps in _under(graph, "bots_verl.core").items()
        for d in deps
        if d.split(".")[0] not in allowed and not (d == "bots_verl.core" or d.startswith("bots_verl.core."))
    }
    assert outside == set()


def test_the_simulator_stands_below_the_toy_testbed_and_the_verl_glue(graph):
    above = ("bots_verl.toy", "bots_verl.integration", "bots_verl.verl_cpu", "bots_verl.main")
    reached = {(m, d) for m, deps in _under(graph, "bots_verl.sim").items() for d in deps if d.startswith(above)}
    assert reached == set()


def test_the_checks_can_fail(tmp_path):
    """The same reading finds a circle, a relative import and a forbidden dependency in a small made-up tree."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import g\n")
    (pkg / "sub" / "c.py").write_text("from ..a import x\nimport torch\nfrom typing import TYPE_CHECKING\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert circles(graph) == [["pkg.a", "pkg.b"]]
    assert graph["pkg.sub.c"] == {"pkg.a", "torch", "typing"}


def test_nothing_in_the_library_imports_the_benchmarks(graph):
    inside = ("bots_verl.speed",)
    reached = {
        (m, d)
        for m, deps in graph.items()
        if not m.startswith(inside)
        for d in deps
        if d == "bots_verl.speed" or d.startswith("bots_verl.speed.")
    }
    assert reached == set()


#: what stands above the config: the verl glue, the CPU backend, the testbeds and the entry points. Their checks of the
#: config live with them (a backend registers its own: ``bots_verl.config.checks``), so no arrow runs back up to them.
ABOVE_THE_CONFIG = (
    "bots_verl.integration",
    "bots_verl.verl_cpu",
    "bots_verl.main",
    "bots_verl.toy",
    "bots_verl.sim",
    "bots_verl.speed",
    "bots_verl.quickstart",
)


def _reaches(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_config_stands_below_the_verl_glue_and_the_cpu_backend(graph):
    reached = {
        (m, d) for m, deps in _under(graph, "bots_verl.config").items() for d in deps if _reaches(d, ABOVE_THE_CONFIG)
    }
    assert reached == set()
