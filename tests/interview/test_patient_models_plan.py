"""Several patient models in one run: the shared conversation-id convention, the plan (same profiles per
patient model, one opening each), the tracker default per patient model and the roles the runner guards."""

from __future__ import annotations

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.interview.conversation import make_conversation_id, opening_key
from intake_eval.interview.plan import RunSettings, plan_conversations, stage_config
from tests.helpers.convo_helpers import make_profile


def test_conversation_id_segments_follow_the_shared_convention():
    assert make_conversation_id("P1", "gpt-4o", "minimal", "tracked", 0) == "P1.gpt-4o.minimal.tracked.t0"
    assert (make_conversation_id("P1", "doc", "minimal", "prompted", 2, patient="together_ai/meta/X")
            == "P1.doc.minimal.prompted.p-together_ai__meta__X.t2")
    assert (make_conversation_id("P1", "doc", "minimal", "prompted", 0, patient="a", style="guarded")
            == "P1.doc.minimal.prompted.p-a.s-guarded.t0")
    assert make_conversation_id("P1", "doc", "minimal", "prompted", 0, style="forthcoming") == "P1.doc.minimal.prompted.t0"


def test_one_patient_model_plans_exactly_what_it_always_did():
    profiles = [make_profile(1), make_profile(2)]
    plan = plan_conversations(profiles, RunSettings(clinicians=["a", "b"], patient="gpt-4o"))
    assert [item.patient for item in plan] == [None] * 4
    assert all(".p-" not in item.conversation_id for item in plan)
    assert [item.records_opening_usage for item in plan] == [True, False, True, False]


def test_each_patient_model_interviews_the_same_profiles_with_its_own_opening():
    profiles = [make_profile(1), make_profile(2)]
    settings = RunSettings(clinicians=["a", "b"], patient="gpt-4o", patients=["gpt-4o", "claude"])
    plan = plan_conversations(profiles, settings)
    assert len(plan) == 2 * 2 * 2
    by_patient = {patient: {(i.profile.profile_id, i.clinician) for i in plan if i.patient == patient}
                  for patient in ("gpt-4o", "claude")}
    assert by_patient["gpt-4o"] == by_patient["claude"] and len(by_patient["claude"]) == 4
    assert len({item.conversation_id for item in plan}) == len(plan)
    # one opening per profile and patient model: its usage is carried by that model's first conversation
    assert len({opening_key(item) for item in plan}) == 4
    assert sum(item.records_opening_usage for item in plan) == 4


def test_tracker_defaults_to_each_patient_model_in_tracked_mode():
    tracked = RunSettings(clinicians=["a"], patient="gpt-4o", patients=["gpt-4o", "claude"], patient_mode="tracked")
    assert [tracked.tracker_for(p) for p in tracked.patients] == ["gpt-4o", "claude"]
    shared = RunSettings(clinicians=["a"], patient="gpt-4o", patients=["gpt-4o", "claude"], patient_mode="tracked",
                         tracker="offline/patient")
    assert [shared.tracker_for(p) for p in shared.patients] == ["offline/patient", "offline/patient"]
    prompted = RunSettings(clinicians=["a"], patient="gpt-4o", patients=["gpt-4o", "claude"])
    assert prompted.tracker_for("claude") is None


def test_patient_list_is_checked():
    with pytest.raises(IntakeEvalError, match="given twice"):
        RunSettings(clinicians=["a"], patient="x", patients=["x", "x"])
    with pytest.raises(IntakeEvalError, match="first must be"):
        RunSettings(clinicians=["a"], patient="x", patients=["y", "x"])


def test_stage_config_names_every_patient_model_only_when_there_are_several(tmp_path):
    from intake_eval.llm.base import ModelSpec

    profiles = tmp_path / "profiles.jsonl"
    profiles.write_text("")
    one = RunSettings(clinicians=["a"], patient="p")
    spec = ModelSpec(alias="p", model="openai/p")
    assert "patients" not in stage_config(one, {"patient": spec, "patients": {"p": spec}}, profiles)
    two = RunSettings(clinicians=["a"], patient="p", patients=["p", "q"], patient_mode="tracked")
    specs = {"p": spec, "q": ModelSpec(alias="q", model="openai/q")}
    config = stage_config(two, {"patient": spec, "patients": specs}, profiles)
    assert config["patients"] == {"p": "openai/p", "q": "openai/q"}
    assert config["tracker"] == "each conversation's patient model"
