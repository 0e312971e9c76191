"""Benchmark: generate 10,000 offline profiles (target: under 20 s on this machine).

Runs the real CLI in a subprocess (`intake-eval generate --n 10000 --weighted --seed 1` into a
temporary run folder) and reports the wall time, then a resume pass (everything on disk: should
be near-instant). Usage: .venv/bin/python scripts/bench_generate.py [--n N]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 20.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one CLI run. CPU time shows the cost on a busy machine too."""
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_MODE="PRODUCTION")
    cpu, started = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "intake_eval.cli", *args], check=True, env=env, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "bench"
        args = ["generate", "--n", str(options.n), "--weighted", "--seed", "1", "--run-dir", str(run_dir)]
        first, first_cpu = run(args)
        lines = sum(1 for _ in open(run_dir / "profiles.jsonl", encoding="utf-8"))
        size_mb = (run_dir / "profiles.jsonl").stat().st_size / 1e6
        again, _ = run(args)
    verdict = "OK" if first < TARGET_S else "SLOWER THAN TARGET"
    load = os.getloadavg()[0]
    print(f"generate --n {options.n} (offline/generator): {first:.1f} s wall, {first_cpu:.1f} s CPU, {lines} profiles, "
          f"{size_mb:.1f} MB [{verdict}: target {TARGET_S:.0f} s for 10,000; load average {load:.1f} "
          f"on {os.cpu_count()} CPUs]")
    print(f"  {first / max(lines, 1) * 1e3:.2f} ms per profile; resume pass with everything on disk: {again:.1f} s")


if __name__ == "__main__":
    main()
