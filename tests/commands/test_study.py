"""`intake-eval demo`, `study` and `status` end to end on the offline participants (real files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intake_eval.core.records import Conversation, Judgment
from intake_eval.core.store import RunPaths, iter_records
from tests.helpers.cli import invoke

ROOT = Path(__file__).resolve().parents[2]
TINY = """\
name: tiny
seed: 3
profiles: {{n: 4, mode: stratified}}
generator: offline/generator
patient: {{model: offline/patient, mode: tracked}}
clinicians: [offline/screener, offline/anchored]
judges: [offline/judge]
turns: {turns}
concurrency: 8
"""


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.slow
def test_demo_runs_end_to_end_prints_the_report_and_a_rerun_makes_zero_calls(tmp_path):
    run_dir = tmp_path / "demo"
    result = invoke("demo", "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    report = run_dir / "report" / "index.html"
    assert str(report) in result.output.splitlines()[-1]
    assert report.stat().st_size > 10_000
    paths = RunPaths(run_dir)
    conversations = [c for alias in ("offline/screener", "offline/drifting", "offline/anchored")
                     for c in iter_records(paths.conversations(alias), Conversation)]
    intakes = [c for c in conversations if c.fork is None]
    assert len(intakes) == 108 and all(c.ok for c in conversations)
    assert len(conversations) == 108 + 108  # every intake closes at some turn, so each has its could-it-ask fork
    assert all(len(c.turns) >= 1 and c.opening for c in conversations)
    judged = [j for path in paths.judgment_files() for j in iter_records(path, Judgment)]
    assert sorted(j.conversation_id for j in judged) == sorted(c.conversation_id for c in conversations)
    rows = (paths.metrics("conversations")).read_text().strip().splitlines()
    assert len(rows) == 1 + 216  # header + (intakes and forks) × judges
    # the analyses show spread: the drifting clinician sits strictly between the ceiling and the floor
    import csv

    with open(paths.metrics("clinicians"), encoding="utf-8") as handle:
        coverage = {r["clinician"]: float(r["mean_active_coverage"]) for r in csv.DictReader(handle)
                    if r["condition"] == "minimal"}  # the intakes, not their forks
    assert coverage["offline/anchored"] < coverage["offline/drifting"] < coverage["offline/screener"]
    with open(paths.metrics("capacity_gap"), encoding="utf-8") as handle:
        gap = {r["clinician"]: float(r["capacity_gap"]) for r in csv.DictReader(handle) if r["scope"] == "clinician"}
    assert gap["offline/screener"] == 0 < gap["offline/drifting"] < gap["offline/anchored"]
    for name in ("domain_events", "probe_curves", "cost", "cost_per_domain"):
        assert paths.metrics(name).exists()
    page = report.read_text(encoding="utf-8")
    assert "When domains get probed" in page and "Cost by role" in page and "Leak-adjusted" in page
    first = manifest(run_dir)["study"]["history"][-1]
    assert first["status"] == "done" and first["calls"] > 0

    report.unlink()
    again = invoke("study", str(ROOT / "configs" / "demo.yaml"), "--run-dir", str(run_dir))
    assert again.exit_code == 0, again.output
    assert report.exists()  # rebuilt
    history = manifest(run_dir)["study"]["history"]
    assert len(history) == 2
    assert history[-1]["calls"] == 0 and history[-1]["cache_hits"] == 0 and history[-1]["status"] == "done"


@pytest.mark.slow
def test_changed_config_is_refused_with_the_difference_and_force_starts_over(tmp_path):
    config = tmp_path / "tiny.yaml"
    run_dir = tmp_path / "run"
    config.write_text(TINY.format(turns=4))
    assert invoke("study", str(config), "--run-dir", str(run_dir)).exit_code == 0
    before = (run_dir / "conversations" / "offline__screener.jsonl").read_bytes()

    config.write_text(TINY.format(turns=3))
    refused = invoke("study", str(config), "--run-dir", str(run_dir))
    assert refused.exit_code == 2, refused.output
    assert "turns: 4 → 3" in refused.output and "--force" in refused.output
    assert "Traceback" not in refused.output
    assert (run_dir / "conversations" / "offline__screener.jsonl").read_bytes() == before  # nothing mixed in

    forced = invoke("study", str(config), "--run-dir", str(run_dir), "--force")
    assert forced.exit_code == 0, forced.output
    superseded = list((run_dir / "superseded").glob("run-*/conversations/offline__screener.jsonl"))
    assert len(superseded) == 1 and superseded[0].read_bytes() == before
    paths = RunPaths(run_dir)
    conversations = list(iter_records(paths.conversations("offline/screener"), Conversation))
    assert conversations and all(c.max_turns == 3 and len(c.turns) <= 3 for c in conversations)
    judged = {j.conversation_id: j for j in iter_records(paths.judgments("offline/judge", "offline/screener"), Judgment)}
    for conversation in conversations:  # judgments were redone for the new conversations, not kept from the old
        assert max(t.turn for t in judged[conversation.conversation_id].turns) == len(conversation.turns)

    status = invoke("status", "--run-dir", str(run_dir))
    assert status.exit_code == 0, status.output
    for text in ("Stages", "run", "judge:offline/judge", "Models per role", "offline/screener", "config hash",
                 "Study invocations"):
        assert text in status.output
    data = json.loads(invoke("status", "--run-dir", str(run_dir), "--json").output)
    assert data["stages"]["run"]["counts"]["ok"] == 8
    assert data["stages"]["judge:offline/judge"]["counts"] == {"done": 8, "judge_errors": 0, "failed": 0,
                                                               "not_judged": 0}


def test_status_without_a_run_folder_is_one_clear_error(tmp_path):
    result = invoke("status", "--run-dir", str(tmp_path / "nothing"))
    assert result.exit_code == 2
    assert "no manifest here" in result.output and "Traceback" not in result.output
