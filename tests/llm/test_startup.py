"""`run` against a direct OpenAI-compatible alias never imports litellm: a Together clinician and
patient pointed at a loopback server, priced from litellm's table read as a file. And what sits before
the first request stays small: the modules loaded when the first connection opens are those the
request needs, not the other commands', the data libraries' or the metrics'."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, iter_records
from tests.commands.test_run_loopback import setup_run, study_server

WIRE_NAMES = {"meta-llama/Llama-3.3-70B-Instruct-Turbo": "doc", "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo": "pat"}
RUN_AND_REPORT = """
import sys
from intake_eval.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    print("LITELLM-IMPORTED" if "litellm" in sys.modules else "NO-LITELLM")
"""


# Run the CLI; at the first connection a request opens, write the names of the modules loaded by then.
MODULES_AT_FIRST_REQUEST = """
import asyncio.base_events, sys
from pathlib import Path

out, sys.argv = Path(sys.argv[1]), ["intake-eval", *sys.argv[2:]]
connect = asyncio.base_events.BaseEventLoop.create_connection


async def first_connection(self, *args, **kwargs):
    if not out.exists():
        out.write_text("\\n".join(sorted(sys.modules)))
    return await connect(self, *args, **kwargs)


asyncio.base_events.BaseEventLoop.create_connection = first_connection
from intake_eval.cli import main

main()
"""

# Loaded before the first request, each of these would be start-up time no request needs: litellm and the
# data libraries, the other commands, the metrics pass and its statistics, fork planning and the report.
# (The answer counts the stages keep for status, metrics/answers and answer_facts, are loaded: ≈ 10 ms.)
NOT_BEFORE_THE_FIRST_REQUEST = ("litellm", "openai", "httpx", "numpy", "pandas", "scipy", "pyarrow", "matplotlib",
                                "intake_eval.commands.judge", "intake_eval.commands.report",
                                "intake_eval.commands.study", "intake_eval.metrics.tables",
                                "intake_eval.metrics.collect", "intake_eval.metrics.columnar",
                                "intake_eval.metrics.stats", "intake_eval.metrics.registry",
                                "intake_eval.metrics.clinical", "intake_eval.forks.plan", "intake_eval.report")


def test_the_first_request_leaves_before_any_module_it_does_not_need_is_imported(tmp_path: Path) -> None:
    server = study_server()
    answer = server.responder
    server.responder = lambda body, index: answer({**body, "model": WIRE_NAMES[body["model"]]}, index)
    loaded = tmp_path / "modules.txt"
    with server:
        run_dir, models = setup_run(tmp_path, server)
        models.write_text("models:\n"
                          "  doc: {model: together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo}\n"
                          "  pat: {model: together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo}\n")
        env = {**os.environ, "INTAKE_EVAL_BASE_URL_TOGETHER_AI": server.url, "TOGETHER_API_KEY": "test-key",
               "XDG_CACHE_HOME": str(tmp_path / "cache")}
        done = subprocess.run([sys.executable, "-c", MODULES_AT_FIRST_REQUEST, str(loaded), "run", "--clinician", "doc",
                               "--patient", "pat", "--turns", "1", "--models", str(models), "--run-dir", str(run_dir)],
                              env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    modules = set(loaded.read_text().split())
    assert "intake_eval.llm.openai_http" in modules  # the request went the direct way
    early = sorted(name for name in modules
                   if any(name == heavy or name.startswith(heavy + ".") for heavy in NOT_BEFORE_THE_FIRST_REQUEST))
    assert early == []


def test_run_on_the_direct_path_does_not_import_litellm(tmp_path):
    server = study_server()
    answer = server.responder
    server.responder = lambda body, index: answer({**body, "model": WIRE_NAMES[body["model"]]}, index)
    with server:
        run_dir, models = setup_run(tmp_path, server)
        models.write_text("models:\n"
                          "  doc: {model: together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo}\n"
                          "  pat: {model: together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo}\n")
        env = {**os.environ, "INTAKE_EVAL_BASE_URL_TOGETHER_AI": server.url, "TOGETHER_API_KEY": "test-key",
               "XDG_CACHE_HOME": str(tmp_path / "cache")}
        done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, "run", "--clinician", "doc", "--patient", "pat",
                               "--turns", "2", "--models", str(models), "--run-dir", str(run_dir)],
                              env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "NO-LITELLM"
    records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
    assert len(records) == 2 and all(record.ok for record in records)
    clinician = [record.usage["clinician"] for record in records]
    assert all(usage.cost_known and usage.cost_usd > 0 for usage in clinician), \
        json.dumps([usage.model_dump() for usage in clinician])
