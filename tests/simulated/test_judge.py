"""offline/judge: rule-based labels from the text of hand-built transcripts."""

from __future__ import annotations

import asyncio

from intake_eval.core.records import TrackerDecision
from intake_eval.judge.judging import judge_conversation
from intake_eval.llm.base import ModelSpec
from intake_eval.metrics.figures import conversation_metrics
from intake_eval.simulated.judge import OfflineJudge
from tests.helpers.judgment_builders import conversation, profile

PROFILE = profile(hidden=("insomnia", "alcohol_use"))
TURNS = [
    ("How have you been sleeping lately?", "Badly. I have trouble falling asleep most nights, I lie awake for hours."),
    ("Tell me more about how you have been feeling.", "I have low mood most of the day. It comes and goes, some weeks more than others."),
    ("What else is going on for you?", "Honestly, I keep drinking more than intended, a lot more than I planned."),
    ("How much are you drinking in a typical week?", "Most days. I am needing a drink to calm down in the evening."),
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
    assert "lie awake for hours" in turns[1].domains["insomnia"].reasoning  # quotes the words it relied on
    # "It comes and goes…" names no symptom: it is no disclosure of anything (turn 2 stays clean).


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
    convo = conversation(TURNS[:1], opening="I have low mood most of the day. And I keep waking at 4am and unable to get back to sleep.")
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
    rerun = conversation([("Tell me more about that.", "I have low mood most of the day, flat and heavy.")])
    assert first.conversation_id == rerun.conversation_id
    a = asyncio.run(judge_conversation(first, PROFILE, model, "per-turn"))
    b = asyncio.run(judge_conversation(rerun, PROFILE, model, "per-turn"))
    assert a.turns[1].domains["insomnia"].disclosed and not b.turns[1].domains["insomnia"].disclosed


def test_offline_pipeline_screener_high_anchored_low_and_pivot_found(tmp_path):
    """The offline pipeline (generate → run with offline/patient) then `intake-eval judge` with
    offline/judge in both modes: the baselines land where they are built to."""
    import csv

    from typer.testing import CliRunner

    from intake_eval.cli import app
    from intake_eval.core.store import RunPaths
    from intake_eval.generate.stage import execute_generate
    from intake_eval.interview.plan import RunSettings
    from intake_eval.interview.stage import execute_run
    from intake_eval.stage_kinds import stage_kinds

    paths = RunPaths(tmp_path / "run")
    execute_generate(paths, n=18, mode="stratified", seed=11, kinds=stage_kinds())
    execute_run(paths, RunSettings(clinicians=["offline/screener", "offline/anchored"], patient="offline/patient"),
                kinds=stage_kinds())
    runner = CliRunner()
    for mode in ("per-turn", "conversation"):
        result = runner.invoke(app, ["judge", "--judge", "offline/judge", "--mode", mode, "--run-dir", str(paths.root)])
        assert result.exit_code == 0, result.output
    with open(paths.metrics("clinicians"), encoding="utf-8") as handle:
        rows = {(r["judge"], r["clinician"]): r for r in csv.DictReader(handle)}
    for judge in ("offline/judge", "offline/judge+conversation"):
        screener, anchored = rows[(judge, "offline/screener")], rows[(judge, "offline/anchored")]
        assert (screener["n"], anchored["n"], screener["judge_errors"]) == ("18", "18", "0")
        assert float(screener["mean_active_coverage"]) >= 0.9
        assert float(anchored["mean_active_coverage"]) <= 0.2
        assert 5 <= float(anchored["median_first_treatment_planning_turn"]) <= 7  # it pivots at turn 6 ± 1
        assert int(screener["patient_leak_count"]) + int(anchored["patient_leak_count"]) <= 2
    with open(paths.metrics("agreement"), encoding="utf-8") as handle:
        kappas = {r["label"]: r for r in csv.DictReader(handle)}
    assert float(kappas["actively_covered"]["raw_agreement"]) == 1.0  # same rules, either mode
