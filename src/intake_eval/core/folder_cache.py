"""A JSON value kept in a run folder beside the files it is computed from, reused while none of them changed.

``status`` reads every record to count what is done and what it cost; at 10⁵ conversations that takes most
of a minute. Its answer depends only on the folder's files, so it is kept with their signature (path, size,
modification time, inode) and reused while the signature is the same. The signature is taken before and
after computing: a file that changed meanwhile (a stage appending) leaves nothing cached. A computation
that warned (an unreadable line, a judgment skipped) is not cached either, so its warnings are shown every
time. A cache file that cannot be read or written is ignored and the value computed as before.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.store import write_text_atomic

FORMAT = 1


def signature(files: Iterable[Path]) -> list[list[Any]]:
    """(path, size, mtime in ns, inode) per file; a missing file is (path, None)."""
    out: list[list[Any]] = []
    for path in sorted(set(files)):
        try:
            info = os.stat(path)
        except FileNotFoundError:
            out.append([str(path), None])
            continue
        out.append([str(path), info.st_size, info.st_mtime_ns, info.st_ino])
    return out


def _stored(cache: Path, wanted: list[list[Any]]) -> Any:
    try:
        saved = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("signature") != wanted:
        return None
    return saved.get("value")


def cached_json(cache: Path, inputs: Callable[[], Iterable[Path]], compute: Callable[[], Any]) -> Any:
    """``compute()``'s value (JSON-shaped), from ``cache`` while the files ``inputs()`` lists are unchanged."""
    before = signature(inputs())
    value = _stored(cache, before)
    if value is not None:
        return value
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = json.loads(json.dumps(compute(), default=str))  # the cached shape, the first time too
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if not caught and signature(inputs()) == before:
        try:
            write_text_atomic(cache, json.dumps({"format": FORMAT, "signature": before, "value": value}))
        except (OSError, IntakeEvalError):  # the store names an OS error as one user-facing line
            pass  # a read-only folder: computed each time, as before
    return value
