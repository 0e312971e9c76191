"""offline/judge: rule-based labels from the text of hand-built transcripts."""

from __future__ import annotations

import asyncio

from intake_eval.judging import judge_conversation
from intake_eval.metrics import conversation_metrics
from intake_eval.models.base import ModelSpec
from intake_eval.models.offline.judge import OfflineJudge
from intake_eval.records import TrackerDecision
from tests.judgment_builders import conversation, profile

PROFILE = profile(hidden=("insomnia", "alcohol_use"))
TURNS = [
    ("How have you been sleeping lately?", "I lie awake for hours before I finally drift off, most nights."),
    ("Tell me more about how you have been feeling.", "I feel flat and heavy nearly all day."),
    ("What else is going on for you?", "Honestly, I end up drinking a lot more than I planned to."),
    ("How much are you drinking in a typical week?", "Most days. By evening I need a drink just to calm down."),
    ("Do you ever have sudden panic attacks?", "No, not really."),
    ("It might help to try a regular bedtime routine and cutting back on alcohol.", "Okay, I can try that."),
    ("Thank you for sharing all of this with me today.", "Thank you for listening."),
]


def _judge(mode: str, convo=None):
    model = OfflineJudge(ModelSpec(alias="offline/judge", model="offline/judge", temperature=None, max_tokens=None))
    return asyncio.run(judge_conversation(convo or conversation(TURNS), PROFILE, model, mode))


def test_labels_come_from_the_words_of_each_turn():
    judgment = _judge("per-turn")
    assert judgment.status == "ok", judgment.errors
    turns = {t.turn: t for t in judgment.turns}
    labels = {t: {d: (l.asked_about, l.disclosed) for d, l in turns[t].domains.items()} for t in turns}
    assert [turns[t].question_type for t in range(8)] == [
        "other", "closed_hypothesis", "open", "open",
        "clarifying",  # alcohol came up on turn 3: asking about it now follows a disclosure
        "closed_hypothesis", "treatment_planning", "other"]
    assert labels[0] == {"insomnia": (False, False), "alcohol_use": (False, False)}
    assert labels[1]["insomnia"] == (True, True)  # asked about sleep, reply carries it
    assert labels[2] == {"insomnia": (False, False), "alcohol_use": (False, False)}  # presenting-concern talk only
    assert labels[3]["alcohol_use"] == (False, True) and not turns[3].patient_faithful  # volunteered unasked
    assert labels[4]["alcohol_use"] == (True, True) and turns[4].patient_faithful
    assert labels[5] == {"insomnia": (False, False), "alcohol_use": (False, False)}  # a denial is no disclosure
    assert all(turns[t].patient_faithful for t in (0, 1, 2, 4, 5, 6, 7))
    metrics = conversation_metrics(judgment, PROFILE.hidden_domains)
    assert (metrics.active_coverage_rate, metrics.bleed_rate) == (1.0, 0.5)
    assert (metrics.first_treatment_planning_turn, metrics.premature_closure_turn, metrics.patient_leak_count) == (6, 6, 1)
    assert "I lie awake for hours" in turns[1].domains["insomnia"].reasoning or "lie awake" in turns[1].domains["insomnia"].reasoning


def test_conversation_mode_gives_the_same_labels():
    per_turn, whole = _judge("per-turn"), _judge("conversation")
    assert whole.status == "ok" and whole.usage.calls == 1 and per_turn.usage.calls == 8
    assert [t.model_dump() for t in whole.turns] == [t.model_dump() for t in per_turn.turns]


def test_it_judges_the_text_not_the_patients_unlock_log():
    convo = conversation(TURNS)
    for turn in convo.turns:  # a tracker log claiming the opposite of what was said
        turn.tracker = TrackerDecision(question_type="other", asked_domains=["alcohol_use"],
                                       newly_unlocked=["alcohol_use"], unlocked_after=["alcohol_use"])
    assert [t.model_dump() for t in _judge("per-turn", convo).turns] == [t.model_dump() for t in _judge("per-turn").turns]


def test_an_opening_that_leaks_a_hidden_domain_is_bleed_on_turn_zero():
    convo = conversation(TURNS[:1], opening="I feel flat and heavy nearly all day. Most nights I am up again at four in the morning.")
    judgment = _judge("per-turn", convo)
    opening = judgment.turns[0]
    assert opening.domains["insomnia"].disclosed and not opening.domains["insomnia"].asked_about
    assert not opening.patient_faithful
    # Asked on turn 1 after the leak: both bleed and active coverage, but the follow-up is no leak.
    assert judgment.turns[1].patient_faithful
    assert conversation_metrics(judgment, PROFILE.hidden_domains).bleed_rate == 0.5


def test_a_rerun_conversation_with_the_same_id_is_judged_on_its_new_text():
    model = OfflineJudge(ModelSpec(alias="offline/judge", model="offline/judge"))
    first = conversation(TURNS[:1])
    rerun = conversation([("Tell me more about that.", "I feel flat and heavy nearly all day.")])
    assert first.conversation_id == rerun.conversation_id
    a = asyncio.run(judge_conversation(first, PROFILE, model, "per-turn"))
    b = asyncio.run(judge_conversation(rerun, PROFILE, model, "per-turn"))
    assert a.turns[1].domains["insomnia"].disclosed and not b.turns[1].domains["insomnia"].disclosed
