"""Anthropic's Message Batches: ``POST /v1/messages/batches`` with every request inline, poll
``GET /v1/messages/batches/{id}`` until ``processing_status`` is ``ended``, then read the JSONL at
its ``results_url`` (one ``{"custom_id", "result": {"type": "succeeded", "message": …}}`` a line).

Behind the same methods as the OpenAI batch client (llm/batch.py), so judge --batch submits,
resumes, validates and prices both alike. A line's ``params`` is the body the online call would
POST to /v1/messages, and an answer goes through the online path's conversion and normalisation,
priced at the batch rate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from intake_eval.llm.anthropic_http import (
    ANTHROPIC_VERSION,
    STRUCTURED_OUTPUTS_BETA,
    AnthropicRoute,
    messages_body,
    openai_shape,
)
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec
from intake_eval.llm.batch import (
    BatchClient,
    BatchLine,
    batch_cost_factor,
    result_lines,
)
from intake_eval.llm.litellm_backend import normalise
from intake_eval.llm.openai_http import ProviderHTTPError


def read_results(raw: bytes) -> Iterator[BatchLine]:
    for line in result_lines(raw):
        result = line.get("result") or {}
        if result.get("type") == "succeeded" and isinstance(result.get("message"), dict):
            yield BatchLine(str(line.get("custom_id", "")), result["message"], None)
        else:
            error = (result.get("error") or {}).get("error") or result.get("error") or result.get("type")
            yield BatchLine(str(line.get("custom_id", "")), None,
                            str(error.get("message") if isinstance(error, dict) else error))


class AnthropicBatchClient(BatchClient):
    def __init__(self, spec: ModelSpec, route: AnthropicRoute, timeout_s: float = 300.0):
        super().__init__(spec, route, timeout_s)
        self.structured = False  # a line asks for output_format: the batch needs its beta header

    @property
    def base_url(self) -> str:
        return self.route.messages_url + "/batches"

    def _headers(self) -> dict[str, str]:
        headers = {"x-api-key": self.route.api_key(self.spec), "anthropic-version": ANTHROPIC_VERSION}
        if self.structured:
            headers["anthropic-beta"] = STRUCTURED_OUTPUTS_BETA
        return headers

    def line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        body = messages_body(self.route, self.backend.request_params(request))
        self.structured = self.structured or "output_format" in body
        return {"custom_id": custom_id, "params": body}

    def result(self, request: ChatRequest, body: dict[str, Any]) -> ChatResult:
        # a schema request's answer may come as the forced tool call, as online
        response = openai_shape(body, json_mode=request.response_schema is not None)
        result = normalise(self.spec, request, response, 0.0)
        usage = result.usage.model_copy(update={"cost_usd": result.usage.cost_usd * batch_cost_factor(self.spec)})
        return result.model_copy(update={"usage": usage})

    async def submit(self, path: Path) -> tuple[str, str | None]:
        with open(path, "rb") as handle:
            requests = [json.loads(raw) for raw in handle if raw.strip()]
        self.structured = self.structured or any("output_format" in r["params"] for r in requests)
        created = json.loads(await self._batch_route("POST", "", json={"requests": requests}))
        if not isinstance(created, dict) or not created.get("id"):
            raise ProviderHTTPError(200, f"batch creation answered without an id: {str(created)[:200]}", {})
        return str(created["id"]), None

    async def get(self, batch_id: str) -> dict[str, Any]:
        """The batch in the shape the progress lines and ``wait`` read (status, request_counts)."""
        batch = json.loads(await self._call("GET", f"/{batch_id}"))
        counts = batch.get("request_counts") or {}
        failed = sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))
        done = int(counts.get("succeeded") or 0)
        return {**batch, "status": batch.get("processing_status"),
                "request_counts": {"total": done + failed + int(counts.get("processing") or 0),
                                   "completed": done, "failed": failed}}

    async def results(self, batch: dict[str, Any]) -> list[BatchLine]:
        url = batch.get("results_url")
        return list(read_results(await self._call("GET", str(url)))) if url else []
