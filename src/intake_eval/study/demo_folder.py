"""The demo's run folder: a fresh start that never destroys a user's files.

`intake-eval demo --run-dir X` writes a marker file into a folder it creates. On a later demo a
folder holding that marker is reset by moving its contents into ``superseded/demo-<time>/``
(nothing is deleted: a note the user dropped there survives). Any other non-empty folder — a
paid study, a run made by hand, someone's documents — is refused with one line.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.store import RunLock, RunPaths

MARKER = ".made-by-intake-eval-demo"
MARKER_TEXT = "This run folder was made by `intake-eval demo`; a later demo moves its contents to superseded/.\n"


def prepare_demo_folder(run_dir: Path) -> None:
    """Leave ``run_dir`` empty of earlier demo output (moved aside) with the marker in place, or refuse."""
    paths = RunPaths(run_dir)
    if run_dir.is_symlink() or (run_dir.exists() and not run_dir.is_dir()):
        raise IntakeEvalError(f"--run-dir {run_dir}: exists and is not a folder")
    if RunLock.is_held(paths):
        RunLock(paths).acquire()  # raises, naming the process that holds the folder
    if run_dir.exists() and any(run_dir.iterdir()):
        marker = run_dir / MARKER
        if marker.is_symlink() or not marker.is_file():
            raise IntakeEvalError(
                f"--run-dir {run_dir}: this folder was not made by `intake-eval demo` and is not empty; "
                "the demo never touches it: choose an empty or new path")
        with RunLock(paths):  # refuse a folder another process is using
            _move_aside(run_dir, paths.superseded_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).write_text(MARKER_TEXT, encoding="utf-8")


def _move_aside(run_dir: Path, superseded: Path) -> None:
    keep = {superseded.name, ".lock", MARKER}  # the lock is held while we move; the marker is rewritten
    earlier = [entry for entry in sorted(os.listdir(run_dir)) if entry not in keep]
    if not earlier:
        return
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, suffix = superseded / f"demo-{stamp}", 1
    while target.exists():
        suffix += 1
        target = superseded / f"demo-{stamp}-{suffix}"
    target.mkdir(parents=True)
    for entry in earlier:
        shutil.move(str(run_dir / entry), str(target / entry))
