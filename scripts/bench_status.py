"""Time `intake-eval status` on a run folder: the full read, the first status after the stages kept
their record facts, and status while a stage appends to the record files.

    python scripts/bench_status.py RUN_DIR [--keep] [--append] [--supersede] [--live N] [--check]

Without ``--keep`` it times status with no kept facts (every record read; status then keeps them).
With ``--keep`` it first keeps every record file's facts the way the stages do as they finish (one pass
per file, every reader that claims it: what `run`, `judge` and `generate` keep), printing that pass's
time and peak RSS, then times status. With ``--append`` it then appends one record to every record file
(a copy of its last line under a new key: what a stage writing now adds) and times status again: the
first folds each file's tail into the kept facts, the second finds them kept. ``--supersede`` instead
appends a copy of each file's last line under the same key (a retried record): such a tail supersedes a
kept line, so status reads those files whole. ``--live N`` then times status N times while a child
process holds the run lock and appends records under new keys (each line in two writes, so a status may
find one half-written), as a stage does. The size of the kept-facts file is printed after each step.
``--check`` ends by comparing `status --json` from the kept facts with a full read of every record.

RUN_DIR is written to (``.record_facts.json``; with ``--append``, ``--supersede`` or ``--live``, the record files):
use a copy. ``cp -al`` is enough without them; with them, copy the record files for real (a record file
with another hard link is refused, so a reference run is never appended to).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

FACTS_FILE = ".record_facts.json"  # core/record_facts.FACTS_FILE (not imported: the timed status imports it)


def record_files(root: Path) -> list[Path]:
    """Every record file of the folder whose facts the stages keep."""
    from intake_eval.core.store import RunPaths

    paths = RunPaths(root)
    files = [paths.profiles, paths.render_failures, *paths.conversation_files(), *paths.judgment_files(),
             *(sorted(paths.qc_dir.glob("patient_*.jsonl")) if paths.qc_dir.is_dir() else [])]
    return [path for path in files if path.exists()]


def keep_facts(root: Path) -> None:
    """What the stages keep as they finish, for every record file of the folder."""
    from intake_eval.core.calls import ledger_figures
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds

    paths = RunPaths(root)
    kinds = stage_kinds()
    (root / FACTS_FILE).unlink(missing_ok=True)  # every file read, as by the stages that wrote them
    facts = kinds.folder_facts(paths, keep=True)
    for path in record_files(root):
        for reader in kinds.readers():
            if reader.claims(paths, path):
                facts.summary(reader.name, path)  # reads the file once for every reader that claims it
                break
    ledger_figures(paths, facts)
    facts.save()


def _last_line(path: Path) -> bytes:
    """The file's last whole line (read from its end)."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        block = 1 << 16
        while True:
            start = max(0, size - block)
            handle.seek(start)
            text = handle.read(size - start)
            lines = text.rstrip(b"\n").rsplit(b"\n", 1)
            if len(lines) == 2 or start == 0:
                return lines[-1] + b"\n"
            block *= 4


def append_one_record(root: Path, *, same_key: bool) -> int:
    """Append to every record file a copy of its last line, under a new key unless ``same_key``; the
    number of files appended to. A file with another hard link (a reference run) is refused."""
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds

    paths = RunPaths(root)
    readers = stage_kinds().readers()
    appended = 0
    for path in record_files(root):
        if path.stat().st_nlink > 1:
            raise SystemExit(f"{path} has another hard link: copy the record files for real before appending")
        keys = {reader.key for reader in readers if reader.claims(paths, path)}
        if not keys or path.stat().st_size == 0:
            continue
        record = json.loads(_last_line(path))
        if not same_key:
            for key in keys:
                if isinstance(record.get(key), str):
                    record[key] += f"~appended-{time.time_ns()}"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        appended += 1
    return appended


def live_stage(root: Path, stop: Path) -> None:
    """What a stage writing now does, until ``stop`` exists: hold the run lock and append records under new
    keys to the record files in turn, each line in two writes (a status may see it half-written)."""
    from intake_eval.core.run_lock import RunLock
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds

    paths = RunPaths(root)
    readers = stage_kinds().readers()
    targets = []
    for path in record_files(root):
        if path.stat().st_nlink > 1:
            raise SystemExit(f"{path} has another hard link: copy the record files for real before appending")
        keys = {reader.key for reader in readers if reader.claims(paths, path)}
        if keys and path.stat().st_size:
            targets.append((path, keys, json.loads(_last_line(path))))
    with RunLock(paths):
        print("stage appending", flush=True)
        written = 0
        while not stop.exists():
            path, keys, record = targets[written % len(targets)]
            for key in keys:
                if isinstance(record.get(key), str):
                    record[key] = record[key].split("~")[0] + f"~live-{os.getpid()}-{written}"
            line = (json.dumps(record) + "\n").encode()
            with path.open("ab") as handle:
                handle.write(line[:len(line) // 2])
                handle.flush()
                time.sleep(0.002)
                handle.write(line[len(line) // 2:])
            written += 1
            time.sleep(0.01)
    print(f"stage appended {written} records", flush=True)


def time_while_a_stage_appends(root: Path, times: int) -> None:
    """Time status ``times`` times while a child process appends as a stage does."""
    stop = root / ".bench-stop"
    stop.unlink(missing_ok=True)
    stage = subprocess.Popen([sys.executable, __file__, str(root), "--live-stage"], stdout=subprocess.PIPE, text=True)
    try:
        assert stage.stdout is not None
        stage.stdout.readline()  # it holds the lock
        time.sleep(1.0)
        for attempt in range(1, times + 1):
            wall, cpu, peak = timed_status(root)
            print(f"status #{attempt} while a stage appends: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS "
                  f"{peak:.0f} MB; kept facts {_facts_size(root)}", flush=True)
            time.sleep(1.0)
    finally:
        stop.touch()
        print(stage.communicate()[0].strip(), flush=True)
        stop.unlink(missing_ok=True)


def same_as_a_full_read(root: Path) -> bool:
    """Whether `status --json` from the kept facts prints exactly what it prints with none kept (every
    record read); the kept facts are put back after."""
    def shown() -> bytes:
        return subprocess.run([sys.executable, "-m", "intake_eval", "status", "--json", "--run-dir", str(root)],
                              check=True, capture_output=True).stdout

    kept = root / FACTS_FILE
    folded = shown()
    aside = root / f"{FACTS_FILE}.bench"
    kept.replace(aside)
    try:
        return shown() == folded
    finally:
        aside.replace(kept)


def timed_status(root: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one `intake-eval status` in its own process."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "intake_eval", "status", "--run-dir", str(root)],
                               stdout=subprocess.DEVNULL)
    _pid, code, usage = os.wait4(process.pid, 0)
    if code:
        raise SystemExit(f"status failed with {code}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _facts_size(root: Path) -> str:
    path = root / FACTS_FILE
    return f"{path.stat().st_size / 1e6:.2f} MB" if path.exists() else "none"


def _time_twice(root: Path, what: str) -> None:
    for attempt in (1, 2):
        wall, cpu, peak = timed_status(root)
        print(f"status #{attempt} {what}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {peak:.0f} MB; "
              f"kept facts {_facts_size(root)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the facts as the stages do, then time status")
    parser.add_argument("--append", action="store_true",
                        help="then append one record (a new key) to every record file and time status again")
    parser.add_argument("--supersede", action="store_true",
                        help="then append one record (a key already kept) to every record file and time status")
    parser.add_argument("--live", type=int, default=0, metavar="N",
                        help="then time status N times while a child process holds the run lock and appends")
    parser.add_argument("--check", action="store_true",
                        help="at the end, check that status from the kept facts equals a full read (reads every record)")
    parser.add_argument("--keep-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--live-stage", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.live_stage:
        live_stage(args.run_dir, args.run_dir / ".bench-stop")
        return
    if args.keep_only:
        started = time.perf_counter()
        keep_facts(args.run_dir)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"facts kept as the stages keep them: {time.perf_counter() - started:.1f} s, peak RSS {peak:.0f} MB; "
              f"kept facts {_facts_size(args.run_dir)}", flush=True)
        return
    if args.keep:  # in a child, so this process stays small (a child's peak RSS starts at its parent's)
        subprocess.run([sys.executable, __file__, str(args.run_dir), "--keep-only"], check=True)
    kept = args.keep or (args.run_dir / FACTS_FILE).exists()
    _time_twice(args.run_dir, "(as kept)" if kept else "(no kept facts, then as kept)")
    if args.append:
        files = append_one_record(args.run_dir, same_key=False)
        _time_twice(args.run_dir, f"after one new record appended to each of {files} files")
    if args.supersede:
        files = append_one_record(args.run_dir, same_key=True)
        _time_twice(args.run_dir, f"after one superseding record appended to each of {files} files")
    if args.live:
        time_while_a_stage_appends(args.run_dir, args.live)
    if args.check:
        print(f"status from the kept facts == a full read: {same_as_a_full_read(args.run_dir)}", flush=True)


if __name__ == "__main__":
    main()
