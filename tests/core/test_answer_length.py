"""The longest answer a schema allows: hand-worked cases, and the real judge and formulation schemas
against their own longest instances written out the way a small model writes them (indented)."""

from __future__ import annotations

import json
import re

import pytest

from intake_eval.core.answer_length import WHITESPACE_PER_GAP, UnboundedSchema, longest_answer_tokens
from intake_eval.interview.formulation import response_schema as formulation_schema
from intake_eval.judge.schema import response_schema as judge_schema


def closed(**properties):
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def longest_instance(schema):
    if "enum" in schema:
        return max(schema["enum"], key=lambda value: len(json.dumps(value)))
    kind = schema["type"]
    if kind == "object":
        return {key: longest_instance(value) for key, value in schema["properties"].items()}
    if kind == "array":
        return [longest_instance(schema["items"])] * schema["maxItems"]
    if kind == "string":
        return "w" * schema["maxLength"]
    return {"boolean": False, "integer": -10 ** 18, "number": -1.5e-300}[kind]


def tokens_as_a_model_writes_it(value) -> int:
    """One token per visible character, WHITESPACE_PER_GAP per whitespace run (newline + indentation)."""
    text = json.dumps(value, indent=4)
    runs = re.findall(r"\s+", text)
    return len(text) - sum(map(len, runs)) + WHITESPACE_PER_GAP * len(runs)


def test_hand_worked_boolean_object():
    # {"a":false}: braces 2 + two gaps, key '"a"' 3 + colon and comma 2 + two gaps, false 5 + one gap,
    # and the trailing gap: 2+4 + 3+2+4 + 5+2 + 2 = 24
    assert longest_answer_tokens(closed(a={"type": "boolean"})) == 24


def test_hand_worked_string_enum_and_array():
    assert longest_answer_tokens({"type": "string", "maxLength": 10}) == 10 + 2 + 2 + 2
    assert longest_answer_tokens({"type": "string", "enum": ["ab", "abcd"]}) == 6 + 2 + 2
    # [ ] + two gaps, then 3 items of (string 5+2+gap, comma, gap), then the trailing gap
    assert longest_answer_tokens({"type": "array", "items": {"type": "string", "maxLength": 3},
                                  "maxItems": 3}) == 2 + 4 + 3 * (7 + 1 + 2) + 2


@pytest.mark.parametrize("schema", [
    {"type": "string"},
    {"type": "array", "items": {"type": "boolean"}},
    {"type": "object", "properties": {"a": {"type": "boolean"}}},
])
def test_an_unbounded_schema_is_refused(schema):
    with pytest.raises(UnboundedSchema):
        longest_answer_tokens(schema)


@pytest.mark.parametrize("schema", [
    judge_schema(["insomnia", "alcohol_use", "panic", "ptsd", "mania"], "per-turn"),
    judge_schema(["insomnia"], "per-turn"),
    formulation_schema(),
], ids=["judge-5-domains", "judge-1-domain", "formulation"])
def test_the_longest_instance_of_each_shipped_schema_fits_its_bound(schema):
    longest = longest_instance(schema)
    bound = longest_answer_tokens(schema)
    assert len(json.dumps(longest, separators=(",", ":"))) <= bound
    assert tokens_as_a_model_writes_it(longest) <= bound
    # and the bound is not loose beyond the whitespace it allows: within 2 tokens per property and item
    assert bound - tokens_as_a_model_writes_it(longest) <= 2 * WHITESPACE_PER_GAP * json.dumps(longest).count(":") + 8


def test_written_text_refuses_control_characters_and_a_raw_newline_in_an_answer_is_still_read():
    import jsonschema

    from intake_eval.core.placeholders import written_text
    from intake_eval.judge.schema import parse_turn

    schema = written_text(50)
    jsonschema.validate("A sentence about sleep.", schema)
    for bad in ("A line\nbreak", "A tab\there", 'A "quote"', "A back\\slash"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    # the answer a grammar without that exclusion produced (a raw newline inside a reasoning string)
    answer = ('{"reasoning": "The clinician asks about sleep.", "question_type": "open", "patient_faithful": true, '
              '"domains": {"insomnia": {"reasoning": "Asked about\nsleep", "asked_about": true, "disclosed": false}}}')
    turn = parse_turn(answer, 1, ["insomnia"])
    assert turn.question_type == "open" and turn.domains["insomnia"].asked_about
