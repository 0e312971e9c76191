"""SIGKILL a real `intake-eval study` process at random moments (seeded), resume, and compare the
run folder byte for byte with an uninterrupted run (offline backends are deterministic).

Cheap by construction: one tiny offline study. Kills come in rounds: a fresh run folder is killed,
restarted and killed again until a restart finishes before its kill; the round is then resumed to
the end and compared byte for byte with the uninterrupted run. Each restart resumes from whatever
the previous kill left. The moment of each kill is drawn (seeded) from: during start-up, after k
more records reach disk (profiles, conversations, judgments), while metrics/*.csv are written,
while the report is written, or at a random time — so kills land in every stage, not mostly in
the report (which takes most of a tiny study's wall time).
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
PROFILES = 3
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


def record_lines(run_dir: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for pattern in ("profiles.jsonl", "conversations/*.jsonl",
                                                               "judgments/*/*.jsonl") for path in run_dir.glob(pattern))


def newest_mtime(run_dir: Path, pattern: str) -> float:
    return max((path.stat().st_mtime for path in run_dir.glob(pattern)), default=0.0)


def kill_trigger(rng: random.Random, run_dir: Path, started: float, started_wall: float):
    """A random moment, named by what has happened since this restart: (label, check() -> bool)."""
    kind = rng.choice(["start-up", "records", "records", "metrics", "report", "any time"])
    if kind == "start-up":
        delay = rng.uniform(0.05, 1.0)
        return f"start-up+{delay:.2f}s", lambda: time.monotonic() - started > delay
    if kind == "records":  # after k more profile/conversation/judgment lines
        base, k = record_lines(run_dir), rng.randint(1, 8)
        return f"records+{k}", lambda: record_lines(run_dir) >= base + k
    if kind == "metrics":  # while metrics/*.csv are being written
        return "metrics", lambda: newest_mtime(run_dir, "metrics/*.csv") > started_wall
    if kind == "report":  # while the report (transcript shards, index.html) is being written
        return "report", lambda: (newest_mtime(run_dir, "report/.*") > started_wall
                                  or newest_mtime(run_dir, "report/*") > started_wall)
    delay = rng.uniform(0.2, 6.0)
    return f"at {delay:.2f}s", lambda: time.monotonic() - started > delay


@pytest.mark.slow
def test_study_killed_at_random_moments_resumes_byte_identical(tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text(CONFIG)
    reference = tmp_path / "reference"
    done = subprocess.run(study_command(config, reference), env=ENV, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = compared_files(reference)
    assert len(expected) >= 6 and all(expected.values())

    rng = random.Random(20261121)
    kills: list[tuple[int, str]] = []  # (round, the moment of the kill)
    round_number = 0
    while len(kills) < KILLS:
        # One round: a fresh folder, killed again and again until a restart gets through (or the kills
        # run out), then resumed to the end and compared byte for byte.
        run_dir = tmp_path / f"round{round_number}"
        while len(kills) < KILLS:
            started, started_wall = time.monotonic(), time.time() - 0.01
            process = subprocess.Popen(study_command(config, run_dir), env=ENV, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
            label, due = kill_trigger(rng, run_dir, started, started_wall)
            while process.poll() is None and not due():
                time.sleep(0.005)
            if process.poll() is not None:
                assert process.returncode == 0
                break  # the study finished before this kill: the round is over
            os.killpg(process.pid, signal.SIGKILL)  # the process and any helper it forked
            process.wait()
            kills.append((round_number, label))
        resumed = subprocess.run(study_command(config, run_dir), env=ENV, capture_output=True, text=True, timeout=300,
                                 check=False)
        assert resumed.returncode == 0, (kills, resumed.stderr[-2000:])
        assert "Traceback" not in resumed.stderr
        actual = compared_files(run_dir)
        assert sorted(actual) == sorted(expected), kills
        for name in expected:
            assert actual[name] == expected[name], (name, kills)
        assert (run_dir / "report" / "index.html").exists()
        round_number += 1
    print("kills:", kills)  # shown with -s
    assert len({label.split("+")[0] for _, label in kills}) >= 3, kills  # spread over the pipeline
