"""Run-folder files are never written through symbolic links: a link would let writes land outside
the folder (or truncate what it points at). Checked by name, then opened with O_NOFOLLOW, which
closes the race between the check and the open."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from intake_eval.core.errors import IntakeEvalError


def refuse_symlink(path: Path, what: str) -> None:
    """A run-folder file that is a symlink would let writes land outside the folder (or truncate
    what it points at): refused by name. Opening with O_NOFOLLOW closes the race after this check."""
    if path.is_symlink():
        raise IntakeEvalError(f"{path}: the {what} is a symbolic link; replace it with a regular file "
                              "(intake-eval never writes through links)")


def open_no_follow(path: Path, flags: int, what: str) -> int:
    refuse_symlink(path, what)
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:  # made a link between the check and the open
            raise IntakeEvalError(f"{path}: the {what} is a symbolic link; replace it with a regular file") from None
        raise
