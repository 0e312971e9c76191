"""Prompt templates (*.j2) and the offline participants' phrase files (*.yaml): where they are found
and how they are rendered.

Templates are found in the user's prompts folder first (``--prompts DIR``, a study's
``prompts_dir:``), then in the shipped folder inside the package: a template the user's folder
holds wins, every other one comes from the package. Includes (``{% include "_x.j2" %}``) follow the
same order. The user's folder is set for one command with ``use_prompts(folder)``; it is a context
variable, not module state, because the templates are rendered deep inside the stages (and their
asyncio tasks inherit it) while the folder is a property of one invocation.

Rendering uses StrictUndefined so a missing variable is an error, never a silently empty string.
The config guard hashes template contents (``prompt_hashes``), so moving a folder changes nothing
and editing a template is a config change.

Compiling a template is most of what rendering it costs, and it happens before a command's first
request can leave; jinja's own bytecode cache keeps each compiled template in the user's cache folder
(``core.user_cache``), keyed by the template's name and checked against its source, so an edited
template is compiled again and the text rendered is the same with the cache or without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.package_data import package_folder
from intake_eval.core.store import file_hash
from intake_eval.core.user_cache import cache_folder

if TYPE_CHECKING:
    import jinja2

PROMPTS_DIR = package_folder("prompts")  # the shipped templates
TEMPLATE_SUFFIX = ".j2"

_USER_PROMPTS: ContextVar[Path | None] = ContextVar("intake_eval_user_prompts", default=None)


def check_prompts_folder(folder: Path, label: str = "--prompts") -> Path:
    """The user's prompts folder, resolved; one error line when it is missing or holds no template."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise IntakeEvalError(f"{label} {folder}: is not a folder of prompt templates (*.j2)")
    if not any(folder.glob(f"*{TEMPLATE_SUFFIX}")) and not any(folder.glob("*.yaml")):
        raise IntakeEvalError(f"{label} {folder}: holds no template (*.j2) or phrase file (*.yaml); "
                              "`intake-eval init DIR` writes editable copies")
    return folder.resolve()


@contextmanager
def use_prompts(folder: Path | None, label: str = "--prompts") -> Iterator[Path | None]:
    """Within the block, templates in ``folder`` win over the shipped ones (None: shipped only)."""
    checked = check_prompts_folder(folder, label) if folder is not None else None
    token = _USER_PROMPTS.set(checked)
    try:
        yield checked
    finally:
        _USER_PROMPTS.reset(token)


def user_prompts_folder() -> Path | None:
    """The user's prompts folder in effect, or None."""
    return _USER_PROMPTS.get()


def prompt_folders() -> tuple[Path, ...]:
    """Where templates are looked up, first match wins: the user's folder, then the package's."""
    user = _USER_PROMPTS.get()
    return (user, PROMPTS_DIR) if user is not None else (PROMPTS_DIR,)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """jinja's file bytecode cache in the user's cache folder (one folder per jinja version), or None when
    that folder cannot be made; a compiled template that cannot be written there is simply compiled again
    next time."""
    import jinja2

    class QuietFileCache(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                return

    folder = cache_folder() / f"templates-jinja2-{jinja2.__version__}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return QuietFileCache(str(folder))


@lru_cache(maxsize=8)
def _environment(folders: tuple[Path, ...]) -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        bytecode_cache=_bytecode_cache(),
        loader=jinja2.FileSystemLoader([str(folder) for folder in folders]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates do not change during a run; skip a stat per render
    )


def prompt_file(filename: str) -> Path:
    """The file ``filename`` (a template or a phrase file) as the lookup order finds it."""
    return _find(filename, prompt_folders())


@lru_cache(maxsize=512)
def _find(filename: str, folders: tuple[Path, ...]) -> Path:
    for folder in folders:
        path = folder / filename
        if path.is_file():
            return path
    where = " or ".join(str(folder) for folder in folders)
    raise IntakeEvalError(f"prompt template {filename} does not exist in {where}")


def template_path(name: str) -> Path:
    """The file prompts/<name>.j2 renders from: the user's copy when there is one, else the shipped."""
    return prompt_file(f"{name}{TEMPLATE_SUFFIX}")


def template_names(prefix: str = "") -> list[str]:
    """Every template name (without .j2) starting with ``prefix``, over all folders."""
    return sorted({path.stem for folder in prompt_folders() for path in folder.glob(f"{prefix}*{TEMPLATE_SUFFIX}")})


def render_prompt(name: str, **variables: Any) -> str:
    """Render prompts/<name>.j2. Raises IntakeEvalError naming the template and missing variable."""
    import jinja2

    folders = prompt_folders()
    path = template_path(name)
    try:
        return _environment(folders).get_template(path.name).render(**variables).strip()
    except jinja2.UndefinedError as exc:
        raise IntakeEvalError(f"{path}: {exc}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise IntakeEvalError(f"{exc.filename or path}: line {exc.lineno}: {exc.message}") from None


def prompt_hash(name: str) -> str:
    return file_hash(template_path(name))[:16]


def prompt_hashes(names: list[str] | None = None) -> dict[str, str]:
    """Provenance: sha256 (16 hex) of each template used (its contents, wherever it was found)."""
    chosen = names if names is not None else template_names()
    return {name: prompt_hash(name) for name in chosen}


def available_conditions() -> list[str]:
    """Clinician conditions are the templates named clinician_<condition>.j2."""
    return [name.removeprefix("clinician_") for name in template_names("clinician_")]


def render_source(sources: dict[str, str], name: str, **variables: Any) -> str:
    """Render template ``name`` from given texts (template name → text, its includes among them) with
    ``render_prompt``'s settings: how a run folder's snapshot of the templates is rendered again."""
    import jinja2

    environment = _environment(prompt_folders()).overlay(loader=jinja2.DictLoader({f"{key}.j2": text for key, text in sources.items()}))
    try:
        return environment.get_template(f"{name}.j2").render(**variables).strip()
    except (jinja2.UndefinedError, jinja2.TemplateNotFound) as exc:
        raise IntakeEvalError(f"prompt snapshot {name}.j2: {exc.__class__.__name__}: {exc}") from None
