"""A minimal client for OpenAI-compatible chat endpoints (vLLM, Ollama, llama.cpp, local servers).

The wire protocol is one POST of JSON to ``{api_base}/chat/completions`` with a Bearer key.
Measured at 64 requests in flight (scripts/bench_models.py): the openai client spends ~4 ms CPU
per call (~9 ms with its default httpx pool, which scans every connection for every request) and
litellm ~10 ms, which caps a single process well below the provider's own throughput; a plain
aiohttp POST costs under 1 ms. Errors carry ``status_code`` and ``headers`` for retry.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from intake_eval.llm.base import REQUEST_SENT


class ProviderHTTPError(Exception):
    def __init__(self, status_code: int, message: str, headers: dict[str, str]):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.message = message
        self.headers = headers


def _error_message(raw: bytes) -> str:
    """The server's own words: OpenAI's {"error": {"message", "param"}}, vLLM's top-level
    {"message"}, or the raw text. The parameter a server names is kept (it may be response_format)."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return raw[:600].decode(errors="replace").strip() or "no body"
    if not isinstance(payload, dict):
        return str(payload)[:600]
    error = payload.get("error")
    source = error if isinstance(error, dict) else payload
    if payload.get("type") == "error" and isinstance(error, dict) and error.get("type"):
        # Anthropic's envelope: the error type (overloaded_error, rate_limit_error, …) says the most
        return f"{error['type']}: {error.get('message') or ''}".strip()[:600]
    message = source.get("message") or source.get("detail") or error or payload
    param = source.get("param")
    return str(message)[:600] + (f" (param: {param})" if param and str(param) not in str(message) else "")


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
                                                  trace_configs=[_sent_trace()])
            self._loop = loop
            # asyncio.run() cancels pending tasks at its end; this one then closes the session, so
            # a caller that forgets pool.aclose() still leaves no "unclosed session" noise.
            self._closer = loop.create_task(_close_at_loop_end(self._session))
        return self._session

    async def chat(self, body: dict[str, Any], api_key: str) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        return await self.post(self.url, body, headers)

    async def post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """One POST of JSON; the parsed answer, or ProviderHTTPError with the server's own words."""
        async with self._get_session().post(url, data=json.dumps(body), headers=headers,
                                            timeout=self.timeout) as response:
            raw = await response.read()
            if response.status >= 400:
                raise ProviderHTTPError(response.status, _error_message(raw), dict(response.headers))
        payload = json.loads(raw)  # a truncated body raises JSONDecodeError: retried as "bad_body"
        if isinstance(payload, dict) and payload.get("type") == "error":  # Anthropic can say so with a 200
            raise ProviderHTTPError(500, _error_message(raw), dict(response.headers))
        return payload

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _sent_trace() -> aiohttp.TraceConfig:
    """Tells ``REQUEST_SENT`` (the call ledger) once a request's body is on the wire."""
    async def body_sent(_session: Any, _context: Any, _params: Any) -> None:
        told = REQUEST_SENT.get()
        if told is not None:
            told()

    config = aiohttp.TraceConfig()
    config.on_request_chunk_sent.append(body_sent)
    return config


async def _close_at_loop_end(session: aiohttp.ClientSession) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        if not session.closed:
            await session.close()
