"""metrics/patient_population.csv counts each conversation's latest line: a folder whose conversation file
repeats a conversation (uncompacted: a crash mid-stage, then a rerun) gives its compacted copy's table."""

from __future__ import annotations

import shutil

from intake_eval.core.store import RunPaths, append_record, compact
from intake_eval.metrics.patient_population import population_rows
from tests.helpers.judgment_builders import conversation


def _folder(root):
    paths = RunPaths(root)
    for profile_id in ("P00000", "P00001"):
        earlier = conversation([("q", "Thanks, that solves it, I feel fine now.")] * 2, profile_id=profile_id)
        append_record(paths.conversations("offline/screener"), earlier.model_copy(update={"status": "model_error"})
                      if profile_id == "P00001" else earlier)
        later = conversation([("q", "I have not slept properly in weeks and I drink most nights.")] * 4,
                             profile_id=profile_id)
        append_record(paths.conversations("offline/screener"), later)  # the same id: it supersedes the earlier
    return paths


def test_an_uncompacted_folder_gives_the_compacted_folders_population(tmp_path):
    uncompacted = _folder(tmp_path / "uncompacted")
    shutil.copytree(uncompacted.root, tmp_path / "compacted")
    compacted = RunPaths(tmp_path / "compacted")
    for path in compacted.conversation_files():
        compact(path, "conversation_id")
    rows = population_rows(uncompacted)
    assert rows == population_rows(compacted)
    (row,) = rows
    assert row["replies"] == 2 * (4 + 1)  # each profile: the later line's four replies and its opening
