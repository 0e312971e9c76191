"""Filesystem faults on the run folder (read-only, full disk, a file where a folder belongs, no
permission) as one line naming the path and the cause, instead of an OSError traceback.

``filesystem_errors()`` wraps every command once (the CLI's group); the store names the file of
a failed write (``named_os_error``) and removes its temporary files, so the line can say which
file and nothing half-made stays behind.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from intake_eval.core.errors import IntakeEvalError

CAUSES = {
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOTDIR: "not a directory",
    errno.EISDIR: "is a directory, where a file belongs",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EEXIST: "already exists and is not a directory",
    errno.ENAMETOOLONG: "file name too long",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EMFILE: "too many open files",
    errno.EIO: "input/output error",
}

# sqlite reports the same faults in words of its own (the response cache lives in the run folder)
SQLITE_CAUSES = (
    ("readonly database", CAUSES[errno.EROFS]),
    ("disk is full", CAUSES[errno.ENOSPC]),
    ("disk i/o error", CAUSES[errno.EIO]),
    ("unable to open database file", "cannot open the database file"),
)


def blocking_file(path: Path) -> Path | None:
    """The nearest ancestor of ``path`` that exists but is a file (so ``path`` cannot be made)."""
    for parent in [path, *path.parents]:
        if parent.exists() or parent.is_symlink():
            return parent if not parent.is_dir() and parent != path else None
    return None


def describe_os_error(error: OSError) -> str | None:
    """One line for a filesystem fault, or None for OS errors that are not about files (network...)."""
    cause = CAUSES.get(error.errno or -1)
    name = error.filename
    if cause is None or (name is None and error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)):
        return None
    if name is None:
        return f"cannot write to the run folder: {cause}; free space or fix the folder, then rerun (what is written is kept)"
    path = Path(os.fsdecode(name))
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        blocker = blocking_file(path) or (path if path.exists() and not path.is_dir() else None)
        if blocker is not None:
            needed = f" (needed for {path})" if blocker != path else ""
            return f"{blocker}: is a file, not a folder{needed}; move it aside or choose another --run-dir"
    hint = {errno.ENOSPC: "free space, then rerun (what is written is kept)",
            errno.EDQUOT: "free space, then rerun (what is written is kept)",
            errno.EROFS: "make it writable or choose another --run-dir",
            errno.EACCES: "fix its permissions or choose another --run-dir",
            errno.EPERM: "fix its permissions or choose another --run-dir",
            errno.EISDIR: "move that folder aside, then rerun"}.get(error.errno or 0, "fix it, then rerun")
    return f"{path}: {cause}; {hint}"


def describe_sqlite_error(error: sqlite3.OperationalError) -> str | None:
    text = str(error).lower()
    for marker, cause in SQLITE_CAUSES:
        if marker in text:
            return f"response cache (cache.sqlite in the run folder): {cause}; fix the run folder, then rerun"
    return None


def _first_fault(error: BaseException) -> str | None:
    """The message of the first filesystem fault in ``error``, its exception groups or its causes."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            message = describe_os_error(current)
            if message is not None:
                return message
        if isinstance(current, sqlite3.OperationalError):
            message = describe_sqlite_error(current)
            if message is not None:
                return message
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


@contextmanager
def filesystem_errors() -> Iterator[None]:
    """Turn a filesystem fault anywhere below into one IntakeEvalError line (exit 2)."""
    try:
        yield
    except IntakeEvalError:
        raise
    except (OSError, sqlite3.OperationalError, BaseExceptionGroup) as error:
        message = _first_fault(error)
        if message is None:
            raise
        raise IntakeEvalError(message) from None


@contextmanager
def named_os_error(path: Path) -> Iterator[None]:
    """An OSError without a file name (os.write on a full disk) re-raised naming ``path``."""
    try:
        yield
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise OSError(error.errno, os.strerror(error.errno), str(path)) from None


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def as_if_made_by_mkdir(path: Path) -> Path:
    """A tempfile.mkdtemp folder (mode 0700) given the mode mkdir would give it (0777 minus the
    umask), so a folder swapped into place is readable like every other generated file."""
    os.chmod(path, 0o777 & ~current_umask())
    return path


def remove_quietly(path: Path) -> None:
    """Delete a temporary file of a failed write (it may never have been created)."""
    try:
        path.unlink()
    except OSError:
        pass
