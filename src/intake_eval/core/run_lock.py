"""The run lock: one process at a time works in a run folder. The lock file holds the owner's pid so
a second process can name it; the OS releases a killed holder's lock."""

from __future__ import annotations

import fcntl
import os

from intake_eval.core.errors import RunLockedError
from intake_eval.core.no_follow import open_no_follow
from intake_eval.core.store import RunPaths


class RunLock:
    """An exclusive lock on a run folder, holding the owner's pid so a second process can name it."""

    def __init__(self, paths: RunPaths):
        self.paths = paths
        self._fd = -1

    def acquire(self) -> "RunLock":
        self.paths.root.mkdir(parents=True, exist_ok=True)
        fd = open_no_follow(self.paths.lock, os.O_RDWR | os.O_CREAT, "lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunLockedError(
                f"run folder {self.paths.root} is in use by pid {owner}; wait for it or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "RunLock":
        return self.acquire()

    @staticmethod
    def _held(paths: RunPaths) -> str | None:
        """What the lock file says (its holder's pid as written) while a live process holds it, else None."""
        if not paths.lock.exists():
            return None
        fd = open_no_follow(paths.lock, os.O_RDONLY, "lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 64).decode("ascii", errors="replace").strip()
        finally:
            os.close(fd)
        return None

    @staticmethod
    def is_held(paths: RunPaths) -> bool:
        """Whether a live process holds the folder's lock (a killed holder's lock is released by the OS)."""
        return RunLock._held(paths) is not None

    @staticmethod
    def holder(paths: RunPaths) -> int | None:
        """The pid of the live process holding the folder's lock (None: none holds it, or it wrote no pid yet)."""
        owner = RunLock._held(paths)
        return int(owner) if owner and owner.isdigit() and owner.isascii() else None

    def __exit__(self, *exc: object) -> None:
        self.release()
