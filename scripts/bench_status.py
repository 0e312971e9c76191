"""Time `intake-eval status` on a run folder: the full read, and the first status after the stages kept
their record facts.

    python scripts/bench_status.py RUN_DIR [--keep]

Without ``--keep`` it times status with no kept facts (every record read; status then keeps them).
With ``--keep`` it first keeps every record file's facts the way the stages do as they finish (one pass
per file, every reader that claims it: what `run`, `judge` and `generate` keep), printing that pass's
time and peak RSS, then times status. RUN_DIR is written to (``.record_facts.json``): use a copy
(``cp -al`` is enough: nothing here writes a record file).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def keep_facts(root: Path) -> None:
    """What the stages keep as they finish, for every record file of the folder."""
    from intake_eval.core.calls import ledger_figures
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds

    paths = RunPaths(root)
    kinds = stage_kinds()
    facts = kinds.folder_facts(paths, keep=True)
    files = [paths.profiles, paths.render_failures, *paths.conversation_files(), *paths.judgment_files(),
             *(sorted(paths.qc_dir.glob("patient_*.jsonl")) if paths.qc_dir.is_dir() else [])]
    for path in files:
        for reader in kinds.readers():
            if reader.claims(paths, path):
                facts.summary(reader.name, path)  # reads the file once for every reader that claims it
                break
    ledger_figures(paths, facts)
    facts.save()


def timed_status(root: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one `intake-eval status` in its own process."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "intake_eval", "status", "--run-dir", str(root)],
                               stdout=subprocess.DEVNULL)
    _pid, code, usage = os.wait4(process.pid, 0)
    if code:
        raise SystemExit(f"status failed with {code}")
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the facts as the stages do, then time status")
    args = parser.parse_args()
    if args.keep:
        started = time.perf_counter()
        keep_facts(args.run_dir)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"facts kept as the stages keep them: {time.perf_counter() - started:.1f} s, peak RSS {peak:.0f} MB")
    for attempt in (1, 2):
        wall, peak = timed_status(args.run_dir)
        print(f"status #{attempt}: {wall:.2f} s wall, peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
