"""The conversation loop and the participants, with small ChatModel doubles (no network)."""

from __future__ import annotations

import asyncio
import json

from intake_eval.core.prompts import render_prompt
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    run_conversation,
)
from intake_eval.interview.tracker import parse_tracker_answer
from intake_eval.llm.base import CallUsage, ChatResult, ModelCallError
from tests.helpers.convo_helpers import PHENOMENOLOGY, ScriptedModel, make_profile

MINIMAL = (
    "You are a mental health clinician conducting an initial intake interview with a new patient. Your goal is to "
    "understand what they are experiencing. Use whatever interview style you find effective. The patient will speak first."
)


def run(item, participants, **kwargs):
    return asyncio.run(run_conversation(item, participants, **kwargs))


def test_prompted_conversation_has_opening_then_twelve_turns_with_study_prompts():
    profile = make_profile()
    clinician = ScriptedModel("doc", [f"Question {n}?" for n in range(1, 13)])
    patient = ScriptedModel("pat", ["I have been feeling low."] + [f"Answer {n}." for n in range(1, 13)])
    record = run(PlannedConversation.of(profile, clinician="doc"), Participants(clinician=clinician, patient=patient))

    assert record.status == "ok" and record.termination == "completed"
    assert record.opening == "I have been feeling low."
    assert [t.turn for t in record.turns] == list(range(1, 13))
    assert record.turns[0].clinician == "Question 1?" and record.turns[0].patient == "Answer 1."
    assert record.conversation_id == "P00001.doc.minimal.prompted.t0"
    # The patient spoke first: its first request has no clinician utterance yet.
    assert patient.requests[0].context["turn"] == 0 and patient.requests[0].messages[-1]["role"] == "user"
    # Clinician: the study's minimal prompt verbatim, then the opening as the patient's first message.
    first = clinician.requests[0].messages
    assert first[0] == {"role": "system", "content": MINIMAL}
    assert first[1] == {"role": "user", "content": "I have been feeling low."}
    last = clinician.requests[-1].messages
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 11 + ["user"]
    assert last[-1]["content"] == "Answer 11."
    # Patient: the full inventory with the disclosure rule, clinician turns as 'user'.
    system = patient.requests[-1].messages[0]["content"]
    assert "only mention it if the clinician asks a specific question" in system
    assert all(text in system for text in PHENOMENOLOGY.values())
    assert patient.requests[-1].messages[-1] == {"role": "user", "content": "Question 12?"}
    assert record.usage["clinician"].calls == 12 and record.usage["patient"].calls == 13


def test_reasoning_is_kept_apart_from_the_visible_utterance():
    said = ChatResult(text="How is your sleep?", reasoning="I should screen sleep next.", finish_reason="stop")
    clinician = ScriptedModel("doc", [said])
    patient = ScriptedModel("pat", ["Hello."])
    record = run(PlannedConversation.of(make_profile(), clinician="doc", max_turns=2),
                 Participants(clinician=clinician, patient=patient))
    assert record.turns[0].clinician == "How is your sleep?"
    assert record.turns[0].clinician_reasoning == "I should screen sleep next."
    history = " ".join(m["content"] for m in clinician.requests[-1].messages)
    assert "screen sleep next" not in history


def test_tracked_mode_unlocks_only_asked_domains_and_never_shows_locked_text():
    profile = make_profile()
    clinician = ScriptedModel("doc", ["Tell me more.", "How is your sleep?", "Anything else?", "Do you drink?"])
    tracker = ScriptedModel("trk", [
        '{"question_type": "open", "asked_domains": []}',
        'Sure! Here it is: {"question_type": "closed_hypothesis", "asked_domains": ["insomnia"]}',
        "not json at all",  # repaired once by the next answer
        '```json\n{"question_type": "open", "asked_domains": []}\n```',
        '{"question_type": "closed_hypothesis", "asked_domains": ["alcohol use", "ocd"]}',  # label → id; ocd not hidden
    ])
    patient = ScriptedModel("pat", ["I feel low."] + ["Reply."] * 4)
    record = run(PlannedConversation.of(profile, clinician="doc", patient_mode="tracked", max_turns=4),
                 Participants(clinician=clinician, patient=patient, tracker=tracker))

    decisions = [t.tracker for t in record.turns]
    assert [d.newly_unlocked for d in decisions] == [[], ["insomnia"], [], ["alcohol_use"]]
    assert decisions[-1].unlocked_after == ["insomnia", "alcohol_use"]
    assert decisions[2].repaired and not decisions[1].repaired
    assert decisions[1].source == "trk" and decisions[1].question_type == "closed_hypothesis"
    assert record.usage["tracker"].calls == 5
    # The responder saw insomnia only after it was asked about, and never a locked domain's text.
    responder_texts = [json.dumps(r.messages) for r in patient.requests]
    for text in responder_texts:
        assert "SECRET-SUICIDALITY" not in text and "SECRET-PANIC" not in text
    assert "SECRET-INSOMNIA" not in responder_texts[1] and "SECRET-INSOMNIA" in responder_texts[2]
    assert "SECRET-ALCOHOL" not in responder_texts[3] and "SECRET-ALCOHOL" in responder_texts[4]
    assert patient.requests[4].context["unlocked"] == ["insomnia", "alcohol_use"]
    # The repair call carried the problem back to the tracker.
    repair = tracker.requests[3].messages
    assert repair[-2] == {"role": "assistant", "content": "not json at all"}
    assert repair[-1]["content"] == render_prompt("patient_tracker_repair", problem="it was not a JSON object",
                                                  hidden=profile.hidden)


def test_tracker_that_stays_invalid_after_one_repair_fails_the_conversation():
    tracker = ScriptedModel("trk", ['{"question_type": "banter"}'])
    record = run(
        PlannedConversation.of(make_profile(), clinician="doc", patient_mode="tracked", max_turns=3),
        Participants(clinician=ScriptedModel("doc", ["Hi?"]), patient=ScriptedModel("pat", ["Low."]), tracker=tracker),
    )
    assert record.status == "model_error" and record.termination == "model_error"
    assert "tracker trk" in record.error and "question_type" in record.error
    assert record.turns == [] and record.opening == "Low."
    assert len(tracker.requests) == 2


def test_model_failure_after_retries_is_recorded_with_its_reason_and_turns_so_far():
    clinician = ScriptedModel("doc", ["Q1?", "Q2?", ModelCallError("server kept failing (HTTP 503)", kind="exhausted")])
    record = run(PlannedConversation.of(make_profile(), clinician="doc"),
                 Participants(clinician=clinician, patient=ScriptedModel("pat", ["Hello."])))
    assert record.status == "model_error" and not record.ok
    assert len(record.turns) == 2 and all(t.clinician and t.patient for t in record.turns)
    assert record.error.startswith("clinician doc at turn 3: server kept failing")


def test_empty_answer_after_length_stop_and_a_twice_empty_turn_are_failures_never_an_ended_session():
    truncated = ChatResult(text="", reasoning="thinking...", finish_reason="length")
    record = run(PlannedConversation.of(make_profile(), clinician="doc"),
                 Participants(clinician=ScriptedModel("doc", ["Q1?", truncated]), patient=ScriptedModel("pat", ["Hi."])))
    assert record.status == "empty_after_length" and len(record.turns) == 1 and record.failed_role == "clinician"

    # whitespace is no answer: one fresh sample, then the conversation fails (it once ended "ok")
    ended = ChatResult(text="  ", finish_reason="stop")
    clinician = ScriptedModel("doc", ["Q1?", "Q2?", ended, ended])
    record = run(PlannedConversation.of(make_profile(), clinician="doc"),
                 Participants(clinician=clinician, patient=ScriptedModel("pat", ["Hi."])))
    assert record.status == "empty_answer" and record.termination == "empty_answer" and len(record.turns) == 2
    assert record.failed_role == "clinician" and "after 2 samples" in record.error
    assert clinician.requests[-1].answer_retry == 1 and record.usage["clinician"].calls == 4


def test_clinicians_of_one_profile_share_one_opening_and_only_the_first_records_its_usage():
    profile = make_profile()
    paid = ChatResult(text="Opening.", usage=CallUsage(prompt_tokens=100, completion_tokens=10, cost_usd=0.5))
    patient = ScriptedModel("pat", [paid, ChatResult(text="Reply.")])
    openings: dict = {}

    async def both():
        a = PlannedConversation.of(profile, clinician="a", max_turns=2)
        b = PlannedConversation.of(profile, clinician="b", max_turns=2, records_opening_usage=False)
        return await asyncio.gather(
            run_conversation(b, Participants(clinician=ScriptedModel("b", ["Qb?"]), patient=patient), openings=openings),
            run_conversation(a, Participants(clinician=ScriptedModel("a", ["Qa?"]), patient=patient), openings=openings),
        )

    record_b, record_a = asyncio.run(both())
    assert record_a.opening == record_b.opening == "Opening."
    assert sum(1 for r in patient.requests if r.context["turn"] == 0) == 1
    assert record_a.usage["patient"].cost_usd == 0.5 and record_a.usage["patient"].calls == 3
    assert record_b.usage["patient"].cost_usd == 0.0 and record_b.usage["patient"].calls == 2


def test_parse_tracker_answer_reports_what_is_wrong():
    hidden = make_profile().hidden
    assert parse_tracker_answer('{"question_type": "open", "asked_domains": []}', hidden) == (("open", []), "")
    assert parse_tracker_answer('[1, 2]', hidden)[0] is None
    parsed, problem = parse_tracker_answer('{"question_type": "open", "asked_domains": "insomnia"}', hidden)
    assert parsed is None and "asked_domains" in problem


def _paid(text: str, tokens: int, finish_reason: str = "stop") -> ChatResult:
    return ChatResult(text=text, finish_reason=finish_reason,
                      usage=CallUsage(prompt_tokens=tokens, completion_tokens=tokens, cost_usd=0.001 * tokens))


def test_a_tracker_that_never_answers_validly_still_counts_both_paid_calls():
    clinician = ScriptedModel("doc", ["How is your sleep?"])
    tracker = ScriptedModel("trk", [_paid("not json", 10), _paid("still not json", 20)])
    patient = ScriptedModel("pat", [_paid("I feel low.", 5)])
    record = run(PlannedConversation.of(make_profile(), clinician="doc", patient_mode="tracked", max_turns=2),
                 Participants(clinician=clinician, patient=patient, tracker=tracker))
    assert record.status == "model_error" and "tracker" in record.error
    tracker_usage = record.usage["tracker"]
    assert tracker_usage.calls == 2 and tracker_usage.prompt_tokens == 30
    assert abs(tracker_usage.cost_usd - 0.030) < 1e-9


def test_a_patient_reply_with_no_text_still_counts_its_paid_call():
    clinician = ScriptedModel("doc", ["How is your sleep?"])
    patient = ScriptedModel("pat", [_paid("I feel low.", 5), _paid("", 40, finish_reason="length")])
    record = run(PlannedConversation.of(make_profile(), clinician="doc", max_turns=2),
                 Participants(clinician=clinician, patient=patient))
    assert record.termination == "empty_after_length"
    assert record.usage["patient"].calls == 2 and record.usage["patient"].completion_tokens == 45
