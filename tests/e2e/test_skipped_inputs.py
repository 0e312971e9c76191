"""A run or study that is short of records because unreadable input lines were skipped says so with
counts per file: in the command's final summary and in the report's incomplete-run banner."""

from __future__ import annotations

import html
from pathlib import Path


from tests.helpers.cli import invoke
from tests.commands.test_study import TINY


def said(result) -> str:
    return " ".join(result.output.split())


def banner(run_dir: Path) -> str:
    page = html.unescape((run_dir / "report" / "index.html").read_text())
    start = page.index('id="notes"')
    return " ".join(page[start:page.index("</div>", start)].split())


def test_a_run_short_of_a_corrupt_profile_says_so_in_its_summary_and_the_report_banner(tmp_path):
    run_dir = tmp_path / "run"
    assert invoke("generate", "--n", "4", "--run-dir", str(run_dir)).exit_code == 0
    profiles = run_dir / "profiles.jsonl"
    lines = profiles.read_text().splitlines(keepends=True)
    lines[1] = "{not json\n"
    profiles.write_text("".join(lines))
    result = invoke("run", "--clinician", "offline/screener", "--patient", "offline/patient", "--turns", "3",
                    "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    assert "run: 3/3 conversations ok" in said(result)
    assert "skipped inputs: 1 unreadable lines left out (profiles.jsonl: 1)" in said(result)
    assert invoke("report", "--run-dir", str(run_dir)).exit_code == 0
    assert "profiles.jsonl: 1 unreadable line(s) skipped; the results are short by those records" in banner(run_dir)


def test_a_study_with_unreadable_input_lines_ends_incomplete_naming_each_file_and_count(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(turns=3))
    run_dir = tmp_path / "study"
    assert invoke("study", str(config), "--run-dir", str(run_dir)).exit_code == 0
    other = run_dir / "conversations" / "offline__other.jsonl"  # an earlier clinician's file, damaged
    other.write_text('{"conversation_id": 7}\n{broken\n')
    judged = next((run_dir / "judgments").glob("*/*.jsonl"))
    before = judged.read_bytes()
    result = invoke("study", str(config), "--run-dir", str(run_dir))
    assert result.exit_code == 1, result.output
    assert ("2 unreadable input lines left out, the study is short by those records "
            "(conversations/offline__other.jsonl: 2)") in said(result)
    assert judged.read_bytes() == before  # the finished study is untouched
    assert "offline__other.jsonl: 2 unreadable line(s) skipped" in banner(run_dir)
