"""Which source made a run: the git commit of the checkout intake-eval runs from, and whether its
tracked files had uncommitted changes.

Only a checkout has a revision: the package's own ``__init__.py`` must be a file git tracks, so an
install from a wheel (even one inside a virtualenv that sits in some checkout) has none, and
``source_revision`` returns None. Git missing or failing means the same: no revision is claimed.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

GIT_TIMEOUT_S = 10


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True,
                          timeout=GIT_TIMEOUT_S).stdout.strip()


def source_revision(package_dir: Path) -> dict[str, object] | None:
    """``{"commit": <40 hex>, "dirty": bool}`` when ``package_dir`` is tracked in a git checkout, else None.
    ``dirty``: a tracked file of the checkout differs from the commit (untracked files do not count)."""
    try:
        _git(package_dir, "ls-files", "--error-unmatch", "__init__.py")
        commit = _git(package_dir, "rev-parse", "HEAD")
        top = Path(_git(package_dir, "rev-parse", "--show-toplevel"))
        dirty = bool(_git(top, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


@lru_cache(maxsize=1)
def running_source_revision() -> dict[str, object] | None:
    """The revision of the intake-eval this process runs (asked once per process)."""
    package = Path(__file__).resolve().parents[1]  # intake_eval/, found without importing the package face
    return source_revision(package)
