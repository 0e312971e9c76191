#!/usr/bin/env python3
"""Every real stage of a study, end to end on the offline participants, as the run grows (10³ … 10⁵ conversations).

    .venv/bin/python scripts/bench_pipeline.py                        # 1,000 and 10,000 conversations
    .venv/bin/python scripts/bench_pipeline.py --sizes 100000 --keep DIR

Where scripts/bench_scale grows synthetic records to time the steps after the model calls (metrics, report,
status), this one runs the commands a user runs, each in its own subprocess: `generate` (profiles = conversations ÷ 5,
stratified, the offline generator), `run` (five clinician aliases on the offline clinicians, the offline patient,
tracked), `judge` (two judges: offline/judge and an alias of it, per-turn), `report`, `status` (right after `judge`:
the stages kept their record files' facts) and `status` with those facts removed (every record read). Each line
prints wall time, CPU time and peak memory (max RSS of that child alone, from os.wait4) with the load average: the
machine is shared, so CPU time says more than wall time. The offline participants answer instantly, so what is timed
is the tool itself: scheduling, records, the end-of-stage compaction and metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
CLI = [PYTHON, "-m", "intake_eval.cli"]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
CLINICIANS = {"clin-1": "offline/screener", "clin-2": "offline/drifting", "clin-3": "offline/anchored",
              "clin-4": "offline/screener", "clin-5": "offline/drifting"}
JUDGES = {"offline/judge": None, "judge-b": "offline/judge"}
FACTS_FILE = ".record_facts.json"  # core/record_facts.py: the record files' facts kept in the run folder
STAGES = ("generate", "run", "judge", "report", "status", "status-unkept")


def timed(cmd: list[str]) -> dict[str, float]:
    """Run cmd; wall seconds, CPU seconds and max RSS (MB) of that child alone. Fails loudly."""
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        started = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=out_file, stderr=err_file)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err_file.seek(0)
            sys.exit(f"bench_pipeline: {' '.join(cmd[3:6])} … failed:\n{err_file.read().decode(errors='replace')[-3000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_mb": usage.ru_maxrss / 1024}


def models_file(base: Path) -> Path:
    path = base / "bench-models.yaml"
    aliases = {**CLINICIANS, **{alias: model for alias, model in JUDGES.items() if model}}
    path.write_text("models:\n" + "".join(f"  {alias}: {{model: {model}}}\n" for alias, model in aliases.items()))
    return path


def command(stage: str, root: Path, conversations: int, models: Path) -> list[str]:
    common = ["--run-dir", str(root), "--models", str(models)]
    if stage == "generate":
        return [*CLI, "generate", "--n", str(max(1, conversations // len(CLINICIANS))), "--seed", "7",
                "--concurrency", "64", *common]
    if stage == "run":
        return [*CLI, "run", *sum((["--clinician", alias] for alias in CLINICIANS), []), "--patient", "offline/patient",
                "--patient-mode", "tracked", "--concurrency", "64", *common]
    if stage == "judge":
        return [*CLI, "judge", *sum((["--judge", alias] for alias in JUDGES), []), "--concurrency", "64", *common]
    if stage == "report":
        return [*CLI, "report", "--run-dir", str(root), "--quiet"]
    if stage == "status-unkept":
        (root / FACTS_FILE).unlink(missing_ok=True)
    return [*CLI, "status", "--run-dir", str(root)]


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6 if path.exists() else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="conversations per run, comma-separated")
    parser.add_argument("--keep", type=Path, help="make the run folders here and keep them (default: a temp dir, removed)")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    base.mkdir(parents=True, exist_ok=True)
    models = models_file(base)
    results = []
    print(f"{'conversations':>13} {'stage':<13} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}  load avg (1 min)", flush=True)
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            root = base / f"pipeline-{size}"
            if root.exists():
                sys.exit(f"bench_pipeline: {root} exists (its stages would resume, not run); remove it or choose --keep")
            for stage in STAGES:
                load = os.getloadavg()[0]
                figures = timed(command(stage, root, size, models))
                results.append({"conversations": size, "judges": len(JUDGES), "stage": stage, "load_avg": load,
                                **figures})
                print(f"{size:>13,} {stage:<13} {figures['wall_s']:>8.1f} {figures['cpu_s']:>8.1f} "
                      f"{figures['max_rss_mb']:>8.0f}  {load:.2f}", flush=True)
            sizes_mb = {"records_mb": folder_mb(root / "conversations") + folder_mb(root / "judgments"),
                        "metrics_mb": folder_mb(root / "metrics"), "report_mb": folder_mb(root / "report")}
            results.append({"conversations": size, "stage": "sizes", **sizes_mb})
            print(f"{size:>13,} sizes         records {sizes_mb['records_mb']:.0f} MB, metrics/ "
                  f"{sizes_mb['metrics_mb']:.0f} MB, report/ {sizes_mb['report_mb']:.0f} MB", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
