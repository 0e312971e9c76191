"""Throughput of the model layer against a local OpenAI-compatible server that answers after 500 ms.

    .venv/bin/python scripts/bench_models.py [--calls 2000] [--concurrency 64] [--delay 0.5]

Runs the same calls three ways in one process: the raw openai.AsyncOpenAI client, the ModelPool
as shipped (cache → retry → limiter → a direct aiohttp POST for OpenAI-compatible endpoints), and
the ModelPool forced through litellm (the path of providers without an OpenAI-compatible endpoint). The server runs in a
child process so CPU ms per call measure the client side only. Target: ≥ 90 % of the ideal
throughput (concurrency ÷ latency = 128 calls/s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")


def serve(delay: float) -> None:
    """Child process: run the fake server and print its URL."""
    from tests.helpers import fakeserver
    from tests.helpers.fakeserver import FakeOpenAIServer, Reply

    # The handler writes headers and body separately; with Nagle on, each answer waits ~40 ms for
    # the client's delayed ACK, which is the test server's cost, not the client's.
    fakeserver._Handler.disable_nagle_algorithm = True
    server = FakeOpenAIServer(lambda body, index: Reply(content="Could you tell me more about your sleep?", delay=delay))
    server.start()
    print(server.url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


def _messages(index: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are a clinician conducting an intake."},
            {"role": "user", "content": f"Patient statement number {index}: I have not been sleeping well."}]


async def _drive(call, calls: int, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with gate:
            await call(index)

    await asyncio.gather(*(one(i) for i in range(calls)))


closers: list = []  # async close functions of the clients made by the current measurement


def _cpu_seconds(pid: int) -> float:
    """User+system CPU of another process (Linux), to show how busy the test server was."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


SERVER_PID = 0


def measure(name: str, make_call, calls: int, concurrency: int) -> dict[str, float]:
    async def main() -> None:
        call = make_call()
        await call(-1)  # warm-up: imports, client and first connection outside the timing
        started_wall, started_cpu, server_cpu = time.perf_counter(), time.process_time(), _cpu_seconds(SERVER_PID)
        await _drive(call, calls, concurrency)
        result["wall"] = time.perf_counter() - started_wall
        result["cpu"] = time.process_time() - started_cpu
        result["server_cpu"] = _cpu_seconds(SERVER_PID) - server_cpu
        while closers:
            await closers.pop()()

    result: dict[str, float] = {}
    asyncio.run(main())
    return {"name": name, "calls_per_s": calls / result["wall"], "cpu_ms_per_call": 1000 * result["cpu"] / calls,
            "wall_s": result["wall"], "server_cpu_ms_per_call": 1000 * result["server_cpu"] / calls}


def raw_openai(url: str):
    def make():
        import openai

        client = openai.AsyncOpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=30)
        closers.append(client.close)

        async def call(index: int) -> None:
            response = await client.chat.completions.create(model="fake", messages=_messages(index),
                                                            temperature=0.7, max_tokens=350)
            assert response.choices[0].message.content

        return call

    return make


def pooled(url: str, client: str, cache_dir: Path, concurrency: int):
    def make():
        from intake_eval.llm.base import ChatRequest, ModelSpec
        from intake_eval.llm.pool import ModelPool

        spec = ModelSpec(alias="bench", model="openai/fake", api_base=url, timeout_s=30)
        pool = ModelPool({"bench": spec}, cache_path=cache_dir / f"{client}.sqlite", max_concurrency=concurrency,
                         client=client)
        model = pool.get("bench")
        closers.append(pool.aclose)

        async def call(index: int) -> None:
            result = await model.complete(ChatRequest(messages=_messages(index)))
            assert result.text and not result.cached

        return call

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.delay)
        return

    child = subprocess.Popen([sys.executable, __file__, "--serve", "--delay", str(args.delay)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    global SERVER_PID
    SERVER_PID = child.pid
    try:
        url = child.stdout.readline().strip()
        ideal = args.concurrency / args.delay
        print(f"server {url}: {args.calls} calls, concurrency {args.concurrency}, "
              f"{args.delay * 1000:.0f} ms per answer → ideal {ideal:.0f} calls/s")
        with tempfile.TemporaryDirectory() as tmp:
            rows = [
                measure("raw openai.AsyncOpenAI (httpx)", raw_openai(url), args.calls, args.concurrency),
                measure("ModelPool (shipped: direct aiohttp)", pooled(url, "auto", Path(tmp), args.concurrency),
                        args.calls, args.concurrency),
                measure("ModelPool forced through litellm", pooled(url, "litellm", Path(tmp), args.concurrency),
                        args.calls, args.concurrency),
            ]
        print(f"{'path':38} {'calls/s':>8} {'% ideal':>8} {'CPU ms/call':>12} {'wall s':>7} {'server CPU ms/call':>19}")
        for row in rows:
            print(f"{row['name']:38} {row['calls_per_s']:8.1f} {100 * row['calls_per_s'] / ideal:7.1f}% "
                  f"{row['cpu_ms_per_call']:12.2f} {row['wall_s']:7.1f} {row['server_cpu_ms_per_call']:19.2f}")
        print(f"(this machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; the test "
              "server is Python threads in a child process and competes for the same CPUs)")
        shipped = rows[1]["calls_per_s"] / ideal
        print(f"shipped pool: {100 * shipped:.1f} % of ideal — {'PASS' if shipped >= 0.9 else 'FAIL'} (target ≥ 90 %)")
    finally:
        child.stdin.close()
        child.wait(timeout=10)


if __name__ == "__main__":
    main()
