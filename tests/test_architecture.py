"""The house rules, checked: layered imports (import-linter contracts in pyproject.toml), no import
cycles anywhere in the package, the project's own imports at module top outside commands/, and no
module over 400 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "intake_eval"
ROOT = PACKAGE.parents[1]


def test_layer_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every group of modules that import each other, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_strongly_connected_finds_a_cycle():  # the checker itself can fail
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    imports = grimp.build_graph("intake_eval", cache_dir=None)
    graph = {module: {m for m in imports.find_modules_directly_imported_by(module) if m.startswith("intake_eval.")}
             for module in imports.modules if module.startswith("intake_eval.")}
    # a package's __init__ and its submodules are one node for grimp; cycles through a face are real cycles too
    assert strongly_connected(graph) == []


def test_project_imports_sit_at_module_top_outside_commands():
    late = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "commands" or relative.name == "cli.py":
            continue  # commands import lazily so `--help` stays fast
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                late += [f"{relative}:{sub.lineno} {sub.module}" for sub in ast.walk(node)
                         if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("intake_eval")]
    assert late == []


def test_modules_stay_small():
    long = [f"{path.relative_to(PACKAGE)}: {n}" for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > 400]
    assert long == []
