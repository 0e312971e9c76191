"""Where the shipped data lives: the prompts, phenotypes and configs travel inside the package and
are found with importlib.resources, so an editable checkout, a wheel and a pipx install read the same
files from any working directory."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def package_folder(name: str) -> Path:
    """The shipped folder `name` (prompts, phenotypes, configs) inside the installed package."""
    return Path(str(files("intake_eval").joinpath(name)))
