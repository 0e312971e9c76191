"""`run` against a direct OpenAI-compatible alias never imports litellm: a Together clinician and
patient pointed at a loopback server, priced from litellm's table read as a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
