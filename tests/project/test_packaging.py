"""Installs and behaves like any Python tool.

Fast: the dependencies pyproject.toml declares are exactly the third-party modules src/ imports.
Slow: the built wheel in a fresh venv outside the checkout, run from an empty folder: the demo to
a report, `python -m intake_eval --help`, a study whose prompts folder and two-phenotype catalog
live outside the checkout, a key in ./.env seen by `models`, `vllm/…` answered with the recipe.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "intake_eval"
# Imported only when an optional feature is used, and declared as that feature's extra.
EXTRAS = {"xllamacpp": "local"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = lambda specs: sorted(canonical(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0]) for spec in specs)  # noqa: E731
    return {"": names(project["dependencies"]),
            **{extra: names(specs) for extra, specs in project["optional-dependencies"].items()}}


def imported_modules() -> set[str]:
    found = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in ("intake_eval", "__future__")}


def test_dependencies_are_declared_exactly_as_imported():
    distributions = packages_distributions()
    wanted: dict[str, set[str]] = {}
    for module in imported_modules():
        (distribution,) = {canonical(name) for name in distributions[module]}
        wanted.setdefault(EXTRAS.get(module, ""), set()).add(distribution)
    listed = declared()
    assert sorted(wanted[""]) == listed[""]
    for extra, distributions_needed in wanted.items():
        assert distributions_needed <= set(listed[extra]), extra
    assert "tenacity" not in listed[""] and "filelock" not in listed[""]


def test_the_version_has_one_source():
    text = (ROOT / "pyproject.toml").read_text()
    assert len(re.findall(r'^version = "', text, flags=re.MULTILINE)) == 1
    hits = [path for path in SOURCE.rglob("*.py") if re.search(r"__version__\s*=\s*['\"]", path.read_text())]
    assert hits == []


# ---------------------------------------------------------------- the built wheel in a fresh venv

def run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh venv (no system site-packages) holding the built wheel and its dependencies only."""
    root = tmp_path_factory.mktemp("packaging")
    env = {key: value for key, value in os.environ.items()
           if key not in ("VIRTUAL_ENV", "PYTHONPATH") and not key.endswith("_API_KEY")}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION", "COLUMNS": "200",
                "NO_COLOR": "1"})
    source = root / "source"  # a clean copy: a build inside the checkout would leave build/ behind
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(root / "dist"), str(source)], root, env)
    (wheel,) = (root / "dist").glob("intake_eval-*.whl")
    venv.EnvBuilder(with_pip=True, clear=True).create(root / "venv")
    bin_dir = root / "venv" / "bin"
    run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)], root, env, timeout=900)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return bin_dir, env


@pytest.mark.slow
def test_the_wheel_carries_the_shipped_files_and_runs_from_an_empty_folder(installed, tmp_path):
    bin_dir, env = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    where = run([str(bin_dir / "python"), "-c", "import intake_eval, sys; print(intake_eval.__file__)"], empty, env)
    assert str(ROOT) not in where.stdout and "site-packages" in where.stdout  # the installed copy, not the checkout
    helped = run([str(bin_dir / "python"), "-m", "intake_eval", "--help"], empty, env)
    assert "Usage: python -m intake_eval" in helped.stdout
    demo = run([str(bin_dir / "intake-eval"), "demo"], empty, env)
    report = empty / demo.stdout.strip().splitlines()[-1]
    assert report.name == "index.html" and report.is_file()
    listed = run([str(bin_dir / "intake-eval"), "phenotypes", "list"], empty, env)
    assert "18 phenotypes" in listed.stdout


@pytest.mark.slow
def test_a_study_with_its_own_prompts_and_a_catalog_subset_outside_the_checkout(installed, tmp_path):
    bin_dir, env = installed
    mine = tmp_path / "my study"
    (mine / "prompts").mkdir(parents=True)
    (mine / "prompts" / "clinician_custom.j2").write_text("You are a clinician. Ask about sleep and mood.\n")
    shutil.copytree(SOURCE / "phenotypes", mine / "catalog")
    (mine / "study.yaml").write_text("""\
name: mine
profiles: {n: 4, mode: stratified}
prompts_dir: prompts
catalog: catalog
phenotypes: [adult_adhd, anxious_depression]
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener]
conditions: [custom]
judges: [offline/judge]
""")
    work = tmp_path / "work"
    work.mkdir()
    done = run([str(bin_dir / "intake-eval"), "study", str(mine / "study.yaml")], work, env)
    assert (work / "runs" / "mine" / "report" / "index.html").is_file(), done.stderr
    profiles = [json.loads(line) for line in (work / "runs" / "mine" / "profiles.jsonl").read_text().splitlines()]
    assert {profile["phenotype"] for profile in profiles} == {"adult_adhd", "anxious_depression"}
    conversations = (work / "runs" / "mine" / "conversations" / "offline__screener.jsonl").read_text().splitlines()
    assert {json.loads(line)["condition"] for line in conversations} == {"custom"}


@pytest.mark.slow
def test_a_dotenv_key_and_the_vllm_recipe_in_the_installed_tool(installed, tmp_path):
    bin_dir, env = installed
    (tmp_path / ".env").write_text("GEMINI_API_KEY=only-in-dotenv\n")
    rows = json.loads(run([str(bin_dir / "intake-eval"), "models", "--json"], tmp_path, env).stdout)
    gemini = next(row for row in rows if row["alias"] == "gemini")
    assert gemini["key_set"] is True and gemini["key_source"] == ".env"
    assert gemini["input_per_1m"] is not None and gemini["price_source"] == "litellm's table"
    refused = subprocess.run([str(bin_dir / "intake-eval"), "models", "--check", "vllm/Qwen/Qwen3-8B"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "hosted_vllm/Qwen/Qwen3-8B with api_base" in refused.stderr
