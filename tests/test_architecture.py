"""The package's shape: its parts form layers (imports run down, never across or up), no import cycles between
modules or parts (function-local imports included), and local imports only to defer verifiers."""

from __future__ import annotations

import ast
import re
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


def located_imports(path: Path) -> list[tuple[int, str]]:
    """(line, autoenv module) for every import in `path`, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            target = resolve(name) if name.startswith("autoenv") else None
            if target:
                found.append((node.lineno, target))
    return found


def imports(path: Path) -> set[str]:
    """Every autoenv module `path` imports, at any depth, plus the packages that import runs."""
    found = set()
    for _, target in located_imports(path):
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


# --- the parts: autoenv's packages form layers ---------------------------------------------

# Bottom to top. A module may import its own part and the parts of lower layers, never a part of
# its own layer or above: a reader of one part needs only the parts below it.
LAYERS: list[tuple[str, ...]] = [
    ("core",),               # the vocabulary: errors, record, config, job, display, ...
    ("run", "sandbox", "containers"),  # what a run keeps; the processes the harness starts and their confinement;
                                       # container engines (the docker runtime's guard, image, daemon)
    ("gates", "driver"),     # what the probes say and the rules that judge them; the agent's driver
    ("endpoint",),           # the scripted models (they play the gates' probes)
    ("child", "judge"),      # what executes beside the candidate; the isolated judge
    ("review", "export"),    # reading a run; the hand-off of a kept candidate
    ("evaluation",),         # one evaluation's stages and its verdict
    ("model",),              # a real local model and training on it
    ("cli",),                # the `autoenv` command (autoenv/cli.py, autoenv/__init__.py)
]
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}

# Imports that run from a part to one of its own layer or above, each with the reason it must.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def part_of(module: str) -> str:
    """The part a module belongs to: its first package under autoenv (autoenv.cli and autoenv: cli)."""
    parts = module.split(".")
    if len(parts) < 2 or (len(parts) == 2 and not (AUTOENV / parts[1]).is_dir()):
        return "cli"
    return parts[1]


def part_edges(modules: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(importing part, imported part, 'file:line imports module') for each import across parts."""
    out = []
    for name, path in sorted(modules.items()):
        for line, target in located_imports(path):
            src, dst = part_of(name), part_of(target)
            if src != dst:
                shown = path.relative_to(AUTOENV.parent) if path.is_relative_to(AUTOENV.parent) else path
                out.append((src, dst, f"{shown}:{line} imports {target}"))
    return out


def upward(edges: list[tuple[str, str, str]]) -> list[str]:
    return [f"{where} ({src} -> {dst}: {dst} is not below {src})" for src, dst, where in edges
            if RANK[dst] >= RANK[src] and (src, dst) not in ALLOWED_UPWARD]


def test_every_part_has_a_layer():
    parts = {part_of(m) for m in MODULES}
    assert parts == set(RANK), f"parts without a layer: {sorted(parts - set(RANK))}; layers without a part: {sorted(set(RANK) - parts)}"


def test_no_part_imports_its_own_layer_or_above():
    offenders = upward(part_edges(MODULES))
    assert not offenders, "imports that run up the layers (move the code down, or justify it in ALLOWED_UPWARD):\n" + "\n".join(offenders)


def test_the_parts_have_no_cycle():
    edges: dict[str, set[str]] = {}
    for src, dst, _ in part_edges(MODULES):
        edges.setdefault(src, set()).add(dst)
    cycle = find_cycle(edges)  # parts are not modules: the package rule never applies
    assert cycle is None, "cycle between parts: " + " -> ".join(cycle or [])


def test_the_layer_check_names_a_planted_upward_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\nfrom autoenv.evaluation.pipeline import evaluate\n")
    modules = {**MODULES, "autoenv.core.planted": planted}
    offenders = upward(part_edges(modules))
    assert offenders == [f"{planted}:2 imports autoenv.evaluation.pipeline (core -> evaluation: evaluation is not below core)"]
    assert find_cycle({"run": {"evaluation"}, "evaluation": {"run"}}) is not None


PART_DOC = re.compile(r"May import: (?P<may>[^.]*)\.\s+Imported by: (?P<by>[^.]*)\.", re.DOTALL)


def test_each_part_says_what_it_is_what_it_may_import_and_what_imports_it():
    imports_of: dict[str, set[str]] = {}
    importers_of: dict[str, set[str]] = {}
    for src, dst, _ in part_edges(MODULES):
        imports_of.setdefault(src, set()).add(dst)
        importers_of.setdefault(dst, set()).add(src)
    problems = []
    for part in sorted(set(RANK) - {"cli"}):
        doc = ast.get_docstring(ast.parse((AUTOENV / part / "__init__.py").read_text())) or ""
        match = PART_DOC.search(doc)
        if not match:
            problems.append(f"autoenv/{part}/__init__.py: the docstring lacks 'May import: ... Imported by: ...'")
            continue
        may = set(re.findall(r"\w+", match["may"])) & set(RANK) - {part}
        by = set(RANK) - {part} if "every other part" in match["by"] else set(re.findall(r"\w+", match["by"])) & set(RANK)
        if imports_of.get(part, set()) - may:
            problems.append(f"autoenv/{part}: imports {sorted(imports_of[part] - may)}, which its docstring does not allow")
        if higher := {p for p in may if RANK[p] >= RANK[part]}:
            problems.append(f"autoenv/{part}: its docstring allows {sorted(higher)}, which are not below it")
        if importers_of.get(part, set()) - by:
            problems.append(f"autoenv/{part}: imported by {sorted(importers_of[part] - by)}, which its docstring does not name")
    assert not problems, "\n".join(problems)
