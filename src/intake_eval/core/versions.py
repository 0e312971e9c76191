"""The versions of the packages a run folder's results depend on, as manifest.json records them.

They are looked up once per process: a stage saves its manifest several times (at its start, as it
goes, at its end) and a study saves it for every stage, while the installed packages cannot change
under a running process. Each call returns a fresh copy, so a caller may edit what it gets.
"""

from __future__ import annotations

import platform
from functools import cache

from intake_eval.core.schema import package_version

TRACKED_PACKAGES = ("pydantic", "litellm", "openai", "typer", "jinja2", "pandas", "matplotlib", "rapidfuzz")
NOT_INSTALLED = "not installed"


@cache
def _looked_up() -> tuple[tuple[str, str], ...]:
    from importlib import metadata

    versions = {"intake-eval": package_version(), "python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = NOT_INSTALLED
    return tuple(versions.items())


def package_versions() -> dict[str, str]:
    """intake-eval's, Python's and each tracked package's version ("not installed" when it is not)."""
    return dict(_looked_up())
