"""Wall time of `intake-eval run` for the study's size: 108 profiles × 5 clinicians = 540 conversations.

    .venv/bin/python scripts/bench_run.py [--profiles 108] [--concurrency 64] [--delay 0.5] [--skip-server] [--skip-offline]

(a) Every clinician alias and the patient point at a loopback OpenAI-compatible server (in a
    child process) that answers every call after --delay seconds. A prompted-mode conversation
    is 25 sequential calls (opening + 12 × clinician/patient), so the critical-path bound is
    ⌈540 ÷ 64⌉ waves × 25 × 0.5 s ≈ 112 s. Target: within 1.3× of it.
(b) The same 540 conversations on the offline participants (offline/screener, offline/anchored
    and three more aliases mapped onto them). Target: under 30 s.

Each run is the real CLI in a subprocess, into a fresh run folder, with profiles made by the
generate pipeline (sampling + the offline generator's render).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLI = [str(ROOT / ".venv" / "bin" / "intake-eval")]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
CLINICIANS = ["clin-1", "clin-2", "clin-3", "clin-4", "clin-5"]


def serve(delay: float) -> None:
    """Child process: a fake server whose every answer is unique (no accidental cache hits)."""
    from tests.helpers.fakeserver import FakeOpenAIServer, Reply

    server = FakeOpenAIServer(lambda body, index: Reply(content=f"Answer number {index}, about my week.", delay=delay))
    server.start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


def cli(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([*CLI, *args], env=ENV, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"intake-eval {' '.join(args[:1])} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result


def generate(run_dir: Path, profiles: int) -> None:
    """Profiles as `generate --stratified --generator offline/generator` makes them (sampling + offline render)."""
    from tests.helpers.convo_helpers import write_generated_profiles

    write_generated_profiles(run_dir / "profiles.jsonl", profiles)


def timed_run(run_dir: Path, models: Path, patient: str, mode: str, concurrency: int) -> tuple[float, dict]:
    """Wall seconds and the manifest's run stage; stage['cpu_s'] = the CLI process's CPU seconds."""
    import resource

    args = ["run", *sum((["--clinician", c] for c in CLINICIANS), []), "--patient", patient, "--patient-mode", mode,
            "--concurrency", str(concurrency), "--models", str(models), "--run-dir", str(run_dir)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cli(*args)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stage = json.loads((run_dir / "manifest.json").read_text())["stages"]["run"]
    stage["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, stage


def bench_server(work: Path, profiles: int, concurrency: int, delay: float) -> None:
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(delay)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        url = server.stdout.readline().strip()
        run_dir = work / "server"
        generate(run_dir, profiles)
        models = work / "server-models.yaml"
        lines = ["models:"] + [f"  {alias}: {{model: openai/{alias}, api_base: '{url}'}}" for alias in [*CLINICIANS, "pat"]]
        models.write_text("\n".join(lines) + "\n")
        wall, stage = timed_run(run_dir, models, "pat", "prompted", concurrency)
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    conversations = stage["counts"]["planned"]
    bound = math.ceil(conversations / concurrency) * 25 * delay
    print(f"    load average during the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"(a) loopback server, {delay * 1000:.0f} ms per call, concurrency {concurrency}: "
          f"{stage['counts']['ok']}/{conversations} ok in {wall:.1f} s wall "
          f"(run stage {stage['last_invocation']['seconds']:.1f} s, client CPU {stage['cpu_s']:.1f} s); critical-path bound {bound:.1f} s "
          f"→ {wall / bound:.2f}× the bound (target ≤ 1.30×)")


def bench_offline(work: Path, profiles: int, concurrency: int) -> None:
    base = work / "offline-profiles"
    generate(base, profiles)
    models = work / "offline-models.yaml"
    backends = ["offline/screener", "offline/anchored", "offline/screener", "offline/anchored", "offline/screener"]
    models.write_text("models:\n" + "".join(f"  {a}: {{model: {b}}}\n" for a, b in zip(CLINICIANS, backends)))
    for mode in ("tracked", "prompted"):
        run_dir = work / f"offline-{mode}"
        shutil.copytree(base, run_dir)
        wall, stage = timed_run(run_dir, models, "offline/patient", mode, concurrency)
        print(f"(b) offline participants, patient-mode {mode}: {stage['counts']['ok']}/{stage['counts']['planned']} ok "
              f"in {wall:.1f} s wall (run stage {stage['last_invocation']['seconds']:.1f} s, CPU {stage['cpu_s']:.1f} s; "
              "target < 30 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", type=int, default=108)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--skip-offline", action="store_true")
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        work = Path(tmp)
        if not args.skip_offline:
            bench_offline(work, args.profiles, args.concurrency)
        if not args.skip_server:
            bench_server(work, args.profiles, args.concurrency, args.delay)


if __name__ == "__main__":
    main()
