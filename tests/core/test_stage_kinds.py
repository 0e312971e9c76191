"""The stage-kind table: a kind registered in a test plugs into the stage runner, ``status`` and folder
spend with no edit below it; a stage no kind owns is refused naming the stage and the manifest; and
``status --rebuild-manifest`` recovers every kind's stages, patient QC included."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.commands.status import facts_from_records
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.manifest import Manifest
from intake_eval.core.records import Record, Usage
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import RunPaths, append_record
from intake_eval.core.usage import count_ok, latest_lines, usage_of
from intake_eval.runner.stage import StageRunner
from intake_eval.stage_kinds import stage_kinds

TALLY_PREFIX = "tally:"


class Tally(Record):
    """A test stage's record: one counted item and what counting it cost."""

    item: str
    status: str = "ok"
    usage: Usage


class TallyKind:
    """A stage kind no intake-eval module knows: ``tally:<counter>`` writes tally/<counter>.jsonl."""

    pattern = f"{TALLY_PREFIX}<counter>"

    def owns(self, stage_name: str) -> bool:
        return stage_name.startswith(TALLY_PREFIX)

    @staticmethod
    def file(paths: RunPaths, stage_name: str) -> Path:
        return paths.root / "tally" / f"{stage_name.removeprefix(TALLY_PREFIX)}.jsonl"

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return Tally if path.parent == paths.root / "tally" else None

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        total = Usage()
        for data in latest_lines([self.file(paths, stage_name)], "item").values():
            total = total.add(usage_of(data.get("usage")))
        return {str((stage.get("config") or {}).get("counter_model", "counter")): total}

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return count_ok(latest_lines([self.file(paths, stage_name)], "item"))

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        folder = paths.root / "tally"
        return {f"{TALLY_PREFIX}{path.stem}": {"config": {}} for path in sorted(folder.glob("*.jsonl"))} \
            if folder.is_dir() else {}


def _tally(paths: RunPaths, item: str, dollars: float, status: str = "ok") -> None:
    usage = Usage(calls=1, prompt_tokens=100, completion_tokens=10, cost_usd=dollars, cost_known=True)
    append_record(TallyKind.file(paths, "tally:sheep"), Tally(item=item, status=status, usage=usage))


def test_a_kind_registered_in_a_test_plugs_into_the_runner_status_and_spend(tmp_path):
    paths = RunPaths(tmp_path / "run")
    kinds = stage_kinds().with_kind(TallyKind())
    with StageRunner(paths, kinds=kinds) as runner:
        runner.begin("tally:sheep", {"counter_model": "shepherd"})
        _tally(paths, "dolly", 0.25)
        _tally(paths, "shaun", 0.5)
        _tally(paths, "timmy", 0.125, status="error")
        finished = runner.finish("tally:sheep", status="done")
        assert runner.folder_spend() == (0.875, True)
    assert finished["shepherd"].calls == 3 and finished["shepherd"].cost_usd == pytest.approx(0.875)

    manifest = json.loads(paths.manifest.read_text())
    assert manifest["stages"]["tally:sheep"]["usage"]["shepherd"]["cost_usd"] == pytest.approx(0.875)
    assert kinds.run_folder_spend(paths, manifest) == (0.875, True)
    assert kinds.record_model_of(paths, TallyKind.file(paths, "tally:sheep")) is Tally

    facts = facts_from_records(paths, Manifest(paths).data, kinds)
    stage = facts["stages"]["tally:sheep"]
    assert stage["counts"]["done"] == 2  # the errored tally is not done
    assert stage["usage"]["shepherd"]["calls"] == 3
    assert facts["spend"]["records_cost_usd"] == pytest.approx(0.875)


def test_an_unknown_stage_is_refused_naming_the_stage_and_the_manifest(tmp_path):
    paths = RunPaths(tmp_path / "run")
    kinds = stage_kinds()
    manifest = Manifest(paths)
    manifest.data["stages"]["tally:sheep"] = {"status": "done", "config": {}}
    manifest.save()

    with pytest.raises(IntakeEvalError, match=r"manifest\.json: stage 'tally:sheep' is of no kind"):
        kinds.run_folder_spend(paths, manifest.data)
    with pytest.raises(IntakeEvalError, match="stage 'tally:goats' is of no kind"):
        with StageRunner(paths, kinds=kinds) as runner:
            runner.begin("tally:goats", {})  # refused before any work: it would cost a silent $0

    result = CliRunner().invoke(app, ["status", "--run-dir", str(paths.root)])
    assert result.exit_code != 0
    message = " ".join(result.output.split())
    assert "stage 'tally:sheep' is of no kind" in message and str(paths.manifest) in message
    assert "Traceback" not in result.output


def test_rebuild_manifest_recovers_patient_qc_stages(tmp_path):
    run_dir = tmp_path / "run"
    invoke = CliRunner().invoke
    assert invoke(app, ["generate", "--n", "2", "--run-dir", str(run_dir)]).exit_code == 0
    qc = invoke(app, ["qc-patient", "--patient", "offline/patient", "--n", "1", "--run-dir", str(run_dir)])
    assert qc.exit_code == 0, qc.output
    original = json.loads((run_dir / "manifest.json").read_text())
    stage = "qc-patient offline/patient prompted offline/judge"
    assert stage in original["stages"]
    (run_dir / "manifest.json").write_text("{ not json")

    rebuilt = invoke(app, ["status", "--rebuild-manifest", "--run-dir", str(run_dir), "--json"])
    assert rebuilt.exit_code == 0, rebuilt.output
    data = json.loads((run_dir / "manifest.json").read_text())
    assert set(data["stages"]) == {"generate", stage}
    config = data["stages"][stage]["config"]
    assert (config["patient"], config["mode"], config["judge"]) == ("offline/patient", "prompted", "offline/judge")
    probes = original["stages"][stage]["counts"]["probes"]
    assert data["stages"][stage]["counts"]["done"] == probes > 0

    shown = json.loads(invoke(app, ["status", "--run-dir", str(run_dir), "--json"]).output)
    assert shown["stages"][stage]["usage"] == original["stages"][stage]["usage"]  # the same cost from the records
