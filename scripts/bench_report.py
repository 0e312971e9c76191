"""Benchmark `intake-eval report` on a synthetic study of N conversations (default 10,000).

    .venv/bin/python scripts/bench_report.py [--conversations 10000] [--clinicians 5] [--keep DIR]

Synthesizes profiles, conversations and two judges' judgments (real records, written with the
store), then times the report twice: a cold run (metrics/*.csv computed first, as after a fresh
`judge`) and a warm run (CSVs up to date). Prints per-step timings and output sizes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.helpers.report_runs import synth_run  # noqa: E402

CLINICIANS = ("offline/screener", "offline/anchored", "llama-3.3-70b", "deepseek-v3", "kimi-k2.6", "qwen3-8b",
              "llama-3.1-8b")


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--clinicians", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the run here and keep it (default: a temp dir, removed)")
    args = parser.parse_args()

    from intake_eval.report.build import build_report

    clinicians = CLINICIANS[: args.clinicians]
    n_profiles = max(1, args.conversations // len(clinicians))
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    root = base / "bench"
    if root.exists():
        shutil.rmtree(root)
    started = time.perf_counter()
    paths = synth_run(root, n_profiles=n_profiles, clinicians=clinicians, failures=2, judge_errors=2)
    print(f"synthesized {n_profiles * len(clinicians):,} conversations × 2 judges in {time.perf_counter() - started:.1f} s "
          f"({_size(root) / 1e6:.0f} MB of JSONL)")
    for label in ("cold (computes metrics/*.csv first)", "warm (metrics up to date)"):
        started = time.perf_counter()
        result = build_report(root, progress=None)
        elapsed = time.perf_counter() - started
        steps = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
        print(f"report {label}: {elapsed:.1f} s  [{steps}]")
    shards = list(paths.report_shards_dir.glob("*.js"))
    print(f"index.html {paths.report_index.stat().st_size / 1e6:.2f} MB; {len(shards)} transcript shards, "
          f"{_size(paths.report_shards_dir) / 1e6:.0f} MB total, largest {max(s.stat().st_size for s in shards) / 1e3:.0f} kB")
    if not args.keep:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
