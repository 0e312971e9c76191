"""Peak memory and time of reading a large call ledger (core/calls.read_ledger: what `status`, `report`'s cost
table and a budget read).

    python scripts/bench_ledger.py                      # 10^5, 10^6 and 2.5 x 10^6 calls
    python scripts/bench_ledger.py --calls 100000,1000000

Each size writes a synthetic ledger shaped like llm/ledger.py's (a sent and an answer line per call, ids
``<pid>-<hex>-<n>`` over 4 processes, 3 aliases, 1 in 200 calls a 429 and 1 in 1,000 a timeout, 3 calls left in
flight by a kill so the unread requests are priced), then reads it in a child process and prints the child's
wall time, CPU time and peak RSS (os.wait4) and the billed figure. Then what `status` does with it, each in a
child process: the first status keeps the read's state beside the ledger (.record_facts.json, its size printed);
after 1,000 more calls are appended (a stage at work), the next status reads only those lines. Its billed figure
must equal a whole read's (printed beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from intake_eval.core.run_lock import RunLock
from intake_eval.core.store import RunPaths

READ = """
import sys
from pathlib import Path
from intake_eval.core.calls import read_ledger
totals = read_ledger(Path(sys.argv[1]))
print(f"{totals.billed_usd:.6f}")
"""
READ_LIVE = """
import sys
from pathlib import Path
from intake_eval.core.calls import read_ledger
from intake_eval.core.run_lock import RunLock
from intake_eval.core.store import RunPaths
path = Path(sys.argv[1])
totals = read_ledger(path, f"{RunLock.holder(RunPaths(path.parent))}-")
print(f"{totals.billed_usd:.6f}")
"""
STATUS = """
import sys
from pathlib import Path
from intake_eval.core.calls import ledger_figures
from intake_eval.core.record_facts import FolderFacts
from intake_eval.core.store import RunPaths
paths = RunPaths(Path(sys.argv[1]))
facts = FolderFacts(paths, [], keep=True)
figures = ledger_figures(paths, facts)
facts.save()
print(f"{figures['billed_usd']:.6f}")
"""


def write_ledger(path: Path, calls: int, seed: int = 1, *, first: int = 1, mode: str = "w",
                 processes: list[str] | None = None, timeouts: bool = True) -> None:
    rng = random.Random(seed)
    processes = processes or [f"{4000 + p}-{rng.getrandbits(32):08x}" for p in range(4)]
    aliases = ("kimi-k2.6", "deepseek-v3", "judge-a")
    with path.open(mode) as out:
        if mode == "w":
            out.write(json.dumps({"event": "opened", "time": "2026-11-26T00:00:00+00:00", "records_cost_usd": 0.0,
                                  "cost_known": True}) + "\n")
        for number in range(first, first + calls):
            call = f"{processes[number % len(processes)]}-{number // len(processes) + 1}"
            alias = aliases[number % 3]
            request = f"{rng.getrandbits(64):016x}"
            common = {"time": "2026-11-26T00:00:01+00:00", "stage": "run", "role": "clinician", "alias": alias,
                      "provider_model": alias, "request": request}
            out.write(json.dumps({"event": "sent", "call": call, **common, "attempt": 1, "prompt_chars": 4000,
                                  "estimate_usd": 0.0012}) + "\n")
            if number > first + calls - 4:
                continue  # in flight at a kill
            error = "rate_limited" if number % 200 == 0 else "timeout" if timeouts and number % 1000 == 1 else None
            out.write(json.dumps({"event": "answer", "call": call, **common, "attempt": 1,
                                  "status": 429 if error == "rate_limited" else 200, "error": error,
                                  "retryable": error is not None, "model": alias, "finish_reason": "stop",
                                  "usage": {"prompt_tokens": 1000, "completion_tokens": 200},
                                  "dollars": 0.0 if error == "rate_limited" else 0.0011,
                                  "cost_known": error is None, "billed": error != "rate_limited",
                                  "latency_s": 0.1 if error else 1.5, "cache_hit": False}) + "\n")


def timed_read(path: Path, script: str = READ) -> tuple[float, float, float, str]:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, env=env)
    assert child.stdout is not None
    billed = child.stdout.read().decode().strip()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"reading {path} failed")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, billed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="100000,1000000,2500000", help="comma-separated ledger sizes")
    args = parser.parse_args()
    print(f"{'calls':>10} {'ledger MB':>10} {'wall s':>7} {'CPU s':>7} {'peak MB':>8}  billed $ "
          "(status: the first, then after 1,000 more calls)")
    for calls in (int(size) for size in args.calls.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "calls.jsonl"
            write_ledger(path, calls)
            wall, cpu, peak, billed = timed_read(path)
            print(f"{calls:>10,} {path.stat().st_size / 1e6:>10.0f} {wall:>7.1f} {cpu:>7.1f} {peak:>8.0f}  {billed}")
            wall, cpu, peak, billed = timed_read(Path(folder), STATUS)
            kept_mb = (Path(folder) / ".record_facts.json").stat().st_size / 1e6
            print(f"{'':>10} {'status':>10} {wall:>7.1f} {cpu:>7.1f} {peak:>8.0f}  {billed}  (keeps {kept_mb:.1f} MB)")
            with RunLock(RunPaths(Path(folder))):  # a stage at work: its requests in flight are not billed yet
                write_ledger(path, 1000, seed=2, first=calls + 1, mode="a", processes=[f"{os.getpid()}-live"],
                             timeouts=False)
                wall, cpu, peak, billed = timed_read(Path(folder), STATUS)
                whole = timed_read(path, READ_LIVE)[3]
            print(f"{'':>10} {'+1,000':>10} {wall:>7.1f} {cpu:>7.1f} {peak:>8.0f}  {billed}  (a whole read: {whole})")
            write_ledger(path, 1000, seed=3, first=calls + 1001, mode="a")  # one times out, three are caught by a kill
            wall, cpu, peak, billed = timed_read(Path(folder), STATUS)
            whole = timed_read(path)[3]
            print(f"{'':>10} {'+1,000 (*)':>10} {wall:>7.1f} {cpu:>7.1f} {peak:>8.0f}  {billed}  (a whole read: {whole})")
    print("(*) with new requests billed unread (a timeout, a kill): the ledger is read again for their prices only when\n"
          "    an earlier answer may have priced the same request (core/hash_filter)")


if __name__ == "__main__":
    main()
