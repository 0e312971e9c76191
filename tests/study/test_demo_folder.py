"""`demo --run-dir` never destroys a user's files: a folder it did not make is refused untouched;
its own earlier output is moved to superseded/, never deleted."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.study.demo_folder import MARKER, prepare_demo_folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def paid_run(folder: Path) -> Path:
    """What a paid study folder looks like: a manifest, records, the cache and the user's notes."""
    (folder / "conversations").mkdir(parents=True)
    (folder / "manifest.json").write_text('{"stages": {"run": {"status": "done"}}}\n')
    (folder / "conversations" / "gpt-4o.jsonl").write_text('{"conversation_id": "P1.gpt-4o", "status": "ok"}\n' * 72)
    (folder / "cache.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x01" * 4096)
    (folder / "NOTES.txt").write_text("paid for with grant money\n")
    return folder


def test_demo_on_a_folder_of_paid_records_is_refused_and_leaves_every_file(tmp_path):
    run = paid_run(tmp_path / "paid")
    before = snapshot(run)
    result = CliRunner().invoke(app, ["demo", "--run-dir", str(run)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "not made by `intake-eval demo`" in lines[0]
    assert snapshot(run) == before
    assert sorted(p.name for p in run.iterdir()) == ["NOTES.txt", "cache.sqlite", "conversations", "manifest.json"]


def test_a_folder_of_other_files_is_refused_too(tmp_path):
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "thesis.docx").write_bytes(b"PK\x03\x04")
    result = CliRunner().invoke(app, ["demo", "--run-dir", str(folder)])
    assert result.exit_code == 2 and snapshot(folder) == {"thesis.docx": b"PK\x03\x04"}


def test_a_marker_that_is_a_symlink_does_not_count(tmp_path):
    folder = paid_run(tmp_path / "paid")
    (folder / MARKER).symlink_to(tmp_path / "elsewhere")
    result = CliRunner().invoke(app, ["demo", "--run-dir", str(folder)])
    assert result.exit_code == 2
    assert (folder / "NOTES.txt").exists() and (folder / "manifest.json").exists()


def test_the_demos_own_folder_is_reset_by_moving_its_contents_aside(tmp_path):
    folder = tmp_path / "demo"
    prepare_demo_folder(folder)  # a new folder: made, marked
    assert (folder / MARKER).is_file()
    (folder / "manifest.json").write_text("{}\n")
    (folder / "conversations").mkdir()
    (folder / "conversations" / "offline__screener.jsonl").write_text("{}\n")
    (folder / "NOTES.txt").write_text("a note in the demo folder\n")
    prepare_demo_folder(folder)
    assert sorted(p.name for p in folder.iterdir()) == [".lock", MARKER, "superseded"]
    [kept] = list((folder / "superseded").iterdir())
    assert kept.name.startswith("demo-")
    assert (kept / "NOTES.txt").read_text() == "a note in the demo folder\n"
    assert (kept / "conversations" / "offline__screener.jsonl").read_text() == "{}\n"
    prepare_demo_folder(folder)  # again: the earlier superseded/ stays where it is
    assert len(list((folder / "superseded").iterdir())) == 1
    assert (kept / "NOTES.txt").exists()


def test_an_empty_folder_is_used(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    prepare_demo_folder(folder)
    assert (folder / MARKER).is_file()
