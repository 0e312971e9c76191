"""`intake-eval run` on the offline participants: the study's shape, disclosure discipline, and
crash-resume (a real subprocess SIGKILLed mid-run) giving a file equal to an uninterrupted run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.catalog.classifier import classify
from intake_eval.cli import app
from intake_eval.core.records import Conversation, Profile
from intake_eval.core.store import RunPaths, iter_records, latest_by_key
from intake_eval.simulated.patient import distinctive_segments
from tests.helpers.convo_helpers import write_generated_profiles

OFFLINE = ["--clinician", "offline/screener", "--clinician", "offline/anchored", "--patient", "offline/patient"]
CLI = [str(Path(sys.executable).with_name("intake-eval"))]


@pytest.fixture(scope="module")
def profiles_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("profiles") / "profiles.jsonl"
    write_generated_profiles(path, 12)
    return path


def fresh_run(tmp_path: Path, profiles_file: Path, name: str = "run") -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "profiles.jsonl").write_bytes(profiles_file.read_bytes())
    return run_dir


def conversations(run_dir: Path) -> list[Conversation]:
    paths = RunPaths(run_dir)
    return [c for path in paths.conversation_files() for c in iter_records(path, Conversation)]


def symptom_texts(profile: Profile) -> dict[str, list[str]]:
    """Per hidden domain, its symptom texts that no other domain of the profile shares (the
    rendered phenomenology copies them verbatim, so a disclosure carries them)."""
    own = distinctive_segments(profile)
    return {draw.domain: [t for t in draw.symptoms if t in own[draw.domain]] for draw in profile.hidden}


def hidden_text_in(reply: str, own: dict[str, list[str]], domains: list[str]) -> set[str]:
    return {domain for domain in domains if any(text in reply for text in own[domain])}


@pytest.mark.parametrize("mode", ["prompted", "tracked"])
def test_offline_run_has_the_study_shape_and_the_patient_never_discloses_unasked(tmp_path, profiles_file, mode):
    run_dir = fresh_run(tmp_path, profiles_file)
    result = CliRunner().invoke(app, ["run", *OFFLINE, "--patient-mode", mode, "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    records = conversations(run_dir)
    profiles = latest_by_key(run_dir / "profiles.jsonl", Profile, "profile_id")
    assert len(records) == 2 * 12 and {c.clinician for c in records} == {"offline/screener", "offline/anchored"}
    disclosed_any = 0
    for record in records:
        assert record.ok and record.termination == "completed" and record.opening
        assert [t.turn for t in record.turns] == list(range(1, 13))
        profile = profiles[record.profile_id]
        own = symptom_texts(profile)
        hidden = profile.hidden_domains
        assert not hidden_text_in(record.opening, own, hidden), record.conversation_id
        asked: set[str] = set()
        for turn in record.turns:
            asked |= set(classify(turn.clinician).domains)
            allowed = set(turn.tracker.unlocked_after) if mode == "tracked" else asked
            leaked = hidden_text_in(turn.patient, own, hidden) - allowed
            assert not leaked, f"{record.conversation_id} turn {turn.turn} disclosed unasked {leaked}"
            disclosed_any += bool(hidden_text_in(turn.patient, own, hidden))
            assert (turn.tracker is not None) == (mode == "tracked")
    assert disclosed_any > 0  # the screener does surface hidden domains when it asks
    # The same opening for both clinicians of a profile (a paired comparison).
    openings = {}
    for record in records:
        openings.setdefault(record.profile_id, set()).add(record.opening)
    assert all(len(texts) == 1 for texts in openings.values())


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path, profiles_file):
    args = ["run", *OFFLINE, "--trials", "3", "--concurrency", "2"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
    whole = fresh_run(tmp_path, profiles_file, "whole")
    subprocess.run([*CLI, *args, "--run-dir", str(whole)], env=env, check=True, capture_output=True)

    crashed = fresh_run(tmp_path, profiles_file, "crashed")
    target = RunPaths(crashed).conversations("offline/screener")
    process = subprocess.Popen([*CLI, *args, "--run-dir", str(crashed)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not target.exists() or target.read_bytes().count(b"\n") < 5):
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    process.wait()
    partial = target.read_bytes().count(b"\n") if target.exists() else 0
    assert 5 <= partial < 36, "the run was not interrupted mid-way"

    result = subprocess.run([*CLI, *args, "--run-dir", str(crashed)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "already done" in result.stderr
    for alias in ("offline/screener", "offline/anchored"):
        resumed = RunPaths(crashed).conversations(alias).read_bytes()
        assert resumed == RunPaths(whole).conversations(alias).read_bytes()
        assert resumed.count(b"\n") == 12 * 3


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path, profiles_file):
    run_dir = fresh_run(tmp_path, profiles_file)
    target = RunPaths(run_dir).conversations("offline/screener")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION", "COLUMNS": "200"}
    process = subprocess.Popen([*CLI, "run", *OFFLINE, "--trials", "3", "--run-dir", str(run_dir)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not target.exists() or target.read_bytes().count(b"\n") < 3):
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again to resume" in stderr
    assert "Traceback" not in stderr
    data = target.read_bytes()
    assert data.endswith(b"\n") and 3 <= data.count(b"\n") < 36  # whole lines only, compacted
    assert '"status": "interrupted"' in (run_dir / "manifest.json").read_text()


def test_a_changed_configuration_is_refused_unless_forced(tmp_path, profiles_file):
    run_dir = fresh_run(tmp_path, profiles_file)
    base = ["run", *OFFLINE, "--limit", "1", "--run-dir", str(run_dir)]
    first = ["run", "--clinician", "offline/screener", "--patient", "offline/patient", "--limit", "1",
             "--run-dir", str(run_dir), "--turns", "2"]
    assert CliRunner().invoke(app, first).exit_code == 0
    # Adding a clinician later is a resume, not a change.
    more = CliRunner().invoke(app, [*base, "--turns", "2"])
    assert more.exit_code == 0 and "1 ran, 1 already done" in more.output, more.output
    refused = CliRunner().invoke(app, [*base, "--turns", "3"])
    assert refused.exit_code == 2 and "turns: 2 → 3" in refused.output and "--force" in refused.output
    forced = CliRunner().invoke(app, [*base, "--turns", "3", "--force"])
    assert forced.exit_code == 0, forced.output
    assert list((run_dir / "superseded").glob("run-*/conversations/offline__screener.jsonl"))
    assert all(len(c.turns) == 3 for c in conversations(run_dir))
