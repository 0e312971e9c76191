"""The house rules, checked: layered imports (import-linter contracts in pyproject.toml), no import
cycles anywhere in the package, the project's own imports at module top outside commands/, and one
concept per module — a docstring stating each module's contract and a bounded public surface. No rule
counts lines: splitting code into named private helpers or longer, clearer lines never trips a check."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "intake_eval"
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


# A docstring shorter than this names the module rather than stating what it promises.
CONTRACT_WORDS = 6
# Generous on purpose (the largest module today has 22): a module whose public surface needs more names
# is two concepts and is split by concept. Private helpers (leading underscore) never count.
PUBLIC_NAMES_PER_MODULE = 25


def public_definitions(tree: ast.Module) -> list[str]:
    """The public classes and functions a module defines at top level (its concepts' names)."""
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_")]


def concept_problems(name: str, source: str) -> list[str]:
    """Why a module's source breaks "one concept per module" (empty when it does not)."""
    tree = ast.parse(source)
    problems = []
    contract = ast.get_docstring(tree) or ""
    if len(contract.split()) < CONTRACT_WORDS:
        problems.append(f"{name}: no module docstring stating its contract (at least {CONTRACT_WORDS} words)")
    public = public_definitions(tree)
    if len(public) > PUBLIC_NAMES_PER_MODULE:
        problems.append(f"{name}: {len(public)} public top-level names (over {PUBLIC_NAMES_PER_MODULE}): "
                        "split it by concept")
    return problems


def test_concept_check_can_fail():
    crowded = '"""Helpers for many unrelated things, gathered in one place."""\n' + "".join(
        f"def thing_{n}():\n    pass\n" for n in range(PUBLIC_NAMES_PER_MODULE + 1))
    assert [problem.split(":")[0] for problem in concept_problems("crowded.py", crowded)] == ["crowded.py"]
    assert concept_problems("bare.py", "def f():\n    pass\n") == [
        f"bare.py: no module docstring stating its contract (at least {CONTRACT_WORDS} words)"]
    private_helpers = '"""One concept, with as many private helpers as reads well."""\n' + "".join(
        f"def _step_{n}():\n    pass\n" for n in range(3 * PUBLIC_NAMES_PER_MODULE))
    assert concept_problems("helpers.py", private_helpers) == []


def test_one_concept_per_module():
    problems = [problem for path in sorted(PACKAGE.rglob("*.py"))
                for problem in concept_problems(str(path.relative_to(PACKAGE)), path.read_text())]
    assert problems == []
