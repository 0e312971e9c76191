"""The OpenAI batch protocol (``/files`` + ``/batches``), as OpenAI, Together, Groq and Gemini's
OpenAI-compatible endpoint serve it: upload a JSONL file of chat requests, create a batch, poll it,
download the output file. Each line of the output answers one ``custom_id``.

Provider dialects: Together answers a creation as ``{"job": {…}}`` and spells statuses in upper
case (COMPLETED, FAILED, …); both are read. A server that answers 404 on ``/files`` or
``/batches`` has no batch API (vLLM, llama.cpp serve chat completions only): ``NoBatchAPI`` says so
at once instead of a "rerun to resume" that cannot help. Polling ends after ``deadline_s``
(``BatchStillRunning``; the batch stays submitted and a rerun collects it).

Batch answers are normalised exactly like online ones (litellm_backend.normalise) and priced at
the batch rate: ``batch_cost_factor`` of the alias (default one half, what the providers charge).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from intake_eval.core.errors import IntakeEvalError
from intake_eval.llm.base import ChatRequest, ChatResult, ModelCallError, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend, normalise
from intake_eval.llm.openai_http import ProviderHTTPError
from intake_eval.llm.providers import DirectRoute, direct_route

BATCH_PROVIDERS = {"openai", "together_ai", "groq", "gemini"}  # hosted providers that serve the protocol
DEFAULT_BATCH_COST_FACTOR = 0.5
TERMINAL = {"completed", "failed", "expired", "cancelled", "not_found", "ended"}  # ended: Anthropic's
CHAT_ENDPOINT = "/v1/chat/completions"
FILE_PURPOSE = {"together_ai": "batch-api"}  # the purpose a provider wants on a batch input file; else "batch"
# What a server without a batch API answers on its routes: FastAPI's 404 / 405 (vLLM, llama.cpp's
# server), or 501 where the routes exist but are switched off.
NO_BATCH_STATUS = frozenset({404, 405, 501})
# How long ``wait`` polls one batch: the providers' 24 h completion window and an hour of slack.
DEFAULT_WAIT_S = 25 * 3600.0


def batch_route(spec: ModelSpec) -> DirectRoute | None:
    """The route whose server may take batches: a listed provider, or an ``api_base`` (a gateway in front
    of one may serve the protocol; a server that does not is told at first contact, NoBatchAPI)."""
    route = direct_route(spec)
    if route is None or not (spec.api_base or route.provider.name in BATCH_PROVIDERS):
        return None
    return route


def batch_cost_factor(spec: ModelSpec) -> float:
    return DEFAULT_BATCH_COST_FACTOR if spec.batch_cost_factor is None else spec.batch_cost_factor


def request_line(backend: ProviderBackend, route: DirectRoute, custom_id: str, request: ChatRequest) -> dict[str, Any]:
    """One line of a batch input file: the body the online call would POST."""
    return {"custom_id": custom_id, "method": "POST", "url": CHAT_ENDPOINT,
            "body": route.body(backend.request_params(request))}


@dataclass(frozen=True)
class BatchLine:
    custom_id: str
    body: dict[str, Any] | None  # the chat completion, when the line succeeded
    error: str | None


def result_lines(raw: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of a batch results file; a torn line is left out (its request is answered online)."""
    for text in raw.decode("utf-8", errors="replace").splitlines():
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict):
            yield line


def read_output(raw: bytes) -> Iterator[BatchLine]:
    for line in result_lines(raw):
        custom_id = str(line.get("custom_id", ""))
        response = line.get("response") or {}
        status = response.get("status_code")
        if line.get("error") or status != 200 or not isinstance(response.get("body"), dict):
            error = line.get("error") or (response.get("body") or {}).get("error") or f"status {status}"
            yield BatchLine(custom_id, None, str(error.get("message") if isinstance(error, dict) else error))
        else:
            yield BatchLine(custom_id, response["body"], None)


def batch_result(spec: ModelSpec, route: DirectRoute, request: ChatRequest, body: dict[str, Any]) -> ChatResult:
    """A batch answer → the ChatResult the online call would give, priced at the batch rate."""
    result = normalise(spec, request, route.fix_usage(body), 0.0)
    usage = result.usage.model_copy(update={"cost_usd": result.usage.cost_usd * batch_cost_factor(spec)})
    return result.model_copy(update={"usage": usage})


def batch_object(payload: Any) -> Any:
    """The batch itself: Together wraps a created batch as ``{"job": {…}, "warning": …}``."""
    if isinstance(payload, dict) and not payload.get("id") and isinstance(payload.get("job"), dict):
        return payload["job"]
    return payload


def _with_id(raw: bytes, what: str) -> dict[str, Any]:
    try:
        payload = batch_object(json.loads(raw))
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or not payload.get("id"):
        raise ProviderHTTPError(200, f"{what} answered without an id: {raw[:200]!r}", {})
    return payload


def status_of(batch: dict[str, Any]) -> str:
    """The batch's status in lower case (Together answers COMPLETED, IN_PROGRESS, …)."""
    return str(batch.get("status") or "unknown").lower()


class NoBatchAPI(IntakeEvalError):
    """The server answered 404/405/501 on the batch routes: it serves chat completions only (vLLM, llama.cpp)."""


class BatchStillRunning(IntakeEvalError):
    """The polling deadline passed; the batch stays submitted and a rerun collects it."""


class BatchClient:
    """Files and batches on one server; the key is read at call time and never kept.

    What judge --batch uses: ``line`` (one request as a line of the input file), ``submit`` (a
    file of lines → the batch), ``wait``, ``results`` and ``result`` (one answer → the ChatResult
    the online call would give). llm/anthropic_batch.py speaks Anthropic's protocol behind the same
    methods."""

    def __init__(self, spec: ModelSpec, route: Any, timeout_s: float = 300.0):
        self.spec = spec
        self.route = route
        self.backend = ProviderBackend(spec)  # the online call's parameters, so a line equals its request
        # no total: a batch file may be hundreds of MB; a stalled read still fails
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=60, sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "BatchClient":
        self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def base_url(self) -> str:
        return str(self.route.base_url)

    def line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        return request_line(self.backend, self.route, custom_id, request)

    def result(self, request: ChatRequest, body: dict[str, Any]) -> ChatResult:
        return batch_result(self.spec, self.route, request, body)

    async def submit(self, path: Path) -> tuple[str, str | None]:
        """Upload a file of lines and start its batch: (batch id, input file id)."""
        file_id = await self.upload(path)
        return str((await self.create(file_id))["id"]), file_id

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.route.api_key(self.spec)}"}

    async def _call(self, method: str, path: str, **kwargs: Any) -> bytes:
        assert self._session is not None, "use BatchClient as an async context manager"
        url = path if path.startswith(("http://", "https://")) else self.base_url + path
        try:
            async with self._session.request(method, url, headers=self._headers(), **kwargs) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise ProviderHTTPError.from_response(response.status, raw, dict(response.headers))
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise ProviderHTTPError(0, f"{type(error).__name__}: {error}", {}) from None
        return raw

    async def upload(self, path: Path) -> str:
        form = aiohttp.FormData()
        form.add_field("purpose", FILE_PURPOSE.get(self.route.provider.name, "batch") if not self.spec.api_base
                       else "batch")
        with open(path, "rb") as handle:
            form.add_field("file", handle, filename=path.name, content_type="application/jsonl")
            raw = await self._batch_route("POST", "/files", data=form)
        return str(_with_id(raw, "file upload")["id"])

    async def create(self, input_file_id: str) -> dict[str, Any]:
        body = {"input_file_id": input_file_id, "endpoint": CHAT_ENDPOINT, "completion_window": "24h"}
        return _with_id(await self._batch_route("POST", "/batches", json=body), "batch creation")

    async def _batch_route(self, method: str, path: str, **kwargs: Any) -> bytes:
        """A call that only a server with a batch API answers: a 404 says it has none."""
        try:
            return await self._call(method, path, **kwargs)
        except ProviderHTTPError as error:
            if error.status_code in NO_BATCH_STATUS:
                raise NoBatchAPI(f"{self.base_url}{path} answered HTTP {error.status_code} ({error.message}): this "
                                 "server has no batch API; run without --batch") from None
            raise

    async def get(self, batch_id: str) -> dict[str, Any]:
        batch = batch_object(json.loads(await self._call("GET", f"/batches/{batch_id}")))
        return {**batch, "status": status_of(batch)} if isinstance(batch, dict) else {"id": batch_id}

    async def content(self, file_id: str) -> bytes:
        return await self._call("GET", f"/files/{file_id}/content")

    async def wait(self, batch_id: str, poll_s: float,
                   on_progress: Callable[[dict[str, Any]], None] | None = None,
                   deadline_s: float = DEFAULT_WAIT_S) -> dict[str, Any]:
        """Poll until the batch is finished one way or another; transient errors just poll again.
        After ``deadline_s`` of polling, BatchStillRunning: the batch stays submitted for a rerun."""
        started = time.monotonic()
        while True:
            try:
                batch = await self.get(batch_id)
            except ProviderHTTPError as error:
                if error.status_code == 404:  # the provider no longer knows it: its requests go out again
                    batch = {"id": batch_id, "status": "not_found"}
                elif error.status_code in (401, 403):
                    raise ModelCallError(f"batch {batch_id}: {error}", kind="fatal",
                                         status_code=error.status_code) from None
                else:
                    batch = {"id": batch_id, "status": "unknown"}
            except ValueError:
                batch = {"id": batch_id, "status": "unknown"}
            batch = {**batch, "status": status_of(batch)}
            if on_progress is not None:
                on_progress(batch)
            if batch["status"] in TERMINAL:
                return batch
            waited = time.monotonic() - started
            if waited + poll_s > deadline_s:
                raise BatchStillRunning(
                    f"batch {batch_id} at {self.base_url} is still {batch['status']} after {waited / 3600:.1f} h of "
                    "polling; it stays submitted (its id is in stage_log.jsonl): rerun the same command to collect it")
            await asyncio.sleep(poll_s)

    async def results(self, batch: dict[str, Any]) -> list[BatchLine]:
        """Every answered line of a finished batch (output and error files)."""
        lines: list[BatchLine] = []
        for field in ("output_file_id", "error_file_id"):
            if batch.get(field):
                lines.extend(read_output(await self.content(str(batch[field]))))
        return lines
