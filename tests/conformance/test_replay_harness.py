"""The replay harness itself: every recording loads, routes answer what they were given, and a
provider pointed at the server through its base-URL variable reads the recorded answer."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from intake_eval.llm.base import ChatRequest
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.registry import resolve_spec
from tests.conformance.replay import ReplayServer, recorded, recorded_names, route_of


def test_every_recording_names_its_source_and_has_a_status_and_body():
    names = recorded_names()
    assert len(names) >= 36
    for name in names:
        answer = recorded(name)
        assert answer["source"].strip() and isinstance(answer["status"], int) and "body" in answer, name


@pytest.mark.parametrize(("method", "path", "route"), [
    ("POST", "/v1/chat/completions", "chat"), ("POST", "/v1beta/openai/chat/completions", "chat"),
    ("POST", "/v1/files", "files"), ("GET", "/v1/files/file-1/content", "file_content"),
    ("POST", "/v1/batches", "batches"), ("GET", "/v1/batches/b-1", "batch"),
    ("POST", "/v1/messages", "messages"), ("POST", "/v1/messages?beta=true", "messages"),
    ("POST", "/v1/messages/batches", "message_batches"), ("GET", "/v1/messages/batches/m-1", "message_batch"),
    ("GET", "/v1/messages/batches/m-1/results", "message_results"), ("GET", "/v1/models", None),
])
def test_routes(method, path, route):
    assert route_of(method, path) == route


def test_status_headers_and_body_are_replayed_and_an_unserved_route_is_fastapi_404():
    answer = recorded("anthropic_429_rate_limit")
    with ReplayServer({"messages": answer}) as server:
        request = urllib.request.Request(server.root + "/v1/messages", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=10)
        assert raised.value.code == 429 and raised.value.headers["retry-after"] == "3"
        assert json.loads(raised.value.read()) == answer["body"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url + "/files", data=b"x", timeout=10)
        assert missing.value.code == 404 and json.loads(missing.value.read()) == {"detail": "Not Found"}
    assert [r.route for r in server.requests] == ["messages", "files"]


def test_the_real_client_reads_a_replayed_answer_through_the_base_url_variable(monkeypatch):
    with ReplayServer({"chat": recorded("openai_gpt4o_plain")}) as server:
        for name, value in server.env("openai").items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        pool = ModelPool({"gpt": resolve_spec("openai/gpt-4o", {})}, use_cache=False)

        async def go():
            try:
                return await pool.get("gpt").complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
            finally:
                await pool.aclose()

        result = asyncio.run(go())
    assert result.text == "The capital of France is Paris."
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (24, 8)
    assert server.calls("chat")[0].body["model"] == "gpt-4o"
