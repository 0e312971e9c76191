"""Two processes on one run folder: while one process holds the run (run_lock.RunLock, its pid in
.lock), every writing command refuses with one `error:` line naming that pid, writes nothing, and
exits 2; `report` (atomic whole-file writes only) cooperates. Processes appending to one JSONL file
at once never interleave half-lines (one os.write per line, O_APPEND)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app

CONFIG = """\
name: locked
seed: 2
profiles: {n: 2, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener]
judges: [offline/judge]
turns: 2
"""
HOLDER = """
import sys
from pathlib import Path
from intake_eval.core.store import RunPaths
from intake_eval.core.run_lock import RunLock
with RunLock(RunPaths(Path(sys.argv[1]))):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A finished run folder, held by another real process."""
    root = tmp_path_factory.mktemp("locked")
    config = root / "study.yaml"
    config.write_text(CONFIG)
    run_dir = root / "run"
    result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    yield run_dir, config, holder.pid
    holder.stdin.close()
    holder.wait(timeout=10)


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


WRITERS = {
    "generate": ["generate", "--n", "2", "--stratified", "--seed", "2"],
    "run": ["run", "--clinician", "offline/screener", "--patient", "offline/patient", "--patient-mode", "tracked",
            "--turns", "2"],
    "judge": ["judge", "--judge", "offline/judge"],
    "study": ["study", "{config}"],
    "demo": ["demo"],
    "qc-patient": ["qc-patient", "--patient", "offline/patient", "--n", "1"],
    "annotate export": ["annotate", "export", "--n", "4"],
}


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_every_writing_command_refuses_a_held_run_folder_naming_the_holder(held, command):
    run_dir, config, pid = held
    before = snapshot(run_dir)
    args = [arg.format(config=config) for arg in WRITERS[command]]
    result = CliRunner().invoke(app, [*args, "--run-dir", str(run_dir)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert f"in use by pid {pid}" in lines[0]
    assert snapshot(run_dir) == before  # nothing written


def test_report_cooperates_with_a_held_run_folder(held):
    run_dir, _, _ = held
    result = CliRunner().invoke(app, ["report", "--quiet", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "report" / "index.html").exists()


APPENDER = """
import sys
from pathlib import Path
from intake_eval.core.store import JsonlWriter
who, n = sys.argv[2], int(sys.argv[3])
with JsonlWriter(Path(sys.argv[1])) as out:
    for i in range(n):
        out.write({"key": f"{who}-{i}", "who": who, "pad": who * (1000 + i % 7000)})
"""


def test_concurrent_appenders_never_interleave_half_lines(tmp_path):
    target = tmp_path / "shared.jsonl"
    writers = [subprocess.Popen([sys.executable, "-c", APPENDER, str(target), who, "400"]) for who in "abc"]
    assert all(w.wait(timeout=120) == 0 for w in writers)
    lines = target.read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [json.loads(line) for line in lines[:-1]]  # every line whole
    assert len(records) == 1200 and len({r["key"] for r in records}) == 1200
    assert all(r["pad"] == r["who"] * len(r["pad"]) for r in records)
    assert os.path.getsize(target) > 1_000_000
