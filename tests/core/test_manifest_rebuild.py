"""`status --rebuild-manifest`: a malformed manifest.json is rebuilt from the records (stages, models,
counts), the malformed file is kept, and the study resumes on it without a single model call."""

from __future__ import annotations

import json
from pathlib import Path


from intake_eval.core.store import RunPaths
from tests.helpers.cli import invoke
from tests.commands.test_study import TINY


def record_bytes(run_dir: Path) -> dict[str, bytes]:
    paths = RunPaths(run_dir)
    return {str(p): p.read_bytes() for p in [paths.profiles, *paths.conversation_files(), *paths.judgment_files()]}


def test_a_malformed_manifest_is_rebuilt_from_the_records_and_the_study_resumes_without_calls(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(turns=3))
    run_dir = tmp_path / "study"
    assert invoke("study", str(config), "--run-dir", str(run_dir)).exit_code == 0
    original = json.loads((run_dir / "manifest.json").read_text())
    records = record_bytes(run_dir)
    malformed = json.dumps({**original, "stages": {**original["stages"], "run": "done"}})
    (run_dir / "manifest.json").write_text(malformed)

    refused = invoke("status", "--run-dir", str(run_dir))
    assert refused.exit_code == 2 and "status --rebuild-manifest" in " ".join(refused.output.split())

    rebuilt = invoke("status", "--rebuild-manifest", "--run-dir", str(run_dir))
    assert rebuilt.exit_code == 0, rebuilt.output
    kept = list(run_dir.glob("manifest.json.malformed-*"))
    assert len(kept) == 1 and kept[0].read_text() == malformed  # kept as it was, never deleted
    data = json.loads((run_dir / "manifest.json").read_text())
    stages = data["stages"]
    assert {"generate", "run", "judge:offline/judge"} <= set(stages)
    assert all(stage["status"] == "rebuilt" and "config_hash" not in stage for stage in stages.values())
    assert set(stages["run"]["additive_models"]["clinician"]) == {"offline/screener", "offline/anchored"}
    for name in ("generate", "run", "judge:offline/judge"):
        assert stages[name]["counts"]["done"] == original["stages"][name]["counts"].get(
            "done", original["stages"][name]["counts"].get("ok", original["stages"][name]["counts"].get("profiles")))
    assert stages["run"]["config"]["patient"] == "offline/patient" and stages["run"]["config"]["turns"] == 3
    assert record_bytes(run_dir) == records

    shown = invoke("status", "--run-dir", str(run_dir), "--json")
    assert shown.exit_code == 0
    assert json.loads(shown.output)["stages"]["run"]["usage"]["offline/screener"]["calls"] > 0  # spend from records

    resumed = invoke("study", str(config), "--run-dir", str(run_dir))
    assert resumed.exit_code == 0, resumed.output
    assert "0 model calls this time" in " ".join(resumed.output.split())
    assert record_bytes(run_dir) == records

    again = invoke("status", "--rebuild-manifest", "--run-dir", str(run_dir))  # a readable manifest is refused
    assert again.exit_code == 2
    errors = [line for line in again.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "manifest.json" in errors[0] and "--rebuild-manifest" in " ".join(again.output.split())
