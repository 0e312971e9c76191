"""Start-up on the direct path: how soon the first provider request leaves, and what start-up costs a study.

    .venv/bin/python scripts/bench_first_request.py [--repeats 5] [--conversations 256] [--concurrency 256]
                                                    [--turns 25] [--delay 0.5] [--src DIR] [--skip-study]

A loopback OpenAI-compatible server (tests/helpers/fakeserver.py, in a child process, answering after --delay
seconds) impersonates Together (``INTAKE_EVAL_BASE_URL_TOGETHER_AI``; key variable and price table as
for the real host, so the call is priced from litellm's table exactly as a real one). It prints the
wall-clock time its first request arrived. Two measurements, each timed from just before the child
process is started:

  first request   `python -m intake_eval run` (the real command: profiles, models file, run folder)
                  with a Together clinician and patient; start → first request, median of --repeats
  floor           a bare ``python -c`` importing aiohttp and posting one request: the same figure for
                  any Python client on this machine at its current load (a shared machine's load
                  stretches every figure alike; compare against this row)
  study           C conversations of T sequential calls, K at a time, through the shipped ModelPool in
                  a fresh process (imports included, no warm-up): start → last answer, ÷ the bound
                  ⌈C/K⌉ × T × delay, start → first request, and the child's CPU time per call
  study floor     the same workload from a bare aiohttp session in a fresh process

The children run with bytecode, as an installed package does (a discarded first run writes it to a
folder of the bench's own), and with litellm's price extract cached.

``--src DIR`` runs the children against another checkout's ``src`` (e.g. an earlier commit unpacked
with ``git archive``), for a before/after figure on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLINICIAN = "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"
PATIENT = "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
FIRST = "FIRST "


def serve(delay: float) -> None:
    """Child process: the loopback server; prints its URL, then the arrival time of its first request."""
    from tests.helpers import fakeserver
    from tests.helpers.fakeserver import FakeOpenAIServer, Reply

    fakeserver._Handler.disable_nagle_algorithm = True

    def respond(_body: dict, index: int) -> Reply:
        if index == 0:
            print(f"{FIRST}{time.time()}", flush=True)
        return Reply(content="Could you tell me more about your sleep?", delay=delay)

    server = FakeOpenAIServer(respond)
    server.start()
    print(server.url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


class Server:
    """The server child for one measurement (a fresh one each time: 'first request' is its first)."""

    def __init__(self, delay: float):
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", "--delay", str(delay)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def first_arrival(self) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        for line in self.process.stdout:
            if line.startswith(FIRST):
                self.process.wait(timeout=30)
                return float(line.removeprefix(FIRST))
        raise RuntimeError("the server saw no request")


# Bytecode as an installed package has it (pip compiles at install): kept in a folder of the bench's own,
# made by a discarded first run, even where PYTHONDONTWRITEBYTECODE is set for development.
BYTECODE = Path(tempfile.gettempdir()) / "intake-eval-bench-pycache"


def child_env(url: str, src: Path | None) -> dict[str, str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION",
           "INTAKE_EVAL_BASE_URL_TOGETHER_AI": url, "TOGETHER_API_KEY": "bench-key",
           "PYTHONPYCACHEPREFIX": str(BYTECODE / (src.name if src is not None else "here"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT)])
    return env


def first_request_of_run(delay: float, src: Path | None) -> float:
    from intake_eval.core.store import RunPaths, append_record
    from tests.helpers.convo_helpers import make_profile

    server = Server(delay)
    with tempfile.TemporaryDirectory() as scratch:
        run_dir, models = Path(scratch) / "run", Path(scratch) / "models.yaml"
        append_record(RunPaths(run_dir).profiles, make_profile(1))
        models.write_text(f"models:\n  doc: {{model: {CLINICIAN}}}\n  pat: {{model: {PATIENT}}}\n")
        started = time.time()
        done = subprocess.run([sys.executable, "-m", "intake_eval", "run", "--clinician", "doc", "--patient", "pat",
                               "--turns", "1", "--models", str(models), "--run-dir", str(run_dir)],
                              env=child_env(server.url, src), capture_output=True, text=True, check=False)
    first = server.first_arrival()
    if done.returncode != 0:
        raise RuntimeError(f"run failed: {done.stderr.strip()[-400:]}")
    return first - started


FLOOR = """
import asyncio, sys, aiohttp
async def main():
    async with aiohttp.ClientSession() as session:
        body = {"model": "floor", "messages": [{"role": "user", "content": "hello"}]}
        async with session.post(sys.argv[1] + "/chat/completions", json=body) as response:
            await response.read()
asyncio.run(main())
"""


def first_request_of_floor(delay: float) -> float:
    """The same measurement for a bare ``python -c`` that imports aiohttp and posts one request: what
    this machine, at its current load, takes for any Python client to get a request out."""
    server = Server(delay)
    started = time.time()
    subprocess.run([sys.executable, "-c", FLOOR, server.url], check=True)
    return server.first_arrival() - started


def study_child(url: str, conversations: int, concurrency: int, turns: int) -> None:
    """Child process: the study workload through the shipped pool; prints the time its last answer came."""
    from intake_eval.llm.base import ChatRequest, ModelSpec
    from intake_eval.llm.pool import ModelPool

    spec = ModelSpec(alias="bench", model=CLINICIAN, timeout_s=120, api_key_env="TOGETHER_API_KEY")
    pool = ModelPool({"bench": spec}, use_cache=False, max_concurrency=concurrency)
    chat = pool.get("bench")

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def conversation(index: int) -> None:
            async with gate:
                history = [{"role": "system", "content": "You are a clinician."}]
                for turn in range(turns):
                    history.append({"role": "user", "content": f"Patient {index}, turn {turn}: I sleep badly."})
                    answer = await chat.complete(ChatRequest(messages=list(history)))
                    history.append({"role": "assistant", "content": answer.text})

        await asyncio.gather(*(conversation(i) for i in range(conversations)))
        await pool.aclose()

    asyncio.run(main())
    finished = time.time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"finished": finished, "cpu_s": usage.ru_utime + usage.ru_stime, "calls": conversations * turns}))


def study_floor_child(url: str, conversations: int, concurrency: int, turns: int) -> None:
    """Child process: the same workload from a bare aiohttp session (no retries, ledger, cache or pricing):
    what any Python client pays on this machine at its current load."""
    import aiohttp

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def conversation(index: int) -> None:
                async with gate:
                    history = [{"role": "system", "content": "You are a clinician."}]
                    for turn in range(turns):
                        history.append({"role": "user", "content": f"Patient {index}, turn {turn}: I sleep badly."})
                        body = {"model": "floor", "messages": history}
                        async with session.post(url + "/chat/completions", json=body) as response:
                            answer = await response.json()
                        history.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})

            await asyncio.gather(*(conversation(i) for i in range(conversations)))

    asyncio.run(main())
    finished = time.time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"finished": finished, "cpu_s": usage.ru_utime + usage.ru_stime, "calls": conversations * turns}))


def study(conversations: int, concurrency: int, turns: int, delay: float, src: Path | None,
          child: str = "--study-child") -> dict[str, float]:
    server = Server(delay)
    started = time.time()
    done = subprocess.run([sys.executable, __file__, child, "--url", server.url, "--conversations",
                           str(conversations), "--concurrency", str(concurrency), "--turns", str(turns)],
                          env=child_env(server.url, src), capture_output=True, text=True, check=False)
    first = server.first_arrival()
    if done.returncode != 0:
        raise RuntimeError(f"study failed: {done.stderr.strip()[-400:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    wall = child["finished"] - started
    bound = math.ceil(conversations / concurrency) * turns * delay
    return {"wall_s": wall, "bound_s": bound, "over_bound": wall / bound, "first_request_s": first - started,
            "client_cpu_s": child["cpu_s"], "client_cpu_ms_per_call": 1000 * child["cpu_s"] / child["calls"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="runs of the first-request measurement")
    parser.add_argument("--conversations", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--turns", type=int, default=25, help="sequential calls per conversation in the study")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the server takes per answer")
    parser.add_argument("--src", type=Path, help="another checkout's src folder to measure instead")
    parser.add_argument("--skip-study", action="store_true")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--study-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--study-floor-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.delay)
        return
    if args.study_child:
        study_child(args.url, args.conversations, args.concurrency, args.turns)
        return
    if args.study_floor_child:
        study_floor_child(args.url, args.conversations, args.concurrency, args.turns)
        return
    first_request_of_run(args.delay, args.src)  # warm-up: writes the bytecode, fills the price extract's cache
    firsts = [first_request_of_run(args.delay, args.src) for _ in range(args.repeats)]
    floors = [first_request_of_floor(args.delay) for _ in range(args.repeats)]
    figures: dict[str, object] = {"first_request_of_run_s": firsts, "median_first_request_s": statistics.median(firsts),
                                  "floor_s": floors, "median_floor_s": statistics.median(floors)}
    print(f"`run` start → first request: median {statistics.median(firsts):.3f} s "
          f"(runs: {', '.join(f'{value:.3f}' for value in firsts)})")
    print(f"floor (python -c: import aiohttp, post once): median {statistics.median(floors):.3f} s "
          f"(runs: {', '.join(f'{value:.3f}' for value in floors)})")
    if not args.skip_study:
        for name, child in (("study", "--study-child"), ("study_floor", "--study-floor-child")):
            result = study(args.conversations, args.concurrency, args.turns, args.delay, args.src, child)
            figures[name] = result
            print(f"{name} C={args.conversations} K={args.concurrency} T={args.turns} at {args.delay * 1000:.0f} ms: "
                  f"{result['wall_s']:.2f} s from start against a {result['bound_s']:.1f} s bound "
                  f"({result['over_bound']:.3f}×); first request {result['first_request_s']:.3f} s after start; "
                  f"client CPU {result['client_cpu_s']:.2f} s, {result['client_cpu_ms_per_call']:.3f} ms a call "
                  "(start-up included)")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs (shared machine)")
    if args.json_out:
        args.json_out.write_text(json.dumps({**figures, "load_average": load}) + "\n")


if __name__ == "__main__":
    main()
