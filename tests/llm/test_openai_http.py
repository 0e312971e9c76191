"""The direct HTTP client tells ``REQUEST_SENT`` (what the call ledger writes its ``sent`` line on) once
the request's body is on the wire, before the answer arrives; and with no listener it just posts."""

from __future__ import annotations

import asyncio
from typing import Any

from intake_eval.llm.base import REQUEST_SENT
from intake_eval.llm.openai_http import OpenAICompatibleClient
from tests.helpers.fakeserver import FakeOpenAIServer, Reply

BODY = {"model": "doc", "messages": [{"role": "user", "content": "hello"}]}


def _slow_server() -> FakeOpenAIServer:
    return FakeOpenAIServer(lambda _body, _index: Reply(content="Could you tell me more?", delay=0.3))


def test_the_sending_is_told_while_the_answer_is_still_awaited() -> None:
    answered: list[bool] = []
    told_before_the_answer: list[bool] = []

    async def main(url: str) -> dict[str, Any]:
        client = OpenAICompatibleClient(url, timeout_s=30)
        token = REQUEST_SENT.set(lambda: told_before_the_answer.append(not answered))
        try:
            payload = await client.chat(BODY, "test-key")
            answered.append(True)
            return payload
        finally:
            REQUEST_SENT.reset(token)
            await client.aclose()

    with _slow_server() as server:
        payload = asyncio.run(main(server.url))
    assert payload["choices"][0]["message"]["content"] == "Could you tell me more?"
    assert told_before_the_answer == [True]


def test_without_a_listener_the_request_is_simply_posted() -> None:
    async def main(url: str) -> dict[str, Any]:
        client = OpenAICompatibleClient(url, timeout_s=30)
        try:
            return await client.chat(BODY, "test-key")
        finally:
            await client.aclose()

    with _slow_server() as server:
        assert asyncio.run(main(server.url))["choices"][0]["message"]["content"] == "Could you tell me more?"
