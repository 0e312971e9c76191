"""The manifest's typed methods write manifest.json in the shape other tools read (DESIGN.md): the same
keys and nesting the stages wrote by hand before, checked on the saved file."""

from __future__ import annotations

import json

from intake_eval.core.manifest import PROMPT_TEXTS, Manifest
from intake_eval.core.store import RunPaths, stable_hash


def _saved(paths: RunPaths) -> dict:
    return json.loads(paths.manifest.read_text())


def test_stage_methods_keep_the_stage_entry_shape(tmp_path):
    paths = RunPaths(tmp_path / "run")
    manifest = Manifest(paths)
    manifest.begin_stage("run", {"turns": 12, "models": {"patient": {"p": {"model": "m"}}}})
    manifest.add_additive_models("run", "clinician", {"a": {"model": "x"}})
    manifest.add_additive_models("run", "clinician", {"b": {"model": "y"}})
    manifest.record_stage_pid("run", 4242)
    manifest.amend_stage_config("run", {"turns": 12, "formulation": True}, mark="formulation_added")
    manifest.record_prompt_texts("run", {"templates": {"t": {"file": "prompts/t.1.j2"}}, "rendered": {}})
    manifest.save()

    stage = _saved(paths)["stages"]["run"]
    assert stage["additive_models"] == {"clinician": {"a": {"model": "x"}, "b": {"model": "y"}}}
    assert stage["pid"] == 4242 and stage["formulation_added"] is True
    assert stage["config"] == {"turns": 12, "formulation": True}
    assert stage["config_hash"] == stable_hash(stage["config"])
    assert stage[PROMPT_TEXTS] == {"templates": {"t": {"file": "prompts/t.1.j2"}}, "rendered": {}}
    assert _saved(paths)[PROMPT_TEXTS] == {"templates": {"t": {"file": "prompts/t.1.j2"}}, "rendered": {}}

    again = Manifest(paths)
    assert again.stage_config("run") == {"turns": 12, "formulation": True}
    assert again.additive_models("run", "clinician") == {"a": {"model": "x"}, "b": {"model": "y"}}
    assert again.stage_status("run") == "running" and again.stage_status("judge:j") is None
    assert again.stage_config("judge:j") == {} and "judge:j" not in again.data["stages"]  # reading adds nothing
    assert again.config_hashes(leaving_out="report") == {"run": stage["config_hash"]}


def test_provenance_and_study_methods_keep_the_top_level_shape(tmp_path):
    paths = RunPaths(tmp_path / "run")
    manifest = Manifest(paths)
    manifest.record_models("judge", [{"alias": "j", "model": "gpt"}])
    manifest.record_structured_output({"http://a": {"level": "json_schema", "refused": []}})
    manifest.record_structured_output({"http://a": {"level": None, "refused": []},  # not answered yet: kept
                                       "http://b": {"level": None, "refused": []}})
    manifest.record_primary_judge("j")
    manifest.record_primary_judge("k")  # the first judge keeps the place
    manifest.record_study("study.yaml", {"name": "s"}, {"index": 1, "count": 2})
    manifest.add_study_history({"status": "done"})
    manifest.add_study_history({"status": "interrupted"})
    manifest.save()

    data = _saved(paths)
    assert data["structured_output"] == {"http://a": {"level": "json_schema", "refused": []},
                                         "http://b": {"level": None, "refused": []}}
    assert data["judges"] == {"primary": "j"}
    assert data["study"] == {"config_file": "study.yaml", "config": {"name": "s"},
                             "study_config_hash": stable_hash({"name": "s"}), "shard": {"index": 1, "count": 2},
                             "history": [{"status": "done"}, {"status": "interrupted"}],
                             "last_run": {"status": "interrupted"}}
    again = Manifest(paths)
    assert again.model_entries("judge") == [{"alias": "j", "model": "gpt"}] and again.roles() == ["judge"]
    assert again.primary_judge() == "j" and again.version == data["versions"]["intake-eval"]
