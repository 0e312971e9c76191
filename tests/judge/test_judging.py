"""Judging through the real provider path: ModelPool → litellm/openai client → loopback HTTP server."""

from __future__ import annotations

import asyncio
import csv
import json
import re

import pytest

from intake_eval.core.answer_length import longest_answer_tokens
from intake_eval.core.store import RunPaths, append_record, iter_json_lines
from intake_eval.judge.judging import (
    conversation_prompt,
    judge_conversation,
    turn_prompt,
)
from intake_eval.judge.schema import (
    JudgeOutputError,
    extract_json,
    parse_turn,
    response_schema,
)
from intake_eval.judge.stage import JudgeSetup, judge_stage
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.judgment_builders import conversation, profile

FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, deadline_s=10)
CONVO = conversation([
    ("How have you been sleeping?", "I lie awake for hours before I finally drift off."),
    ("What would help you feel better?", "I don't know, maybe more time off."),
])
PROFILE = profile()  # hidden: insomnia, alcohol_use


def _prompt(body: dict) -> str:
    return body["messages"][0]["content"]


def _turn_answer(turn: int, hidden: list[str], drop: str | None = None) -> dict:
    return {"turn": turn, "reasoning": "r", "question_type": "other" if turn == 0 else "closed_hypothesis",
            "patient_faithful": True,
            "domains": [{"domain": d, "reasoning": "r", "asked_about": turn == 1 and d == "insomnia",
                         "disclosed": turn == 1 and d == "insomnia"} for d in hidden if d != drop]}


def _valid_answer(body: dict, drop: str | None = None) -> str:
    prompt = _prompt(body)
    hidden = re.findall(r"^- id: (\w+)", prompt, flags=re.M)
    single = re.search(r"Label turn (\d+) only", prompt)
    if single:
        answer: dict = _turn_answer(int(single.group(1)), hidden, drop)
    else:
        last = int(re.search(r"Label every turn from 0 to (\d+)", prompt).group(1))
        answer = {"turns": [_turn_answer(t, hidden, drop) for t in range(last + 1)]}
    # Wrapped like a chatty model would: prose, a code fence, trailing text.
    return f"Here are the labels.\n```json\n{json.dumps(answer)}\n```\nLet me know if you need more."


def _pool(server: FakeOpenAIServer, **kwargs) -> ModelPool:
    spec = ModelSpec(alias="fakejudge", model="openai/fake-judge", api_base=server.url, temperature=0.0, max_tokens=1000)
    return ModelPool({"fakejudge": spec}, retry_policy=FAST, **kwargs)


def _judge(server, mode="per-turn", convo=CONVO, **kwargs):
    with _pool(server) as pool:
        return asyncio.run(judge_conversation(convo, PROFILE, pool.get("fakejudge"), mode, **kwargs))


def test_valid_json_per_turn_labels_every_turn_with_structured_output():
    with FakeOpenAIServer(lambda body, i: Reply(content=_valid_answer(body))) as server:
        judgment = _judge(server)
        bodies = list(server.requests)
    assert judgment.status == "ok" and judgment.errors == []
    assert [t.turn for t in judgment.turns] == [0, 1, 2]
    assert judgment.turns[1].domains["insomnia"].asked_about and judgment.turns[1].domains["insomnia"].disclosed
    assert not judgment.turns[2].domains["alcohol_use"].disclosed
    assert (judgment.usage.calls, judgment.judge, judgment.judge_model) == (3, "fakejudge", "openai/fake-judge")
    assert judgment.usage.prompt_tokens > 0
    # Each turn's prompt holds the conversation up to and including the patient's reply to it.
    prompts = sorted(_prompt(b) for b in bodies)
    turn1 = next(p for p in prompts if "Label turn 1 only" in p)
    assert "I lie awake for hours" in turn1 and "What would help you feel better" not in turn1
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["domains"]["required"] == ["insomnia", "alcohol_use"]  # none can be left out


def test_invalid_then_repaired_json_quotes_the_validation_error():
    calls = {"n": 0}

    def respond(body, index):
        if "Label turn 1 only" in _prompt(body) and len(body["messages"]) == 1:
            return Reply(content=_valid_answer(body, drop="alcohol_use"))  # a domain missing
        calls["n"] += 1
        return Reply(content=_valid_answer(body))

    with FakeOpenAIServer(respond) as server:
        judgment = _judge(server)
        repair = next(b for b in server.requests if len(b["messages"]) == 3)
    assert judgment.status == "ok"
    assert judgment.usage.calls == 4  # three turns + one repair
    assert repair["messages"][1]["role"] == "assistant"
    assert "missing domains ['alcohol_use']" in repair["messages"][2]["content"]


def test_permanently_invalid_json_is_a_judge_error_not_a_no(tmp_path):
    def respond(body, index):
        if "Label turn 2 only" in _prompt(body):
            return Reply(content='{"turn": 2, "question_type": "probing", "patient_faithful": true, "domains": []}')
        return Reply(content=_valid_answer(body))

    with FakeOpenAIServer(respond) as server:
        judgment = _judge(server)
    assert judgment.status == "judge_error"
    assert len(judgment.errors) == 1 and judgment.errors[0].startswith("turn 2:")
    assert "question_type" in judgment.errors[0] and "after one repair request" in judgment.errors[0]
    assert [t.turn for t in judgment.turns] == [0, 1]  # the failed turn is absent, never a default "no"
    # The metrics exclude it and count it.
    paths = RunPaths(tmp_path / "run")
    append_record(paths.profiles, PROFILE)
    append_record(paths.conversations(CONVO.clinician), CONVO)
    append_record(paths.judgments("fakejudge", CONVO.clinician), judgment)
    tables = write_metrics(paths, stage_kinds())
    row = next(csv.DictReader(open(tables["conversations"])))
    assert row["status"] == "judge_error" and row["active_coverage_rate"] == "" and "turn 2" in row["judge_errors"]
    headline = next(csv.DictReader(open(tables["clinicians"])))
    assert headline["judge_errors"] == "1" and headline["n"] == "0" and headline["mean_active_coverage"] == ""


@pytest.mark.parametrize("status,kind", [(401, "fatal"), (500, "exhausted")])
def test_provider_failure_is_recorded_with_its_reason(status, kind):
    with FakeOpenAIServer(lambda body, i: Reply(status=status, error_message="scripted failure")) as server:
        judgment = _judge(server)
    assert judgment.status == f"provider_error: {kind}"
    assert judgment.errors and judgment.turns == []
    assert "scripted failure" in judgment.errors[0] or str(status) in judgment.errors[0]


def test_conversation_mode_is_one_call_and_fewer_prompt_tokens():
    with FakeOpenAIServer(lambda body, i: Reply(content=_valid_answer(body))) as server:
        per_turn = _judge(server, "per-turn")
        whole = _judge(server, "conversation")
        caps = [body.get("max_tokens") or body.get("max_completion_tokens") for body in server.requests]
    hidden = [draw.domain for draw in PROFILE.hidden]
    turn_longest = longest_answer_tokens(response_schema(hidden, "per-turn"))
    whole_longest = longest_answer_tokens(response_schema(hidden, "conversation", [0, 1, 2]))
    # every cap holds its schema's longest answer: one turn's cap would truncate an all-turns answer
    assert turn_longest > 1000 and whole_longest > 3 * turn_longest
    assert caps == [turn_longest] * 3 + [whole_longest]
    assert whole.status == "ok" and whole.mode == "conversation"
    assert [t.turn for t in whole.turns] == [0, 1, 2]
    assert (per_turn.usage.calls, whole.usage.calls) == (3, 1)
    assert whole.usage.prompt_tokens < per_turn.usage.prompt_tokens
    assert [t.model_dump() for t in whole.turns] == [t.model_dump() for t in per_turn.turns]


def test_stage_resumes_skips_ok_and_retries_errors(tmp_path):
    paths = RunPaths(tmp_path / "run")
    good = conversation([("How is your sleep?", "I lie awake for hours.")], trial=0)
    flaky = conversation([("Do you drink?", "Yes, more than I planned to.")], trial=1)
    append_record(paths.profiles, PROFILE)
    # An uncompacted conversation file: a failed attempt of `good` precedes its ok retry.
    failed_attempt = good.model_copy(update={"status": "model_error", "turns": []})
    for convo in (flaky, failed_attempt, good):
        append_record(paths.conversations(convo.clinician), convo)
    broken = {"on": True}

    def respond(body, index):
        if broken["on"] and "Do you drink?" in _prompt(body):
            return Reply(content="no json here")
        return Reply(content=_valid_answer(body))

    with FakeOpenAIServer(respond) as server:
        with _pool(server, cache_path=paths.cache_db) as pool:
            setup = [JudgeSetup(label="fakejudge", alias="fakejudge", model=pool.get("fakejudge"))]
            first = asyncio.run(judge_stage(paths, setup))
        assert (first.judged["fakejudge"], first.judge_errors["fakejudge"]) == (1, 1)
        broken["on"] = False
        before = server.request_count
        with _pool(server, cache_path=paths.cache_db) as pool:
            setup = [JudgeSetup(label="fakejudge", alias="fakejudge", model=pool.get("fakejudge"))]
            second = asyncio.run(judge_stage(paths, setup))
        retried = server.request_count - before
    assert (second.skipped["fakejudge"], second.judged["fakejudge"], second.judge_errors["fakejudge"]) == (1, 1, 0)
    assert retried == 2  # only the failed conversation's two turns; the retry is not served from the cache
    lines = list(iter_json_lines(paths.judgments("fakejudge", good.clinician)))
    assert len(next(d for d in lines if d["conversation_id"] == good.conversation_id)["turns"]) == 2  # the ok text
    assert [(d["conversation_id"], d["status"]) for d in lines] == sorted(
        [(good.conversation_id, "ok"), (flaky.conversation_id, "ok")])


def test_tolerant_parser_and_strict_validation():
    hidden = ["insomnia", "alcohol_use"]
    text = 'Sure! {"turn": 1, "question_type": "open", "patient_faithful": false, "domains": ' \
           '{"insomnia": {"asked_about": false, "disclosed": true}, "alcohol_use": {"asked_about": false, "disclosed": false}}} done'
    turn = parse_turn(text, 1, hidden)
    assert turn.domains["insomnia"].disclosed and not turn.patient_faithful
    assert extract_json("```\n{\"a\": 1}\n```") == {"a": 1}
    with pytest.raises(JudgeOutputError, match="no JSON object"):
        parse_turn("I cannot help with that.", 1, hidden)
    with pytest.raises(JudgeOutputError, match="unknown domains"):
        parse_turn(json.dumps(_turn_answer(1, hidden + ["mania"])), 1, hidden)
    with pytest.raises(JudgeOutputError, match="turn is 2"):
        parse_turn(json.dumps(_turn_answer(2, hidden)), 1, hidden)
    # The opening answers no question: asked_about is forced false and the type 'other'.
    opening = _turn_answer(0, hidden)
    opening["domains"][0]["asked_about"] = True
    opening["question_type"] = "open"
    parsed = parse_turn(json.dumps(opening), 0, hidden)
    assert not parsed.domains["insomnia"].asked_about and parsed.question_type == "other"
    assert response_schema(hidden, "conversation", [0, 1])["properties"]["turns"]["required"] == ["0", "1"]


def test_prompts_show_symptom_lists_and_the_strict_rule():
    text = turn_prompt(CONVO, PROFILE, 0)
    assert "trouble falling asleep most nights" in text and "Open invitations never count" in text
    assert "How have you been sleeping" not in text  # turn 0 sees only the opening
    whole = conversation_prompt(CONVO, PROFILE)
    assert "[turn 2] PATIENT: I don't know, maybe more time off." in whole
