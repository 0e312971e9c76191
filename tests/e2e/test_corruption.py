"""A damaged run folder: a corrupt line in the middle of a JSONL file, a half-written last line, a
missing or unreadable manifest, a folder from an older schema version. Every command (report,
judge, run, status) answers with a clear message and a safe path forward — skip with a warning
and a count, repair by rerunning, or refuse with one `error:` line and exit 2 — never a traceback
or a silently short number.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths

CONFIG = """\
name: damaged
seed: 3
profiles: {n: 3, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener, offline/anchored]
judges: [offline/judge]
turns: 4
concurrency: 4
"""
RUN = ["run", "--clinician", "offline/screener", "--clinician", "offline/anchored", "--patient", "offline/patient",
       "--patient-mode", "tracked", "--turns", "4"]
JUDGE = ["judge", "--judge", "offline/judge"]
COMMANDS = {"report": ["report", "--quiet"], "judge": JUDGE, "run": RUN, "status": ["status"]}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base")
    (root / "study.yaml").write_text(CONFIG)
    run_dir = root / "run"
    result = CliRunner().invoke(app, ["study", str(root / "study.yaml"), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir


@pytest.fixture
def damaged(base, tmp_path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(base, run_dir)
    return run_dir


def cli(run_dir: Path, command: str):
    result = CliRunner().invoke(app, [*COMMANDS[command], "--run-dir", str(run_dir)])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def corrupt_middle_line(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:50] + b"\x00GARBAGE"
    path.write_bytes(b"\n".join(lines))


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def conversation_rows(run_dir: Path) -> list[dict]:
    with open(RunPaths(run_dir).metrics("conversations"), newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------- a corrupt line mid-file


def test_corrupt_middle_line_report_skips_it_with_a_warning_and_says_how_many(damaged):
    target = RunPaths(damaged).conversations("offline/screener")
    corrupt_middle_line(target)
    result = cli(damaged, "report")
    assert result.exit_code == 0, result.output
    assert f"warning: {target}:2: skipping a corrupt line" in result.output
    summary = (damaged / "report" / "summary.md").read_text()
    assert "1 unreadable line(s) skipped" in summary  # the count, next to the numbers it shortens
    assert "offline/screener: 1 of 3 profiles have no conversation yet" in summary
    # the lost line is a transcript; its judgment (labels, clinician, profile) is intact and still scored
    assert len(conversation_rows(damaged)) == 6


def test_a_usage_count_no_call_reaches_is_an_invalid_record_skipped_with_a_warning(damaged):
    target = RunPaths(damaged).judgments("offline/judge", "offline/anchored")
    lines = target.read_text().splitlines()
    record = json.loads(lines[0])
    record["usage"]["prompt_tokens"] = 10**25  # past every 64-bit column of metrics/*.parquet
    target.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    result = cli(damaged, "report")
    assert result.exit_code == 0, result.output
    assert f"warning: {target}:1: skipping a line that is not a valid Judgment record (usage.prompt_tokens" \
        in result.output
    assert len(conversation_rows(damaged)) == 5  # its judgment is not scored (rerunning judge redoes it)


def test_corrupt_middle_line_rerunning_the_stage_repairs_the_file(damaged, base):
    paths = RunPaths(damaged)
    corrupt_middle_line(paths.conversations("offline/screener"))
    result = cli(damaged, "run")
    assert result.exit_code == 0, result.output
    assert "skipping a corrupt line" in result.output
    # the lost conversation is redone and the compacted file equals the undamaged one (offline = deterministic)
    assert paths.conversations("offline/screener").read_bytes() == RunPaths(base).conversations("offline/screener").read_bytes()

    corrupt_middle_line(paths.judgments("offline/judge", "offline/anchored"))
    result = cli(damaged, "judge")
    assert result.exit_code == 0, result.output
    assert "skipping a corrupt line" in result.output and "1 judged ok" in result.output
    assert (paths.judgments("offline/judge", "offline/anchored").read_bytes()
            == RunPaths(base).judgments("offline/judge", "offline/anchored").read_bytes())
    assert len(conversation_rows(damaged)) == 6


def test_corrupt_line_status_still_answers(damaged):
    corrupt_middle_line(RunPaths(damaged).conversations("offline/screener"))
    result = cli(damaged, "status")
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------- a half-written last line


def test_truncated_last_line_is_ignored_by_report_and_redone_by_judge(damaged, base):
    paths = RunPaths(damaged)
    target = paths.judgments("offline/judge", "offline/screener")
    target.write_bytes(target.read_bytes()[:-200])
    result = cli(damaged, "report")
    assert result.exit_code == 0, result.output
    assert "half-written last line" in result.output
    summary = (damaged / "report" / "summary.md").read_text()
    assert "a half-written last line ignored" in summary
    assert "judge offline/judge: 1 of 6 finished conversations not judged yet" in summary
    assert len(conversation_rows(damaged)) == 5

    result = cli(damaged, "judge")
    assert result.exit_code == 0, result.output
    assert "1 judged ok" in result.output
    assert target.read_bytes() == RunPaths(base).judgments("offline/judge", "offline/screener").read_bytes()
    assert len(conversation_rows(damaged)) == 6


# ---------------------------------------------------------------- the manifest


def test_missing_manifest(damaged, base):
    paths = RunPaths(damaged)
    paths.manifest.unlink()
    status = cli(damaged, "status")
    assert status.exit_code == 2 and status.output.startswith("error: ") and "no manifest" in status.output
    report = cli(damaged, "report")
    assert report.exit_code == 0, report.output  # reads the records; nothing to check against
    run = cli(damaged, "run")
    assert run.exit_code == 0, run.output
    assert "manifest.json is missing but" in run.output  # said, not silently resumed
    for clinician in ("offline/screener", "offline/anchored"):
        assert paths.conversations(clinician).read_bytes() == RunPaths(base).conversations(clinician).read_bytes()
    assert json.loads(paths.manifest.read_text())["stages"]["run"]["status"] == "done"  # rebuilt


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unreadable_manifest_is_refused_with_one_line(damaged, command):
    RunPaths(damaged).manifest.write_text('{"schema_version": 1, "stages": {')
    before = snapshot(damaged)
    result = cli(damaged, command)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and "manifest.json" in result.output and "unreadable" in result.output
    assert snapshot(damaged) == before  # nothing written


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_older_schema_run_folder_is_refused_and_left_untouched(damaged, command):
    manifest = RunPaths(damaged).manifest
    data = json.loads(manifest.read_text())
    data["schema_version"] = 0
    manifest.write_text(json.dumps(data))
    before = snapshot(damaged)
    result = cli(damaged, command)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and "schema_version 0" in lines[0], result.output
    assert snapshot(damaged) == before
