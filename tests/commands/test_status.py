"""`intake-eval status` answers from the facts it kept while the folder is unchanged, and reads the records
again once a record file changes."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.commands.status import STATUS_CACHE
from tests.helpers.report_runs import synth_run


def _status(root: Path) -> dict:
    result = CliRunner().invoke(app, ["status", "--run-dir", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_status_is_kept_and_renewed_when_a_record_changes(tmp_path: Path) -> None:
    paths = synth_run(tmp_path / "run", n_profiles=4)
    first = _status(paths.root)
    assert (paths.root / STATUS_CACHE).exists()
    assert _status(paths.root) == first
    conversations = paths.conversation_files()[0]
    kept = conversations.read_text(encoding="utf-8").splitlines()
    conversations.write_text("\n".join(kept[:-1]) + "\n", encoding="utf-8")  # one conversation fewer
    after = _status(paths.root)
    clinician = json.loads(kept[-1])["clinician"]
    count = {row["clinician"]: row["conversations"] for row in after["answers"]["clinicians"]}
    assert count[clinician] == {row["clinician"]: row["conversations"]
                                for row in first["answers"]["clinicians"]}[clinician] - 1
