"""Hosted-provider ids against a loopback server impersonating the provider: direct HTTP vs litellm.

    .venv/bin/python scripts/bench_providers.py [--conversations 64] [--concurrency 32] [--turns 5]
                                                 [--delay 0.2] [--model PROVIDER/ID] [--profile litellm|direct]

C conversations of T sequential calls each, K conversations at a time, against scripts/bench_models.py's
server (a child process answering after --delay seconds). The bound is ⌈C/K⌉ × T × delay: what the
run would take with a client that costs nothing. Rows: a provider id (default a Together one) over
the direct path (the provider pointed at the server with INTAKE_EVAL_BASE_URL_<PROVIDER>, key and
price table as for the real host) and the same id forced through litellm. --profile runs one row under cProfile and
prints where the client's CPU goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import math
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

MODEL = "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"


def _pool(url: str, client: str, concurrency: int, model: str = MODEL):
    from intake_eval.llm.base import ModelSpec
    from intake_eval.llm.pool import ModelPool
    from intake_eval.llm.providers import BASE_URL_OVERRIDE, PROVIDERS

    provider = PROVIDERS[model.split("/", 1)[0]]
    key_env = provider.key_env or "BENCH_API_KEY"
    os.environ[key_env] = "bench-key"  # loopback only: the server ignores it
    os.environ[BASE_URL_OVERRIDE.format(provider.name.upper())] = url
    # litellm needs the loopback URL as api_base; the direct path finds it through the override
    spec = ModelSpec(alias="bench", model=model, timeout_s=60, api_key_env=key_env,
                     api_base=url if client == "litellm" else None)
    return ModelPool({"bench": spec}, use_cache=False, max_concurrency=concurrency, client=client)


def run_row(url: str, client: str, conversations: int, concurrency: int, turns: int, delay: float,
            profile: bool = False, model: str = MODEL) -> dict[str, float]:
    from intake_eval.llm.base import ChatRequest

    async def main() -> dict[str, float]:
        pool = _pool(url, client, concurrency, model)
        chat = pool.get("bench")
        await chat.complete(ChatRequest(messages=[{"role": "user", "content": "warm-up"}]))
        gate = asyncio.Semaphore(concurrency)

        async def conversation(index: int) -> None:
            async with gate:
                history = [{"role": "system", "content": "You are a clinician."}]
                for turn in range(turns):
                    history.append({"role": "user", "content": f"Patient {index}, turn {turn}: I sleep badly."})
                    result = await chat.complete(ChatRequest(messages=list(history)))
                    history.append({"role": "assistant", "content": result.text})

        profiler = cProfile.Profile() if profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        await asyncio.gather(*(conversation(i) for i in range(conversations)))
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await pool.aclose()
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
            print(out.getvalue())
        calls = conversations * turns
        bound = math.ceil(conversations / concurrency) * turns * delay
        return {"wall_s": wall, "bound_s": bound, "over_bound": wall / bound, "cpu_ms_per_call": 1000 * cpu / calls}

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--model", default=MODEL, help="a provider id whose provider has an OpenAI-compatible endpoint")
    parser.add_argument("--profile", choices=["direct", "litellm"])
    parser.add_argument("--row", choices=["direct", "litellm"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = (args.conversations, args.concurrency, args.turns, args.delay)
    if args.row:  # one row in this process, its figures as the last line
        import json

        row = run_row(args.url, "auto" if args.row == "direct" else "litellm", *sizes, profile=args.profile == args.row,
                      model=args.model)
        print(json.dumps(row))
        return
    server = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "bench_models.py"), "--serve", "--delay",
                               str(args.delay)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        print(f"{args.model} at a loopback server ({args.delay * 1000:.0f} ms per answer): C={args.conversations} "
              f"conversations × {args.turns} calls, K={args.concurrency} at a time")
        print(f"{'path':10} {'wall s':>7} {'bound s':>8} {'wall/bound':>10} {'CPU ms/call':>12}")
        for which in ("direct", "litellm"):
            command = [sys.executable, __file__, "--row", which, "--url", url, "--conversations", str(args.conversations),
                       "--concurrency", str(args.concurrency), "--turns", str(args.turns), "--delay", str(args.delay), "--model", args.model]
            if args.profile:
                command += ["--profile", args.profile]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            lines = done.stdout.strip().splitlines()
            if args.profile == which:
                print("\n".join(lines[:-1]))
            import json

            row = json.loads(lines[-1])
            print(f"{which:10} {row['wall_s']:7.2f} {row['bound_s']:8.2f} {row['over_bound']:10.2f} "
                  f"{row['cpu_ms_per_call']:12.2f}")
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
