"""Structured output against recorded refusals of the format: each endpoint moves down its ladder at
once (never retried, never stopping the endpoint), and the level recorded is the one whose request
was answered.

Claude: the GA ``output_config.format`` first; a server that refuses it gets the beta ``output_format``
with its ``anthropic-beta`` header; one that refuses that too (the recorded beta-header rejection from
Vertex, the recorded deprecation from Bedrock) gets the prompt alone. OpenAI-compatible servers: the
recorded response_format 400s move json_schema → json_object with the schema → json_object.
"""

from __future__ import annotations

import asyncio

import pytest

from intake_eval.llm.anthropic_http import STRUCTURED_OUTPUTS_BETA
from intake_eval.llm.base import ChatRequest
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.registry import resolve_spec
from tests.conformance.replay import ReplayRequest, ReplayServer, recorded

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}
CLAUDE = "anthropic/claude-sonnet-4-5-20250929"
# Derived: the message Anthropic's API gives for a body field it does not know (its validation wording,
# as in "output_format: Extra inputs are not permitted" quoted in vercel/ai#12298's thread), for a server
# that predates output_config, in Anthropic's error envelope.
OUTPUT_CONFIG_UNKNOWN = {"status": 400, "headers": {}, "derived": True, "body": {"type": "error", "error": {
    "type": "invalid_request_error", "message": "output_config: Extra inputs are not permitted"}}}


def claude_level(request: ReplayRequest) -> str:
    body = request.body
    if "output_config" in body:
        return "json_schema"
    return "json_schema_beta" if "output_format" in body else "prompt"


def _ask(pool: ModelPool, name: str, count: int) -> list:
    async def go():
        try:
            return [await pool.get(name).complete(ChatRequest(messages=[{"role": "user", "content": f"q{n}"}],
                                                              response_schema=SCHEMA)) for n in range(count)]
        finally:
            await pool.aclose()

    return asyncio.run(go())


def claude_server(refuse: dict[str, dict]) -> ReplayServer:
    def respond(request: ReplayRequest) -> dict:
        return refuse.get(claude_level(request), recorded("anthropic_cache_read_write"))

    return ReplayServer({"messages": respond})


@pytest.mark.parametrize(("refused", "level"), [
    ({}, "json_schema"),
    ({"json_schema": OUTPUT_CONFIG_UNKNOWN}, "json_schema_beta"),
    ({"json_schema": OUTPUT_CONFIG_UNKNOWN, "json_schema_beta": recorded("anthropic_400_beta_header_rejected")},
     "prompt"),
    ({"json_schema": OUTPUT_CONFIG_UNKNOWN, "json_schema_beta": recorded("anthropic_400_output_format_deprecated")},
     "prompt"),
], ids=["ga-accepted", "ga-refused", "beta-header-refused", "beta-field-deprecated"])
def test_claude_moves_down_its_ladder_and_records_the_level_sent(refused, level, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance")
    with claude_server(refused) as server:
        for name, value in server.env("anthropic").items():
            monkeypatch.setenv(name, value)
        pool = ModelPool({}, use_cache=False)
        results = _ask(pool, CLAUDE, 4)
        sent = server.calls("messages")
    ladder = ["json_schema", "json_schema_beta", "prompt"]
    expected = ladder[:ladder.index(level) + 1] + [level] * 3  # each refused level once, then the one that answers
    assert [claude_level(request) for request in sent] == expected
    for request in sent:
        beta = {k.lower(): v for k, v in request.headers.items()}.get("anthropic-beta")
        assert beta == (STRUCTURED_OUTPUTS_BETA if claude_level(request) == "json_schema_beta" else None)
        if claude_level(request) == "json_schema":
            assert request.body["output_config"]["format"]["type"] == "json_schema"
    assert {result.structured_output for result in results} == {level}
    state = next(iter(pool.structured_output().values()))
    assert state["level"] == level and set(state["rejected"]) == set(refused)
    assert pool.stopped(CLAUDE) is None and not pool.retry_stats()[CLAUDE]["retries"]


def openai_level(request: ReplayRequest) -> str:
    fmt = request.body.get("response_format")
    if not isinstance(fmt, dict):
        return "prompt"
    if fmt["type"] == "json_schema":
        return "json_schema"
    return "json_object_schema" if "schema" in fmt else "json_object"


def test_recorded_response_format_refusals_move_an_openai_compatible_server_down(monkeypatch):
    refusals = {"json_schema": recorded("openai_400_invalid_response_format"),
                "json_object_schema": recorded("openai_400_unknown_param_response_format_schema")}

    def respond(request: ReplayRequest) -> dict:
        return refusals.get(openai_level(request), recorded("openai_gpt4o_plain"))

    with ReplayServer({"chat": respond}) as server:
        spec = resolve_spec("openai/served", {}).model_copy(update={"api_base": server.url, "api_key_env": None})
        pool = ModelPool({"served": spec}, use_cache=False)
        results = _ask(pool, "served", 3)
        sent = [openai_level(request) for request in server.calls("chat")]
    assert sent == ["json_schema", "json_object_schema", "json_object", "json_object", "json_object"]
    assert {result.structured_output for result in results} == {"json_object"}
    assert pool.stopped("served") is None
    notices = " ".join(pool.notices)
    assert "Unknown parameter: 'response_format.schema'" in notices and "'json_object' is not valid" in notices
