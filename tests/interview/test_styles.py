"""Patient behaviour styles in the run: the shared id convention, the prompt, the plan axis, the config guard."""

from __future__ import annotations

import asyncio

from intake_eval.core.prompts import render_prompt
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    make_conversation_id,
    pairing_id,
    run_conversation,
)
from intake_eval.interview.participants import patient_system_prompt
from intake_eval.interview.plan import RunSettings, plan_conversations, prompt_names
from tests.helpers.convo_helpers import ScriptedModel, make_profile


def test_conversation_ids_carry_the_patient_and_the_style_only_when_they_are_not_the_default():
    assert make_conversation_id("P00001", "gpt-4o", "minimal", "prompted", 0) == "P00001.gpt-4o.minimal.prompted.t0"
    assert make_conversation_id("P00001", "gpt-4o", "minimal", "prompted", 0, style="forthcoming") == \
        "P00001.gpt-4o.minimal.prompted.t0"
    assert make_conversation_id("P00001", "offline/screener", "minimal", "tracked", 2, style="guarded") == \
        "P00001.offline__screener.minimal.tracked.s-guarded.t2"
    assert make_conversation_id("P00001", "a", "minimal", "prompted", 0, patient="offline/patient",
                                style="vague-recall") == "P00001.a.minimal.prompted.p-offline__patient.s-vague-recall.t0"
    assert pairing_id("P00001.a.minimal.prompted.s-guarded.t0") == "P00001.a.minimal.prompted.t0"


def test_the_default_style_keeps_the_prompt_and_another_appends_its_fragment():
    profile = make_profile()
    base = render_prompt("patient_prompted", profile=profile)
    assert patient_system_prompt(profile, "prompted") == base
    guarded = patient_system_prompt(profile, "prompted", style="guarded")
    assert guarded.startswith(base) and guarded != base
    assert "guarded and minimise" in guarded
    assert "still admit it" in guarded  # the disclosure rule stands
    tracked = patient_system_prompt(profile, "tracked", style="terse")
    assert tracked.startswith(render_prompt("patient_responder", profile=profile, unlocked=[]))
    assert "one short sentence" in tracked


def test_styles_are_a_full_factorial_with_one_opening_per_style():
    profiles = [make_profile(1), make_profile(2)]
    settings = RunSettings(clinicians=["a", "b"], patient="p", conditions=["minimal", "screening"],
                           patient_styles=["forthcoming", "guarded"])
    plan = plan_conversations(profiles, settings)
    assert len(plan) == 2 * 2 * 2 * 2
    assert len({item.conversation_id for item in plan}) == len(plan)
    by_style = {style: [item for item in plan if item.patient_style == style] for style in ("forthcoming", "guarded")}
    assert {item.conversation_id for item in by_style["forthcoming"]} == {
        item.conversation_id for item in plan_conversations(profiles, RunSettings(clinicians=["a", "b"], patient="p",
                                                                                  conditions=["minimal", "screening"]))}
    # each (profile, style) records its own opening's usage exactly once
    assert sum(item.records_opening_usage for item in plan) == 2 * 2
    assert "_patient_style_guarded" in prompt_names(settings)
    assert not any(name.startswith("_patient_style_") for name in prompt_names(RunSettings(clinicians=["a"], patient="p")))


def test_a_styled_conversation_records_its_style_and_tells_the_patient_model():
    patient = ScriptedModel("pat", ["Hi.", "Fine."])
    clinician = ScriptedModel("doc", ["How is your sleep?"])
    item = PlannedConversation.of(make_profile(), clinician="doc", max_turns=1, patient_style="guarded")
    record = asyncio.run(run_conversation(item, Participants(clinician=clinician, patient=patient)))
    assert record.patient_style == "guarded"
    assert record.conversation_id == "P00001.doc.minimal.prompted.s-guarded.t0"
    assert all(request.context["style"] == "guarded" for request in patient.requests)
    assert "guarded and minimise" in patient.requests[0].messages[0]["content"]
    # the clinician's context pairs this intake with its forthcoming twin (offline clinicians seed from it)
    assert clinician.requests[0].context["pairing"] == "P00001.doc.minimal.prompted.t0"
