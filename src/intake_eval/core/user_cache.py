"""The user's cache folder for what intake-eval derives from installed files and can always make again
(litellm's price extract, compiled prompt templates): ``$XDG_CACHE_HOME/intake-eval/``, by default
``~/.cache/intake-eval/``. Nothing in it is provenance: deleting it only costs the next start its time,
and an unwritable one only means each process makes what it needs again."""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder() -> Path:
    root = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(root) if root else Path.home() / ".cache") / "intake-eval"
