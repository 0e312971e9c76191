#!/usr/bin/env python3
"""A real model on this machine: speed, the tool's overhead per call, and prompt-cache reuse.

    .venv/bin/python scripts/bench_local.py [--conversations 2] [--turns 4] [--mode prompted] [--json-out FILE]
    .venv/bin/python scripts/bench_local.py --quick        # 1 conversation × 3 turns

Runs the real `intake-eval run` (in this process) with the bundled SmolLM2 135M as clinician and
patient on the embedded llama.cpp server, and reads llama.cpp's own account of every call
(``timings``) beside the tool's measured send → answer time:
  tokens/s         prompt and generated tokens per second of server compute, and generated tokens
                   per wall second over the whole run (slots decode together)
  overhead         per call: send → answer minus the server's compute (HTTP, JSON, chat template,
                   tokenising, scheduling), median and 90th percentile
  prompt reuse     clinician and patient prompts grow by one exchange per turn; with one slot (and
                   prompt cache) per conversation role the server re-evaluates only the new tokens:
                   reused = cache_n ÷ (cache_n + prompt_n), over calls after each role's first
Wall figures depend on what else the machine runs (the load average is printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

from intake_eval.cli import app  # noqa: E402
from intake_eval.llm import local_server  # noqa: E402

CALLS: list[tuple[str, int, object]] = []  # (purpose, turn, ChatResult) as the server answered


def record_calls() -> None:
    """Keep every answer of the local backend (its latency is the HTTP call alone: no queue, no retry)."""
    original = local_server.LocalBackend.complete

    async def complete(self, request, level=None):
        result = await original(self, request, level=level)
        context = request.context or {}
        CALLS.append((request.purpose, int(context.get("turn", 0) or 0), result))
        return result

    local_server.LocalBackend.complete = complete


def cli(args: list[str]) -> None:
    import typer

    try:
        typer.main.get_command(app)(args, standalone_mode=False)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summarise(wall_s: float) -> dict:
    rows = [(purpose, turn, r.server_timings or {}, r) for purpose, turn, r in CALLS]
    timed = [row for row in rows if row[2]]
    compute = [(t.get("prompt_ms", 0) + t.get("predicted_ms", 0)) / 1000 for _, _, t, _ in timed]
    overhead_ms = [1000 * (r.latency_s - c) for (_, _, _, r), c in zip(timed, compute)]
    prompt_n = sum(t.get("prompt_n", 0) for _, _, t, _ in timed)
    prompt_ms = sum(t.get("prompt_ms", 0) for _, _, t, _ in timed)
    predicted_n = sum(t.get("predicted_n", 0) for _, _, t, _ in timed)
    predicted_ms = sum(t.get("predicted_ms", 0) for _, _, t, _ in timed)
    reuse = {}
    by_purpose: dict[str, list] = defaultdict(list)
    for purpose, _, timings, _ in timed:
        by_purpose[purpose].append(timings)
    for purpose, calls in sorted(by_purpose.items()):
        cached = sum(t.get("cache_n", 0) for t in calls)
        fresh = sum(t.get("prompt_n", 0) for t in calls)
        reuse[purpose] = {"calls": len(calls), "prompt_tokens": cached + fresh, "re_evaluated": fresh,
                          "reused_fraction": round(cached / (cached + fresh), 3) if cached + fresh else None,
                          "re_evaluated_per_call": round(fresh / len(calls), 1)}
    # a conversation role's first call has nothing of its own to reuse: clinician turn 1, the patient's opening
    first_turn = {"clinician": 1, "patient": 0}
    growing = [t for purpose, turn, t, _ in timed if purpose in first_turn and turn > first_turn[purpose]]
    cached = sum(t.get("cache_n", 0) for t in growing)
    fresh = sum(t.get("prompt_n", 0) for t in growing)
    return {
        "calls": len(CALLS), "calls_with_timings": len(timed), "wall_s": round(wall_s, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "prompt_tokens_per_s": round(1000 * prompt_n / prompt_ms, 1) if prompt_ms else None,
        "generated_tokens_per_s": round(1000 * predicted_n / predicted_ms, 1) if predicted_ms else None,
        "generated_tokens_per_wall_s": round(predicted_n / wall_s, 1) if wall_s else None,
        "server_compute_s_median": round(statistics.median(compute), 3) if compute else None,
        "overhead_ms_median": round(statistics.median(overhead_ms), 1) if overhead_ms else None,
        "overhead_ms_p90": round(percentile(overhead_ms, 0.9), 1) if overhead_ms else None,
        "clinician_patient_reused_fraction": round(cached / (cached + fresh), 3) if cached + fresh else None,
        "clinician_patient_re_evaluated_per_call": round(fresh / len(growing), 1) if growing else None,
        "by_purpose": reuse,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=2, help="conversations in flight (profiles)")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--mode", choices=["prompted", "tracked"], default="prompted", help="patient mode")
    parser.add_argument("--quick", action="store_true", help="1 conversation × 3 turns")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.turns = 1, 3
    record_calls()
    with tempfile.TemporaryDirectory(prefix="bench_local_") as work:
        run_dir = ["--run-dir", str(Path(work) / "run")]
        cli(["generate", "--n", str(args.conversations), "--seed", "7", "--generator", "offline/generator", *run_dir])
        started = time.perf_counter()
        cli(["run", "--clinician", "smollm2", "--patient", "smollm2", "--patient-mode", args.mode,
             "--turns", str(args.turns), "--concurrency", str(args.conversations), "--no-cache", *run_dir])
        wall = time.perf_counter() - started
    result = {"model": "local/smollm2 (SmolLM2 135M Q4_1)", "conversations": args.conversations,
              "turns": args.turns, "patient_mode": args.mode, "threads": local_server.default_threads(),
              **summarise(wall)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")


if __name__ == "__main__":
    main()
