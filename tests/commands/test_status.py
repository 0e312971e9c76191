"""`intake-eval status` answers from the record facts the stages kept (core/record_facts), reading no
record, and gives the same answer as a full read of the records; a record file changed behind the kept
facts' back is read again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core import record_facts
from intake_eval.core.lines import LineSpan, ReadStats
from intake_eval.core.record_facts import FACTS_FILE
from tests.helpers.offline_runs import offline_run
from tests.helpers.report_runs import synth_run


def _status(root: Path, *, as_json: bool = True) -> str:
    result = CliRunner().invoke(app, ["status", "--run-dir", str(root), *(["--json"] if as_json else [])],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def _full_read(root: Path) -> tuple[str, str]:
    """Status as and when every record is read (no kept facts)."""
    (root / FACTS_FILE).unlink(missing_ok=True)
    as_json = _status(root)
    (root / FACTS_FILE).unlink()
    return as_json, _status(root, as_json=False)


def _no_record_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path, span: object, stats: object = None) -> None:
        raise AssertionError(f"status read the records of {path}")

    monkeypatch.setattr(record_facts, "iter_json_records_in", refuse)


def test_first_status_after_the_stages_reads_no_record_and_equals_a_full_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "demo"  # generate, run, forks, judge, patient QC and the report
    made = CliRunner().invoke(app, ["demo", "--run-dir", str(run_dir)])
    assert made.exit_code == 0, made.output
    assert (run_dir / FACTS_FILE).exists()  # kept by the stages as they finished
    with monkeypatch.context() as patched:
        _no_record_read(patched)
        fast = _status(run_dir), _status(run_dir, as_json=False)
    assert fast == _full_read(run_dir)
    data = json.loads(fast[0])
    assert data["stages"]["run"]["counts"]["done"] > 0 and data["answers"]["clinicians"]
    assert any(name.startswith("fork:") for name in data["stages"])
    assert any(name.startswith("qc-patient ") for name in data["stages"])
    assert {row["judge"] for row in data["answers"]["judges"]} == {"offline/judge"}


def test_a_record_appended_after_the_facts_were_kept_is_counted(tmp_path: Path) -> None:
    run_dir = offline_run(tmp_path, n=4)
    before = json.loads(_status(run_dir))
    conversations = sorted((run_dir / "conversations").glob("*.jsonl"))[0]
    first = json.loads(conversations.read_text(encoding="utf-8").splitlines()[0])
    retried = {**first, "status": "model_error", "termination": "model_error", "error": "HTTP 500"}
    with conversations.open("a", encoding="utf-8") as handle:  # a later line supersedes: one conversation fails
        handle.write(json.dumps(retried) + "\n")
    after = _status(run_dir), _status(run_dir, as_json=False)
    assert after == _full_read(run_dir)
    shown = json.loads(after[0])
    assert shown["stages"]["run"]["counts"]["done"] == before["stages"]["run"]["counts"]["done"] - 1
    arm = next(row for row in shown["answers"]["clinicians"] if row["clinician"] == first["clinician"])
    assert arm["failed"] == 1


def test_status_keeps_what_it_read_and_renews_it_when_a_record_changes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    paths = synth_run(tmp_path / "run", n_profiles=4)  # written directly, no stage kept its facts
    first = json.loads(_status(paths.root))
    assert (paths.root / FACTS_FILE).exists()
    with monkeypatch.context() as patched:
        _no_record_read(patched)
        assert json.loads(_status(paths.root)) == first
    conversations = paths.conversation_files()[0]
    kept = conversations.read_text(encoding="utf-8").splitlines()
    conversations.write_text("\n".join(kept[:-1]) + "\n", encoding="utf-8")  # one conversation fewer
    after = json.loads(_status(paths.root))
    clinician = json.loads(kept[-1])["clinician"]
    count = {row["clinician"]: row["conversations"] for row in after["answers"]["clinicians"]}
    assert count[clinician] == {row["clinician"]: row["conversations"]
                                for row in first["answers"]["clinicians"]}[clinician] - 1


def _renamed(line: str, suffix: str) -> str:
    """A record line as another conversation's (its id changed): a new key for the file."""
    record = json.loads(line)
    record["conversation_id"] += suffix
    return json.dumps(record)


def test_status_while_a_stage_appends_folds_the_tails_and_equals_a_full_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = offline_run(tmp_path, n=4)
    _status(run_dir)
    first, second = sorted((run_dir / "conversations").glob("*.jsonl"))
    judgments = sorted((run_dir / "judgments").glob("*/*.jsonl"))
    sizes = {path: path.stat().st_size for path in (first, second, *judgments)}
    lines = {path: path.read_text(encoding="utf-8").splitlines() for path in sizes}
    failed = {**json.loads(lines[first][1]), "status": "model_error", "termination": "model_error"}
    with first.open("a", encoding="utf-8") as handle:  # new conversations, then a corrupt line
        handle.write(_renamed(lines[first][0], "-more") + "\n" + _renamed(lines[first][2], "-again") + "\n")
        handle.write("{ not json\n")
    with second.open("a", encoding="utf-8") as handle:  # one new, then a half-written line
        handle.write(_renamed(lines[second][0], "-more") + "\n" + lines[second][1][:40])
    for path in judgments:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(_renamed(lines[path][0], "-more") + "\n")
    read: list[tuple[Path, int]] = []
    real = record_facts.iter_json_records_in

    def counting(path: Path, span: LineSpan, stats: ReadStats | None = None) -> object:
        read.append((path, span.begin))
        return real(path, span, stats)

    with monkeypatch.context() as patched:
        patched.setattr(record_facts, "iter_json_records_in", counting)
        with pytest.warns(UserWarning, match="corrupt line|half-written"):
            folded = _status(run_dir), _status(run_dir, as_json=False)
    assert {path for path, _begin in read} == set(sizes)
    assert all(begin >= sizes[path] for path, begin in read)  # only the tails
    kept = (run_dir / FACTS_FILE).read_bytes()
    with pytest.warns(UserWarning, match="corrupt line|half-written"):
        assert folded == _full_read(run_dir)
    (run_dir / FACTS_FILE).write_bytes(kept)
    with first.open("a", encoding="utf-8") as handle:  # a kept conversation's line superseded: read whole
        handle.write(json.dumps(failed) + "\n")
    with pytest.warns(UserWarning, match="corrupt line|half-written"):
        superseded = _status(run_dir), _status(run_dir, as_json=False)
        assert superseded == _full_read(run_dir)
    shown, before = (json.JSONDecoder().raw_decode(text)[0] for text in (superseded[0], folded[0]))
    assert shown["stages"]["run"]["counts"]["done"] == before["stages"]["run"]["counts"]["done"] - 1


def test_status_keeps_what_it_folded_while_a_stage_holds_the_folder(tmp_path: Path) -> None:
    from intake_eval.core.run_lock import RunLock
    from intake_eval.core.store import RunPaths

    run_dir = offline_run(tmp_path, n=4)
    conversations = sorted((run_dir / "conversations").glob("*.jsonl"))[0]
    with RunLock(RunPaths(run_dir)):  # a stage is running
        with conversations.open("a", encoding="utf-8") as handle:
            first = conversations.read_text(encoding="utf-8").splitlines()[0]
            handle.write(_renamed(first, "-more") + "\n")
        _status(run_dir)
        kept = json.loads((run_dir / FACTS_FILE).read_text())["files"][f"conversations/{conversations.name}"]
        assert kept["fold"]["end"] == conversations.stat().st_size  # the next status reads from here
