"""Prompt templates live only in prompts/*.j2; this renders them with StrictUndefined so a missing
variable is an error, never a silently empty string."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.package_data import package_folder
from intake_eval.core.store import file_hash

PROMPTS_DIR = package_folder("prompts")


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates do not change during a run; skip a stat per render
    )


@lru_cache(maxsize=256)
def template_path(name: str) -> Path:
    path = PROMPTS_DIR / f"{name}.j2"
    if not path.exists():
        raise IntakeEvalError(f"prompt template {path} does not exist")
    return path


def render_prompt(name: str, **variables: Any) -> str:
    """Render prompts/<name>.j2. Raises IntakeEvalError naming the template and missing variable."""
    import jinja2

    template_path(name)
    try:
        return _environment().get_template(f"{name}.j2").render(**variables).strip()
    except jinja2.UndefinedError as exc:
        raise IntakeEvalError(f"prompts/{name}.j2: {exc}") from None


def prompt_hash(name: str) -> str:
    return file_hash(template_path(name))[:16]


def prompt_hashes(names: list[str] | None = None) -> dict[str, str]:
    """Provenance: sha256 (16 hex) of each template used."""
    chosen = names if names is not None else sorted(p.stem for p in PROMPTS_DIR.glob("*.j2"))
    return {name: prompt_hash(name) for name in chosen}


def available_conditions() -> list[str]:
    """Clinician conditions are the templates named clinician_<condition>.j2."""
    return sorted(p.stem.removeprefix("clinician_") for p in PROMPTS_DIR.glob("clinician_*.j2"))


def render_source(sources: dict[str, str], name: str, **variables: Any) -> str:
    """Render template ``name`` from given texts (template name → text, its includes among them) with
    ``render_prompt``'s settings: how a run folder's snapshot of the templates is rendered again."""
    import jinja2

    environment = _environment().overlay(loader=jinja2.DictLoader({f"{key}.j2": text for key, text in sources.items()}))
    try:
        return environment.get_template(f"{name}.j2").render(**variables).strip()
    except (jinja2.UndefinedError, jinja2.TemplateNotFound) as exc:
        raise IntakeEvalError(f"prompt snapshot {name}.j2: {exc.__class__.__name__}: {exc}") from None
