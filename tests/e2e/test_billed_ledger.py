"""What providers billed, counted by the server that billed it: `status --json` (the call ledger) against a
priced loopback server's own bill, with injected faults (truncated 200 bodies, 500s, 429s) and SIGKILLs of
real `intake-eval run` processes at random moments; the folder budget holds across the kills, and a rerun of a
budget-stopped run with the same budget sends nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths, append_record, iter_json_lines
from intake_eval.runner.cost_estimate import record_cost
from tests.helpers.billing_server import billing_server, models_yaml
from tests.helpers.convo_helpers import make_profile

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
KILLS = 10
BUDGET = 5.0


def folder(tmp_path: Path, url: str, profiles: int) -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    for index in range(1, profiles + 1):
        profile = make_profile(index)
        profile.profile_id = f"P{index:05d}"
        profile.demographics.name = f"Daniel{index}"
        append_record(RunPaths(run_dir).profiles, profile)
    models = tmp_path / "models.yaml"
    models.write_text(models_yaml(url))
    return run_dir, models


def run_command(run_dir: Path, models: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "intake_eval.cli", "run", "--clinician", "doc", "--patient", "pat", "--turns", "3",
            "--concurrency", "64", "--models", str(models), "--run-dir", str(run_dir), *extra]


def spend(run_dir: Path) -> dict:
    result = CliRunner().invoke(app, ["status", "--run-dir", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["spend"]


def ledger_size(run_dir: Path) -> int:
    path = RunPaths(run_dir).calls
    return path.stat().st_size if path.exists() else 0


def test_billed_equals_the_servers_bill_with_faults_and_no_kill(tmp_path):
    server, billing = billing_server(seed=3)
    with server:
        run_dir, models = folder(tmp_path, server.url, profiles=12)
        done = subprocess.run(run_command(run_dir, models), env=ENV, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        figures = spend(run_dir)
    print(f"no kill: billed ${figures['billed_usd']:.6f} vs server ${billing.bill:.6f}; retries {figures['retries']} "
          f"vs faults {billing.faults}")
    assert billing.fault_count > 0 and billing.faults["truncated"] > 0
    assert figures["retries"] == billing.fault_count  # every injected fault was retried, none missed
    assert figures["unanswered"] == 0
    assert abs(figures["billed_usd"] - billing.bill) <= 0.005 * billing.bill
    assert figures["records_cost_usd"] < figures["billed_usd"]  # the truncated answers were paid, not kept
    assert "saved_by_cache_usd" in figures


@pytest.mark.parametrize(("server_seed", "kill_seed"), [(11, 20261125), (9, 71271)])
def test_billed_holds_across_kills_and_a_budget_stop_holds_on_rerun(tmp_path, server_seed, kill_seed):
    # 3 % truncated bodies (billed), 1 % 500s and 1 % 429s (not billed): a request in flight at a kill may
    # have been answered either way, and the ledger can only weigh it by how often the alias was billed
    # (the budget counts it as billed in full). Server seed 9 once billed $5.0169 on the $5 budget when the
    # budget weighed such requests like status does.
    server, billing = billing_server(seed=server_seed, server_error_rate=0.01, rate_limited_rate=0.01)
    rng = random.Random(kill_seed)
    kills = []
    with server:
        run_dir, models = folder(tmp_path, server.url, profiles=200)
        command = run_command(run_dir, models, "--budget", str(BUDGET))
        while len(kills) < KILLS:
            started, base = time.monotonic(), ledger_size(run_dir)
            grow, wait = rng.randint(2_000, 40_000), rng.uniform(0.3, 2.0)
            process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
            while process.poll() is None and ledger_size(run_dir) < base + grow and time.monotonic() - started < wait + 3:
                time.sleep(0.005)
            if process.poll() is not None:
                break  # it finished (the budget stopped it) before this kill
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            kills.append(ledger_size(run_dir) - base)
        last = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=120, check=False)
        assert last.returncode == 1 and "budget reached" in " ".join(last.stderr.split()), last.stderr[-2000:]
        figures = spend(run_dir)
        served = server.request_count
        again = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 1 and "budget reached" in " ".join(again.stderr.split()), again.stderr[-2000:]
        assert server.request_count == served  # the same budget again sends nothing
    costs = [record_cost(data["usage"]) for data in iter_json_lines(RunPaths(run_dir).conversations("doc"))
             if data.get("status") == "ok"]
    one = billing.one_conversation()  # what the server billed one conversation
    print(f"{len(kills)} kills: billed ${figures['billed_usd']:.4f} (estimated ${figures['billed_estimated_usd']:.4f}"
          f" for {figures['unanswered']} unanswered) vs server ${billing.bill:.4f} "
          f"({(figures['billed_usd'] - billing.bill) / billing.bill:+.3%}); retries {figures['retries']} vs faults "
          f"{billing.fault_count}; budget ${BUDGET} + one conversation ${one:.4f} (server; records' mean "
          f"${sum(costs) / len(costs):.4f}); overshoot ${billing.bill - BUDGET:+.4f}; records' cost "
          f"${figures['records_cost_usd']:.4f}; {len(costs)} conversations; requests {figures['requests']} sent, "
          f"{served} served")
    assert len(kills) == KILLS
    # Every answer the ledger read is counted exactly; a request in flight at a kill has no answer to read and
    # is an estimate, which status names (billed_estimated_usd). Under load the kills catch many (147 of 828
    # requests, $1.04 of a $4.96 bill, once on CI: 0.53 % off), so the estimated part gets its own 5 % on top.
    assert abs(figures["billed_usd"] - billing.bill) <= 0.005 * billing.bill + 0.05 * figures["billed_estimated_usd"]
    # the budget counts requests in flight at a kill as billed in full, and holds cover the conversations in
    # flight at its stop: the server's bill exceeds the budget by at most one conversation
    assert billing.bill <= BUDGET + one
    # faults answered to a process that was killed before reading them cannot be seen; every other one is a retry
    assert figures["retries"] <= billing.fault_count <= figures["retries"] + figures["unanswered"]
