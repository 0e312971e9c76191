"""A run folder's lock and record files that are symbolic links are refused by name: nothing is
written through them, and what they point at is untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.adversarial_cases import CONVERSATIONS, JUDGE, RUN, STUDY_YAML, build_base, cli


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("symlinks"))


def copy_run(base: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(base, run, symlinks=True)
    return run


def args(command: tuple[str, ...], run: Path, tmp: Path) -> list[str]:
    return [arg.format(run=run, tmp=tmp) for arg in command]


def one_error_line(done, *names: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for name in names:
        assert name in lines[0]
    return lines[0]


@pytest.mark.parametrize("command", [RUN, JUDGE, ("report", "--run-dir", "{run}")])
def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(base, tmp_path, command):
    run = copy_run(base, tmp_path)
    target = tmp_path / "precious.txt"
    target.write_text("do not truncate me\n")
    (run / ".lock").unlink(missing_ok=True)
    (run / ".lock").symlink_to(target)
    done = cli(*args(command, run, tmp_path))
    if command[0] == "report" and done.returncode == 0:
        pass  # the report reads without the lock when it is free; it must still not write through the link
    else:
        one_error_line(done, ".lock", "symbolic link")
    assert target.read_text() == "do not truncate me\n"


def test_a_record_file_that_is_a_symlink_is_refused_and_nothing_lands_outside(base, tmp_path):
    run = copy_run(base, tmp_path)
    outside = tmp_path / "outside.jsonl"
    records = run / CONVERSATIONS
    outside.write_bytes(records.read_bytes()[: records.read_bytes().index(b"\n") + 1])  # one record, others to redo
    before = outside.read_bytes()
    records.unlink()
    records.symlink_to(outside)
    done = cli(*args(RUN, run, tmp_path))
    one_error_line(done, CONVERSATIONS.split("/")[-1], "symbolic link")
    assert outside.read_bytes() == before
    assert records.is_symlink()


def test_a_stage_log_that_is_a_symlink_is_refused(base, tmp_path):
    run = copy_run(base, tmp_path)
    outside = tmp_path / "log.jsonl"
    outside.write_text("")
    log = run / "stage_log.jsonl"
    log.unlink(missing_ok=True)
    log.symlink_to(outside)
    (tmp_path / "study.yaml").write_text(STUDY_YAML)
    done = cli(*args(("study", "{tmp}/study.yaml", "--run-dir", "{run}"), run, tmp_path))
    one_error_line(done, "stage_log.jsonl", "symbolic link")
    assert outside.read_text() == ""
