"""A minimal client for OpenAI-compatible chat endpoints (vLLM, Ollama, llama.cpp, local servers).

The wire protocol is one POST of JSON to ``{api_base}/chat/completions`` with a Bearer key.
Measured at 64 requests in flight (scripts/bench_models.py): the openai client spends ~4 ms CPU
per call (~9 ms with its default httpx pool, which scans every connection for every request) and
litellm ~10 ms, which caps a single process well below the provider's own throughput; a plain
aiohttp POST costs under 1 ms. Errors carry ``status_code``, ``headers`` and the parsed ``body`` for
retry.py (llm/error_body.py reads every provider's error shape).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from intake_eval.llm.base import REQUEST_SENT
from intake_eval.llm.error_body import ErrorBody


class ProviderHTTPError(Exception):
    """An HTTP error answer: its status, the server's own words, headers, and the parsed body's facts."""

    def __init__(self, status_code: int, message: str, headers: dict[str, str], body: Any = None):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.message = message
        self.headers = headers
        self.body = body  # the parsed JSON error body (dict or Gemini's root list), None when not JSON

    @classmethod
    def from_response(cls, status_code: int, raw: bytes, headers: dict[str, str]) -> "ProviderHTTPError":
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        return cls(status_code, ErrorBody.parse(raw).message, headers,
                   body if isinstance(body, (dict, list)) else None)


class OpenAICompatibleClient:
    """One connection pool per event loop (aiohttp sessions are bound to the loop that made them)."""

    def __init__(self, api_base: str, timeout_s: float):
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: asyncio.Task[None] | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # limit=0: the endpoint limiter, not the connector, decides how many are in flight.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                                  request_class=_TellsWhenSent)
            self._loop = loop
            # asyncio.run() cancels pending tasks at its end; this one then closes the session, so
            # a caller that forgets pool.aclose() still leaves no "unclosed session" noise.
            self._closer = loop.create_task(_close_at_loop_end(self._session))
        return self._session

    async def chat(self, body: dict[str, Any], api_key: str, extra_headers: dict[str, str] | None = None) -> dict[str, Any]:
        headers = {**(extra_headers or {}), "Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        return await self.post(self.url, body, headers)

    async def post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """One POST of JSON; the parsed answer, or ProviderHTTPError with the server's own words."""
        async with self._get_session().post(url, data=json.dumps(body), headers=headers,
                                            timeout=self.timeout) as response:
            raw = await response.read()
            if response.status >= 400:
                raise ProviderHTTPError.from_response(response.status, raw, dict(response.headers))
        payload = json.loads(raw)  # a truncated body raises JSONDecodeError: retried as "bad_body"
        if isinstance(payload, dict) and payload.get("type") == "error":  # Anthropic can say so with a 200
            raise ProviderHTTPError.from_response(500, raw, dict(response.headers))
        return payload

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


class _TellsWhenSent(aiohttp.ClientRequest):
    """A request that tells ``REQUEST_SENT`` (the call ledger) once its body is on the wire. An aiohttp
    trace could say the same, but a session with a trace sends a dozen trace signals for every request,
    a measurable part of a call's client CPU with hundreds in flight."""

    async def write_bytes(self, *args: Any, **kwargs: Any) -> None:
        await super().write_bytes(*args, **kwargs)
        told = REQUEST_SENT.get()
        if told is not None:
            told()


async def _close_at_loop_end(session: aiohttp.ClientSession) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        if not session.closed:
            await session.close()
