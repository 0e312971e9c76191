"""Schemas that force complete answers, and placeholders that are never accepted as answers.

The judge, tracker and formulation schemas are built per conversation: a grammar-constrained model
cannot leave out a hidden domain or a turn, a label is a required boolean and no property outside
the schema is allowed (checked with jsonschema, the reference validator). Values copied from a
prompt's example ("...", "<one sentence>") fail validation and get the one repair request, over
real HTTP against a server that answers like llama-cpp-python.
"""

from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest

from intake_eval.core.formulation import parse_formulation
from intake_eval.core.placeholders import is_placeholder
from intake_eval.core.records import QUESTION_TYPES, ConversationTurn
from intake_eval.interview.formulation import request_formulation
from intake_eval.interview.formulation import response_schema as formulation_schema
from intake_eval.interview.participants import clinician_messages
from intake_eval.interview.tracker import (
    ask_tracker,
    parse_tracker_answer,
    tracker_schema,
)
from intake_eval.judge.judging import judge_conversation
from intake_eval.judge.schema import (
    JudgeOutputError,
    parse_conversation,
    parse_turn,
    response_schema,
)
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from tests.helpers.fakeserver import FakeOpenAIServer
from tests.helpers.judgment_builders import conversation, profile
from tests.helpers.server_dialects import instance_of, level_sent, llama_cpp_python, schema_sent

HIDDEN = ["insomnia", "alcohol_use", "panic"]
POLICY = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, deadline_s=10)
REASON = "The clinician asks how the patient sleeps and the patient says they lie awake."


def _objects(schema):
    """Every object node of a schema."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _objects(item)


def _closed_and_complete(schema):
    for node in _objects(schema):
        assert node.get("additionalProperties") is False, node
        assert set(node["required"]) == set(node["properties"]), node


# ---------------------------------------------------------------- judge

def test_per_turn_judge_schema_requires_every_hidden_domain():
    schema = response_schema(HIDDEN, "per-turn")
    _closed_and_complete(schema)
    domains = schema["properties"]["domains"]
    assert domains["required"] == HIDDEN
    for domain in HIDDEN:
        label = domains["properties"][domain]
        assert {key: label["properties"][key]["type"] for key in ("asked_about", "disclosed")} == \
            {"asked_about": "boolean", "disclosed": "boolean"}
    assert schema["properties"]["question_type"]["enum"] == list(QUESTION_TYPES)
    answer = instance_of(schema, REASON)
    jsonschema.validate(answer, schema)
    incomplete = json.loads(json.dumps(answer))
    del incomplete["domains"]["panic"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(incomplete, schema)  # what a grammar built from it can never produce
    extra = json.loads(json.dumps(answer))
    extra["domains"]["depression"] = extra["domains"]["panic"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(extra, schema)
    turn = parse_turn(json.dumps(answer), 2, HIDDEN)
    assert list(turn.domains) == HIDDEN and turn.turn == 2


def test_conversation_judge_schema_requires_every_turn():
    schema = response_schema(HIDDEN, "conversation", turns=[0, 1, 2])
    _closed_and_complete(schema)
    assert schema["properties"]["turns"]["required"] == ["0", "1", "2"]
    answer = instance_of(schema, REASON)
    jsonschema.validate(answer, schema)
    labelled = parse_conversation(json.dumps(answer), [0, 1, 2], HIDDEN)
    assert [t.turn for t in labelled] == [0, 1, 2] and all(list(t.domains) == HIDDEN for t in labelled)
    del answer["turns"]["1"]
    with pytest.raises(JudgeOutputError, match="missing \\[1\\]"):
        parse_conversation(json.dumps(answer), [0, 1, 2], HIDDEN)


def test_free_text_under_a_grammar_cannot_be_a_placeholder_or_run_on():
    import re

    from intake_eval.llm.structured import response_format

    schema = response_schema(HIDDEN, "per-turn")
    texts = [schema["properties"]["reasoning"]] + [schema["properties"]["domains"]["properties"][d]["properties"]
                                                   ["reasoning"] for d in HIDDEN]
    for text in texts:
        pattern = re.compile(text["pattern"])
        assert pattern.match(REASON) and pattern.match("Asked 'how is your sleep' and the reply says so.")
        for copied in ("<one sentence>", "...", "…", " ", 'a "quoted" word', "x" * (text["maxLength"] + 1)):
            assert not pattern.match(copied), copied
    icd10 = re.compile(formulation_schema()["properties"]["principal_diagnosis"]["properties"]["icd10"]["pattern"])
    assert [bool(icd10.match(code)) for code in ("F41.1", "", "G47.00", "...", "<code>")] == [True, True, True, False, False]
    gemini = json.dumps(response_format("json_schema", schema, "gemini"))
    assert '"pattern"' not in gemini and '"maxLength"' in gemini  # Gemini gets the bounds, not the regex


def test_the_list_shape_still_parses():
    answer = {"turn": 1, "reasoning": REASON, "question_type": "open", "patient_faithful": True,
              "domains": [{"domain": d, "reasoning": REASON, "asked_about": False, "disclosed": False} for d in HIDDEN]}
    assert list(parse_turn(json.dumps(answer), 1, HIDDEN).domains) == HIDDEN


@pytest.mark.parametrize("placeholder", ["<one sentence>", "...", "…", "<why this question_type and patient_faithful>"])
def test_judge_placeholders_are_invalid(placeholder):
    answer = instance_of(response_schema(HIDDEN, "per-turn"), REASON)
    answer["domains"]["insomnia"]["reasoning"] = placeholder
    with pytest.raises(JudgeOutputError, match="domains.insomnia.reasoning is a placeholder"):
        parse_turn(json.dumps(answer), 1, HIDDEN)
    answer = instance_of(response_schema(HIDDEN, "per-turn"), REASON)
    answer["reasoning"] = placeholder
    with pytest.raises(JudgeOutputError, match="reasoning is a placeholder"):
        parse_turn(json.dumps(answer), 1, HIDDEN)


def _judge_over(server, mode="per-turn"):
    spec = ModelSpec(alias="judge", model="openai/served", api_base=server.url, temperature=0.0, max_tokens=2000)
    convo = conversation([("How have you been sleeping?", "I lie awake for hours."),
                          ("Anything else?", "Not really.")])
    with ModelPool({"judge": spec}, retry_policy=POLICY) as pool:
        return asyncio.run(judge_conversation(convo, profile(hidden=("insomnia", "alcohol_use")), pool.get("judge"), mode))


@pytest.mark.parametrize("mode", ["per-turn", "conversation"])
def test_judge_succeeds_on_a_llama_cpp_python_server_without_settings(mode):
    with FakeOpenAIServer(llama_cpp_python(lambda body: json.dumps(instance_of(schema_sent(body), REASON)))) as server:
        judgment = _judge_over(server, mode)
        levels = [level_sent(body) for body in server.requests]
    assert judgment.status == "ok", judgment.errors
    assert [t.turn for t in judgment.turns] == [0, 1, 2]
    assert all(list(t.domains) == ["insomnia", "alcohol_use"] for t in judgment.turns)
    assert levels.count("json_schema") == 1 and levels[1:] == ["json_object_schema"] * (len(levels) - 1)


def test_a_copied_example_gets_one_repair_and_then_counts():
    def answer(body):
        schema = schema_sent(body)
        value = instance_of(schema, REASON)
        if len(body["messages"]) == 1:  # first answer: the example's placeholders
            for label in value["domains"].values():
                label["reasoning"] = "<one sentence>"
        return json.dumps(value)

    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        judgment = _judge_over(server)
        repairs = [body for body in server.requests if len(body["messages"]) == 3]
    assert judgment.status == "ok" and judgment.usage.calls == 6  # three turns, each repaired once
    assert len(repairs) == 3 and "placeholder" in repairs[0]["messages"][2]["content"]
    assert all(t.domains["insomnia"].reasoning == REASON for t in judgment.turns)


# ---------------------------------------------------------------- tracker

def test_tracker_schema_requires_a_verdict_per_hidden_domain():
    schema = tracker_schema(HIDDEN)
    _closed_and_complete(schema)
    assert schema["properties"]["asked_domains"]["required"] == HIDDEN
    assert schema["properties"]["question_type"]["enum"] == list(QUESTION_TYPES)
    hidden = profile(hidden=("insomnia", "alcohol_use", "panic")).hidden
    answer = {"question_type": "closed_hypothesis", "asked_domains": {"insomnia": True, "alcohol_use": False, "panic": False}}
    jsonschema.validate(answer, schema)
    assert parse_tracker_answer(json.dumps(answer), hidden) == (("closed_hypothesis", ["insomnia"]), "")
    del answer["asked_domains"]["panic"]
    parsed, problem = parse_tracker_answer(json.dumps(answer), hidden)
    assert parsed is None and "panic" in problem
    listed = {"question_type": "open", "asked_domains": ["alcohol_use"]}  # the older list shape still reads
    assert parse_tracker_answer(json.dumps(listed), hidden) == (("open", ["alcohol_use"]), "")


def test_tracker_succeeds_on_a_llama_cpp_python_server_without_settings():
    def answer(body):
        value = instance_of(schema_sent(body))
        value["asked_domains"]["insomnia"] = True
        return json.dumps(value)

    hidden = profile(hidden=("insomnia", "alcohol_use")).hidden
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        spec = ModelSpec(alias="trk", model="openai/served", api_base=server.url, temperature=0.0)
        with ModelPool({"trk": spec}, retry_policy=POLICY) as pool:
            verdict = asyncio.run(ask_tracker(pool.get("trk"), hidden, previous_patient="I feel low.",
                                              utterance="How have you been sleeping?", sample_index=0))
        levels = [level_sent(body) for body in server.requests]
        sent = schema_sent(server.requests[-1])
    assert verdict.asked == ["insomnia"] and not verdict.repaired and len(verdict.results) == 1
    assert levels == ["json_schema", "json_object_schema"]
    assert sent["properties"]["asked_domains"]["required"] == ["insomnia", "alcohol_use"]


# ---------------------------------------------------------------- formulation

VALID = {"chief_complaint": "low mood", "problems": ["low mood", "poor sleep"],
         "principal_diagnosis": {"name": "Major depressive disorder", "icd10": "F32.1"},
         "differential": [{"name": "Insomnia disorder", "icd10": ""}], "risk_level": "low",
         "risk_evidence": "Passive thoughts, no plan."}


def test_formulation_schema_is_closed_and_complete():
    schema = formulation_schema()
    _closed_and_complete(schema)
    assert schema["properties"]["principal_diagnosis"]["properties"]["name"]["minLength"] == 1
    jsonschema.validate(VALID, schema)
    assert parse_formulation(json.dumps(VALID)).principal_diagnosis.icd10 == "F32.1"


@pytest.mark.parametrize(("path", "value", "problem"), [
    (("principal_diagnosis", "name"), "...", "principal_diagnosis.name is a placeholder"),
    (("principal_diagnosis", "name"), " ", "principal_diagnosis.name is empty"),
    (("principal_diagnosis", "icd10"), "...", "principal_diagnosis.icd10 is not an ICD-10 code"),
    (("principal_diagnosis", "icd10"), "F..", "principal_diagnosis.icd10"),
    (("chief_complaint",), "<the main concern>", "chief_complaint is a placeholder"),
    (("differential", 0, "name"), "…", "differential.0.name is a placeholder"),
    (("problems", 1), "...", "problems.1 is a placeholder"),
    (("risk_evidence",), "...", "risk_evidence is a placeholder"),
])
def test_formulation_placeholders_are_invalid(path, value, problem):
    answer = json.loads(json.dumps(VALID))
    target = answer
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=problem.replace(".", "\\.")):
        parse_formulation(json.dumps(answer))


def test_the_prompt_example_formulation_is_repaired_once():
    example = {"chief_complaint": "...", "problems": ["...", "..."], "principal_diagnosis": {"name": "...", "icd10": "..."},
               "differential": [{"name": "...", "icd10": "..."}], "risk_level": "low", "risk_evidence": "..."}

    def answer(body):
        repaired = any("could not be used" in message["content"] for message in body["messages"])
        return json.dumps(VALID if repaired else example)

    transcript = clinician_messages("minimal", "I've been low.", [
        ConversationTurn(turn=1, clinician="How is your sleep?", patient="Bad.")])
    spec = ModelSpec(alias="doc", model="openai/served", api_base="", temperature=0.0)
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        spec = spec.model_copy(update={"api_base": server.url})
        with ModelPool({"doc": spec}, retry_policy=POLICY) as pool:
            record = asyncio.run(request_formulation(pool.get("doc"), transcript, conversation_id="c", turn=1))
        repair = server.requests[-1]["messages"][-1]["content"]
    assert record["status"] == "ok" and record["repaired"] is True
    assert "placeholder" in repair


def test_placeholder_detector_leaves_real_answers_alone():
    for text in ["F41.1", "Major depressive disorder", "I <3 my dog", "x < y > z", "N/A", "none"]:
        assert not is_placeholder(text), text
    for text in ["...", "…", "<one sentence>", "string", "[...]", "<area id>, ..."]:
        assert is_placeholder(text), text
