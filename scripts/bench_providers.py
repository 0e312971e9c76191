"""The study's provider ids against a loopback server impersonating each provider, side by side.

    .venv/bin/python scripts/bench_providers.py [--quick] [--conversations 1024] [--concurrency 256]
                                                 [--turns 25] [--delay 0.5] [--row NAME …] [--profile NAME]

C conversations of T sequential calls each, K conversations at a time, against scripts/bench_models.py's
server (a child process answering after --delay seconds, in OpenAI's shape on /chat/completions and
Anthropic's on /v1/messages). The bound is ⌈C/K⌉ × T × delay: what the run would take with a client
that costs nothing. Rows, each in its own process on the same workload:
  direct             a Together id over the direct OpenAI-compatible path (the provider pointed at the
                     server with INTAKE_EVAL_BASE_URL_<PROVIDER>; key variable and price table as for the host)
  litellm            the same id forced through litellm
  anthropic-direct   the study's Claude judge id over the direct Messages API path
  anthropic-litellm  the same id forced through litellm (what it cost before the direct path)
  inspect_ai         inspect_ai's model API (openai provider at the same server), if it is installed; it needs
                     openai ≥ 3.4, newer than litellm allows here, so it usually lives in its own venv:
                     `python -m venv /tmp/inspect && /tmp/inspect/bin/pip install inspect-ai`, then
                     --inspect-python /tmp/inspect/bin/python
Printed: wall ÷ bound and the client's CPU ms per call. --profile NAME runs that row under cProfile
and prints where its CPU goes. --quick: C=64, K=32, T=5, 0.2 s answers; the default is the full size.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
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

TOGETHER = "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"
CLAUDE = "anthropic/claude-sonnet-4-6"
ROWS = {"direct": (TOGETHER, "auto"), "litellm": (TOGETHER, "litellm"), "anthropic-direct": (CLAUDE, "auto"),
        "anthropic-litellm": (CLAUDE, "litellm"), "inspect_ai": ("openai/fake", "inspect_ai")}
FULL = (1024, 256, 25, 0.5)
QUICK = (64, 32, 5, 0.2)


def _pool(url: str, client: str, concurrency: int, model: str):
    from intake_eval.llm.base import ModelSpec
    from intake_eval.llm.pool import ModelPool
    from intake_eval.llm.registry import PROVIDER_KEY_ENV

    provider = model.split("/", 1)[0]
    key_env = PROVIDER_KEY_ENV.get(provider) or "BENCH_API_KEY"
    os.environ[key_env] = "bench-key"  # loopback only: the server ignores it
    base = url.removesuffix("/v1") if provider == "anthropic" else url  # litellm appends /v1/messages
    os.environ[f"INTAKE_EVAL_BASE_URL_{provider.upper()}"] = base
    # litellm needs the loopback URL as api_base; the direct paths find it through the override
    spec = ModelSpec(alias="bench", model=model, timeout_s=60, api_key_env=key_env,
                     api_base=base if client == "litellm" else None)
    return ModelPool({"bench": spec}, use_cache=False, max_concurrency=concurrency, client=client)


def _inspect_chat(url: str, concurrency: int):
    """inspect_ai's own model API on the same server: (complete(history) -> text, close)."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        GenerateConfig,
        get_model,
    )

    model = get_model("openai/fake", base_url=url, api_key="bench-key", responses_api=False,  # the chat endpoint
                      config=GenerateConfig(max_connections=concurrency, max_retries=1, timeout=60))
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}

    async def complete(history: list[dict[str, str]]) -> str:
        output = await model.generate([kinds[m["role"]](content=m["content"]) for m in history])
        return output.completion

    async def close() -> None:
        return None

    return complete, close


def run_row(url: str, name: str, conversations: int, concurrency: int, turns: int, delay: float,
            profile: bool = False) -> dict[str, float]:
    model, client = ROWS[name]

    async def main() -> dict[str, float]:
        if client == "inspect_ai":
            complete, close = _inspect_chat(url, concurrency)
        else:
            from intake_eval.llm.base import ChatRequest

            pool = _pool(url, client, concurrency, model)
            chat = pool.get("bench")

            async def complete(history: list[dict[str, str]]) -> str:
                return (await chat.complete(ChatRequest(messages=list(history)))).text

            close = pool.aclose
        await complete([{"role": "user", "content": "warm-up"}])
        gate = asyncio.Semaphore(concurrency)

        async def conversation(index: int) -> None:
            async with gate:
                history = [{"role": "system", "content": "You are a clinician."}]
                for turn in range(turns):
                    history.append({"role": "user", "content": f"Patient {index}, turn {turn}: I sleep badly."})
                    history.append({"role": "assistant", "content": await complete(history)})

        profiler = cProfile.Profile() if profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        await asyncio.gather(*(conversation(i) for i in range(conversations)))
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await close()
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
            print(out.getvalue())
        calls = conversations * turns
        bound = math.ceil(conversations / concurrency) * turns * delay
        return {"wall_s": wall, "bound_s": bound, "over_bound": wall / bound, "cpu_ms_per_call": 1000 * cpu / calls}

    return asyncio.run(main())


def inspect_available(python: str) -> bool:
    return subprocess.run([python, "-c", "import inspect_ai"], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="C=64, K=32, T=5, 0.2 s answers")
    parser.add_argument("--conversations", type=int)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--turns", type=int)
    parser.add_argument("--delay", type=float)
    parser.add_argument("--row", action="append", choices=list(ROWS), help="only these rows (repeatable)")
    parser.add_argument("--profile", choices=list(ROWS))
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--inspect-python", default=sys.executable,
                        help="the interpreter whose environment has inspect_ai (default: this one)")
    parser.add_argument("--one", choices=list(ROWS), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    defaults = QUICK if args.quick else FULL
    sizes = tuple(given if given is not None else default for given, default in
                  zip((args.conversations, args.concurrency, args.turns, args.delay), defaults))
    if args.one:  # one row in this process, its figures as the last line
        print(json.dumps(run_row(args.url, args.one, *sizes, profile=args.profile == args.one)))
        return
    conversations, concurrency, turns, delay = sizes
    server = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "bench_models.py"), "--serve", "--delay",
                               str(delay)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rows: dict[str, dict] = {}
    try:
        url = server.stdout.readline().strip()
        print(f"loopback server ({delay * 1000:.0f} ms per answer): C={conversations} conversations × {turns} "
              f"sequential calls, K={concurrency} at a time; bound ⌈C/K⌉ × T × delay = "
              f"{math.ceil(conversations / concurrency) * turns * delay:.1f} s")
        print(f"{'row':18} {'model id':40} {'wall s':>7} {'wall/bound':>10} {'CPU ms/call':>12}")
        for name in args.row or list(ROWS):
            python = args.inspect_python if name == "inspect_ai" else sys.executable
            if name == "inspect_ai" and not inspect_available(python):
                print(f"{name:18} not installed for {python} (see --inspect-python) — row skipped")
                continue
            command = [python, __file__, "--one", name, "--url", url, "--conversations", str(conversations),
                       "--concurrency", str(concurrency), "--turns", str(turns), "--delay", str(delay)]
            if args.profile:
                command += ["--profile", args.profile]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{name:18} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'}")
                continue
            lines = done.stdout.strip().splitlines()
            if args.profile == name:
                print("\n".join(lines[:-1]))
            rows[name] = row = json.loads(lines[-1])
            print(f"{name:18} {ROWS[name][0]:40} {row['wall_s']:7.2f} {row['over_bound']:10.2f} "
                  f"{row['cpu_ms_per_call']:12.2f}")
        load = os.getloadavg()
        print(f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) on {os.cpu_count()} CPUs; "
              "the server is Python threads in a child process and shares them")
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    if args.json_out:
        args.json_out.write_text(json.dumps({"sizes": sizes, "rows": rows, "load_average": os.getloadavg()}) + "\n")


if __name__ == "__main__":
    main()
