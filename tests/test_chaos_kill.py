"""SIGKILL a real `intake-eval study` process at random moments (seeded), resume, and compare the
run folder byte for byte with an uninterrupted run (offline backends are deterministic).

Cheap by construction: one tiny offline study; the kills are chained on one run folder (kill,
restart, kill again, …), each at a random delay drawn over the uninterrupted run's duration, so
they land in every stage — generation, conversations, judging, metrics, report — and each restart
resumes from whatever the previous kill left. Then a final resume runs to completion.
INTAKE_EVAL_KILLS sets the number of kills (default 10, the issue's figure).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

KILLS = int(os.environ.get("INTAKE_EVAL_KILLS", "10"))
CONFIG = """\
name: killme
seed: 3
profiles: {n: 3, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener, offline/anchored]
judges: [offline/judge]
turns: 4
concurrency: 2
"""
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}


def study_command(config: Path, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "intake_eval.cli", "study", str(config), "--run-dir", str(run_dir)]


def compared_files(run_dir: Path) -> dict[str, bytes]:
    """The records and tables: profiles, conversations, judgments, metrics CSVs."""
    patterns = ("profiles.jsonl", "conversations/*.jsonl", "judgments/*/*.jsonl", "metrics/*.csv")
    return {str(path.relative_to(run_dir)): path.read_bytes() for pattern in patterns
            for path in sorted(run_dir.glob(pattern))}


def phase_reached(run_dir: Path) -> str:
    """Roughly where the kill landed, for the failure message."""
    for phase, pattern in (("metrics/report", "metrics/*.csv"), ("judge", "judgments/*/*.jsonl"),
                           ("run", "conversations/*.jsonl"), ("generate", "profiles.jsonl")):
        if any(run_dir.glob(pattern)):
            return phase
    return "start-up"


@pytest.mark.slow
def test_study_killed_at_random_moments_resumes_byte_identical(tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text(CONFIG)
    reference = tmp_path / "reference"
    started = time.monotonic()
    done = subprocess.run(study_command(config, reference), env=ENV, capture_output=True, text=True, timeout=300)
    duration = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    expected = compared_files(reference)
    assert len(expected) >= 6 and all(expected.values())

    rng = random.Random(20261121)
    run_dir = tmp_path / "killed"
    outcomes = []
    for _ in range(KILLS):
        delay = rng.uniform(0.3, duration)
        process = subprocess.Popen(study_command(config, run_dir), env=ENV, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        try:
            process.wait(timeout=delay)
            outcomes.append(("finished", process.returncode))  # a restart that had little left to do
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the process and any helper it forked
            process.wait()
            outcomes.append(("killed", round(delay, 2), phase_reached(run_dir)))
        finally:
            process.stderr.close()
        if outcomes[-1][0] == "finished":
            assert process.returncode == 0
            # the study finished: start over so that later kills still interrupt real work
            for path in sorted(run_dir.rglob("*"), reverse=True):
                path.unlink() if path.is_file() or path.is_symlink() else path.rmdir()
    assert sum(1 for kind in outcomes if kind[0] == "killed") >= max(1, KILLS // 2), outcomes

    resumed = subprocess.run(study_command(config, run_dir), env=ENV, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Traceback" not in resumed.stderr
    actual = compared_files(run_dir)
    assert sorted(actual) == sorted(expected), outcomes
    for name in expected:
        assert actual[name] == expected[name], (name, outcomes)
    assert (run_dir / "report" / "index.html").exists()
