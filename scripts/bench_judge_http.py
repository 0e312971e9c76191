"""The per-turn judge over HTTP: wall ÷ bound and client CPU per call at K conversations at a time.

    .venv/bin/python scripts/bench_judge_http.py [--conversations 256] [--concurrency 32] [--delay 0.5]
                                                  [--model gemini/gemini-3-flash-preview] [--quick]

C offline conversations (the offline pipeline; 12 turns each) are judged per turn by a provider id
pointed at a loopback server (a child process) that answers every call with a valid label after
--delay seconds, in the provider's own format (Anthropic's Messages shape for anthropic/…).

How the bound is defined. A provider judge labels a conversation's turns 0..N one after another,
each call sent after the previous one answered, so each call reads the previous call's prompt
from the provider's prompt cache. A conversation is then a chain of N+1 calls, and with K
conversations judged at a time at most K calls are in flight. The physical minimum for those calls
is  max(longest chain, ⌈Σ chain lengths ÷ K⌉) × delay  (no scheduler can beat either term).

The trade, printed under the table: at the same K calls in flight, the same calls with the turns
sent in parallel have the same minimum ⌈Σ calls ÷ K⌉ × delay, so sequencing costs no wall time; it
only lengthens each conversation (N+1 answers instead of one). Sending the turns in parallel with K
conversations at a time would be ~(N+1)× faster but put (N+1)·K calls in flight and give up the cache
reuse, whose size is printed: the share of prompt characters each call shares with the previous
call of its conversation (what a provider's prefix cache can serve).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

MODEL = "gemini/gemini-3-flash-preview"  # the study's primary judge


def serve(delay: float) -> None:
    """Child process: a server answering every judge prompt with a valid label after ``delay``."""
    from tests.helpers.fakeserver import FakeOpenAIServer, Reply
    from tests.judge.test_judging import _valid_answer

    def respond(body, index):
        content = body["messages"][0]["content"]
        if isinstance(content, list):  # Anthropic's content blocks
            content = "".join(block.get("text", "") for block in content)
        return Reply(content=_valid_answer({"messages": [{"content": content}]}), delay=delay)

    server = FakeOpenAIServer(respond)
    server.start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


def build(work: Path, conversations: int) -> Path:
    from bench_judge import build_run_folder

    return build_run_folder(work, math.ceil(conversations / 2))


def run_row(source: Path, url: str, model: str, conversations: int, concurrency: int, delay: float) -> dict:
    import shutil

    from intake_eval.catalog.load import load_catalog
    from intake_eval.core.records import Conversation
    from intake_eval.core.store import RunPaths, iter_records
    from intake_eval.judge.stage import JudgeSetup, judge_stage
    from intake_eval.llm.base import ModelSpec
    from intake_eval.llm.pool import ModelPool
    from intake_eval.llm.registry import PROVIDER_KEY_ENV

    provider = model.split("/", 1)[0]
    key_env = PROVIDER_KEY_ENV.get(provider) or "BENCH_API_KEY"
    os.environ[key_env] = "bench-key"  # loopback only
    os.environ[f"INTAKE_EVAL_BASE_URL_{provider.upper()}"] = url.removesuffix("/v1") if provider == "anthropic" else url
    scratch = Path(tempfile.mkdtemp(prefix="bench-judge-http-"))
    target = scratch / "run"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("judgments", "metrics", "report", "cache.sqlite*"))
    paths = RunPaths(target)
    chains = sorted((len(c.turns) + 1 for path in paths.conversation_files() for c in iter_records(path, Conversation)
                     if c.ok), reverse=True)[:conversations]
    catalog = load_catalog()
    spec = ModelSpec(alias="judge", model=model, temperature=0.0, max_tokens=2000, api_key_env=key_env, timeout_s=120)
    pool = ModelPool({"judge": spec}, use_cache=False)
    setup = [JudgeSetup(label="judge", alias="judge", model=pool.get("judge"))]

    async def main() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        result = await judge_stage(paths, setup, concurrency=concurrency, limit=conversations, catalog=catalog)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await pool.aclose()
        assert result.judged["judge"] == len(chains), result
        return wall, cpu

    wall, cpu = asyncio.run(main())
    usage = pool.usage["judge"]
    shared, total = _prefix_share(paths, catalog, conversations)
    shutil.rmtree(scratch)
    calls = sum(chains)
    sequential = max(max(chains), math.ceil(calls / concurrency)) * delay
    # the greedy schedule judge_stage makes: conversations start in order as slots free up
    slots = [0.0] * concurrency
    for length in chains:
        slots.sort()
        slots[0] += length * delay
    return {"model": model, "conversations": len(chains), "calls": calls, "wall_s": wall, "bound_s": sequential,
            "over_bound": wall / sequential, "schedule_s": max(slots), "cpu_ms_per_call": 1000 * cpu / calls,
            "parallel_turns_bound_s": math.ceil(len(chains) / concurrency) * delay,
            "cache_share": shared / max(total, 1), "api_calls": usage.calls, "latency_ms_per_call": 1000 * usage.latency_s / max(usage.calls, 1),
            "queue_ms_per_call": 1000 * usage.queue_s / max(usage.calls, 1)}


def _prefix_share(paths, catalog, limit: int) -> tuple[int, int]:
    """(characters each per-turn prompt shares with the previous one of its conversation, all characters)."""
    from intake_eval.core.records import Conversation, Profile
    from intake_eval.core.store import iter_records
    from intake_eval.judge.judging import rules_prompt, turn_prompt

    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile)}
    shared = total = 0
    convos = sorted((c for path in paths.conversation_files() for c in iter_records(path, Conversation) if c.ok),
                    key=lambda c: c.conversation_id)[:limit]
    for convo in convos:
        profile = profiles[convo.profile_id]
        rules = rules_prompt(profile, catalog)
        prompts = [turn_prompt(convo, profile, n, catalog, rules=rules) for n in [0] + [t.turn for t in convo.turns]]
        total += sum(len(p) for p in prompts)
        shared += sum(len(os.path.commonprefix([a, b])) for a, b in zip(prompts, prompts[1:]))
    return shared, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--model", action="append", help=f"provider id(s) to judge with (default {MODEL})")
    parser.add_argument("--quick", action="store_true", help="64 conversations, 0.2 s answers")
    parser.add_argument("--json-out", type=Path, help="also write the rows here as JSON")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "intake-eval-bench-judge")
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    if args.quick:
        args.conversations, args.delay = 64, 0.2
    args.work.mkdir(parents=True, exist_ok=True)
    source = build(args.work, args.conversations)
    if args.row:
        print(json.dumps(run_row(source, args.url, args.row, args.conversations, args.concurrency, args.delay)))
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(args.delay)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        print(f"per-turn judge at a loopback server ({args.delay * 1000:.0f} ms per answer), "
              f"K={args.concurrency} conversations at a time")
        print(f"{'judge':34} {'conv':>5} {'calls':>6} {'wall s':>7} {'bound s':>8} {'wall/bound':>10} {'CPU ms/call':>12}")
        rows = {}
        for model in args.model or [MODEL]:
            done = subprocess.run([sys.executable, __file__, "--row", model, "--url", url, "--conversations",
                                   str(args.conversations), "--concurrency", str(args.concurrency), "--delay",
                                   str(args.delay), "--work", str(args.work)], capture_output=True, text=True, check=True)
            rows[model] = row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{model:34} {row['conversations']:5d} {row['calls']:6d} {row['wall_s']:7.2f} {row['bound_s']:8.2f} "
                  f"{row['over_bound']:10.2f} {row['cpu_ms_per_call']:12.2f}  latency {row['latency_ms_per_call']:.0f} ms/call, {row['api_calls']} API calls")
        print(f"bound = max(longest chain, ⌈calls ÷ K⌉) × delay: turns labelled one after another, K chains in "
              f"flight; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        for model, row in rows.items():
            print(f"  {model}: the same calls with turns in parallel, K conversations at a time, would need "
                  f"{row['parallel_turns_bound_s']:.1f} s with up to {row['calls'] // row['conversations']}×K calls in "
                  f"flight, and give up the prompt cache: {100 * row['cache_share']:.0f} % of prompt characters "
                  "repeat the previous call's prompt; at K calls in flight the parallel bound equals the sequential one")
        if args.json_out:
            args.json_out.write_text(json.dumps({"rows": rows, "load_average": os.getloadavg()}) + "\n")
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
