"""A `.env` file in the working folder, read the way inspect_ai and most LLM tools read it.

Each ``NAME=value`` line sets ``NAME`` unless the real environment already has it (the real
environment wins). The loader returns the names it set, so `intake-eval models` can say where
each key came from; values are never returned, printed or logged.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_FILE_NAME = ".env"


def load_env_file(folder: Path | None = None) -> frozenset[str]:
    """Set the variables of ``<folder>/.env`` (default: the working folder) that the environment
    lacks; return their names. A missing file sets nothing."""
    path = (folder if folder is not None else Path.cwd()) / ENV_FILE_NAME
    if not path.is_file():
        return frozenset()
    from dotenv import dotenv_values

    added = set()
    for name, value in dotenv_values(path).items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            added.add(name)
    return frozenset(added)


def key_source(name: str, from_env_file: frozenset[str]) -> str | None:
    """'.env' when the loader set ``name``, 'environment' when it was set before, None if unset."""
    if not os.environ.get(name, "").strip():
        return None
    return ENV_FILE_NAME if name in from_env_file else "environment"
