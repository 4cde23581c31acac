"""The package's shape: no import cycles (function-local imports included), and local imports only to defer verifiers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

AUTOENV = Path(__file__).resolve().parent.parent / "autoenv"
HEAVY = ("verifiers", "anthropic", "matplotlib")  # seconds to import: only the processes that need them pay


def module_name(path: Path) -> str:
    parts = path.relative_to(AUTOENV.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in AUTOENV.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The autoenv module an import refers to (a name imported from a package may be a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path) -> set[str]:
    """Every autoenv module `path` imports, at any depth, plus the packages that import runs."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.startswith("autoenv"):
                target = resolve(name)
                while target and target != "autoenv":
                    found.add(target)
                    target = target.rpartition(".")[0]  # importing a.b.c runs a.b's __init__ first
    return found


def graph() -> dict[str, set[str]]:
    edges = {name: imports(path) for name, path in MODULES.items()}
    for name in edges:  # a package's own __init__ is not an import of itself
        edges[name].discard(name)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt.startswith(node + ".") and MODULES[node].name == "__init__.py":
                continue  # a package importing its own submodule is how packages work
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle():
    edges = graph()
    edges["autoenv.core.record"] = edges["autoenv.core.record"] | {"autoenv.evaluation.pipeline"}  # pipeline imports record
    cycle = find_cycle(edges)
    assert cycle is not None and cycle[0] == cycle[-1]


def test_function_local_imports_only_defer_heavy_packages_and_say_so():
    offenders = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                target = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                said = "defer" in lines[node.lineno - 1] or "defer" in lines[node.lineno - 2]
                if not (target or "").startswith(HEAVY) or not said:
                    offenders.append(f"{path.relative_to(AUTOENV.parent)}:{node.lineno} imports {target}")
    assert not offenders, "function-local imports other than a commented deferral of verifiers/anthropic/matplotlib:\n" + "\n".join(offenders)


@pytest.mark.slow
def test_the_harness_process_never_imports_verifiers():
    """The CLI and every stage import without verifiers (only worker processes pay for it), and
    without anthropic and matplotlib (only the judge and the figures do)."""
    import subprocess
    import sys

    code = ("import sys, autoenv.cli, autoenv.evaluation.commands, autoenv.evaluation.pipeline; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('verifiers', 'anthropic', 'matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
