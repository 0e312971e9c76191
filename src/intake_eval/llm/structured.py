"""Structured output negotiated per endpoint.

Servers differ in what ``response_format`` they take: OpenAI, vLLM and llama.cpp's llama-server take
``json_schema``; llama-cpp-python takes only ``{"type": "json_object", "schema": …}`` (and answers
``json_schema`` with HTTP 500); some take only ``json_object``; some take none. A request that
carries a schema is sent at the endpoint's current level:

    json_schema → json_object_schema → json_object → prompt (no response_format)

Claude's ladder is its own (``ANTHROPIC_LEVELS``): the GA ``output_config.format`` (json_schema),
then the beta ``output_format`` + ``anthropic-beta`` header (json_schema_beta), then the prompt
alone. The level recorded is the one whose request was answered, so the manifest never names a
mechanism that was not sent.

A request error that names the response format (any status) moves the endpoint down one level at
once and the request is sent again at the new level — it is never retried as a transient error.
The level that answered is remembered for the life of the process, shared by every alias on the
same endpoint, and reported for the manifest. Below ``json_schema`` the caller's validation and
its one repair request carry the weight (every caller validates anyway).

``supports_json_schema`` on an alias overrides where negotiation starts: true → json_schema,
false → prompt (no response_format is ever sent); unset → by provider.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from intake_eval.llm.base import ModelSpec

LEVELS: tuple[str, ...] = ("json_schema", "json_object_schema", "json_object", "prompt")
# Claude's Messages API has no json_object modes: its schema goes as the GA ``output_config.format``
# (json_schema), else the beta ``output_format`` with its ``anthropic-beta`` header, else nothing.
ANTHROPIC_LEVELS: tuple[str, ...] = ("json_schema", "json_schema_beta", "prompt")
LEVEL_NAMES = {
    "json_schema": "json_schema",
    "json_schema_beta": "the beta output_format (anthropic-beta header)",
    "json_object_schema": "json_object with a schema",
    "json_object": "json_object",
    "prompt": "the prompt alone (no response_format)",
}
# Providers whose json_schema response_format litellm (or the server) honours.
SCHEMA_PROVIDERS = {"openai", "hosted_vllm", "gemini", "vertex_ai", "anthropic", "azure", "fireworks_ai", "lm_studio",
                    "local"}  # local: the embedded llama.cpp server, which honours json_schema
# Schema keywords a provider's dialect refuses (Gemini: additionalProperties) or may not pass on
# (patterns), removed before sending; the caller's validation still checks the answer.
UNSUPPORTED_KEYWORDS: dict[str, frozenset[str]] = {
    "gemini": frozenset({"additionalProperties", "$schema", "pattern"}),
    "vertex_ai": frozenset({"additionalProperties", "$schema", "pattern"}),
}
# Words that tie an error to the requested output format rather than to the request as a whole.
# A rejected structured-outputs beta header is one too: the request without it can still be answered.
_FORMAT_WORDS = re.compile(r"response[_ ]format|output_format|output_config|response_schema|json_schema|json_object|"
                           r"structured[ -]outputs?|anthropic-beta|\bgrammar\b|guided_json", re.IGNORECASE)
_NOT_ABOUT_FORMAT = {401, 403, 408, 429}  # auth and rate limits: never a verdict on the format


def starting_level(spec: ModelSpec) -> str:
    if spec.supports_json_schema is True:
        return "json_schema"
    if spec.supports_json_schema is False:
        return "prompt"
    thinking = "thinking" in spec.extra_params or "reasoning_effort" in spec.extra_params
    if spec.provider == "anthropic" and thinking:
        return "prompt"  # Anthropic forces a tool call for a schema, which is refused while thinking is on
    return "json_schema" if spec.provider in SCHEMA_PROVIDERS else "prompt"


def levels_for(spec: ModelSpec) -> tuple[str, ...]:
    """The negotiation ladder of this alias's endpoint, most constrained first."""
    return ANTHROPIC_LEVELS if spec.provider == "anthropic" else LEVELS


def strip_keywords(schema: Any, unsupported: frozenset[str]) -> Any:
    """The schema without the given keywords, at every schema node (property NAMES are kept)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in unsupported:
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: strip_keywords(sub, unsupported) for name, sub in value.items()}
        elif key in ("items", "not", "additionalItems") and isinstance(value, dict):
            out[key] = strip_keywords(value, unsupported)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            out[key] = [strip_keywords(sub, unsupported) for sub in value]
        else:
            out[key] = value
    return out


def schema_for(provider: str, schema: dict[str, Any]) -> dict[str, Any]:
    unsupported = UNSUPPORTED_KEYWORDS.get(provider)
    return strip_keywords(schema, unsupported) if unsupported else schema


def response_format(level: str, schema: dict[str, Any] | None, provider: str) -> dict[str, Any] | None:
    """The ``response_format`` for one request at one level; None → send none."""
    if schema is None or level == "prompt":
        return None
    if level == "json_object":
        return {"type": "json_object"}
    schema = schema_for(provider, schema)
    if level == "json_schema_beta":  # the same request; anthropic_http sends it as the beta field
        level = "json_schema"
    if level == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema, "strict": False}}


def error_text(error: BaseException) -> str:
    parts = [str(getattr(error, "message", "") or ""), str(error), str(getattr(error, "body", "") or "")]
    param = getattr(error, "param", None)
    if param:
        parts.append(f"param {param}")
    return " ".join(part for part in parts if part)


def names_response_format(error: BaseException) -> bool:
    """True when a failed request was refused because of its response_format (any HTTP status)."""
    if getattr(error, "status_code", None) in _NOT_ABOUT_FORMAT:
        return False
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return False  # a timeout says nothing about the format
    return bool(_FORMAT_WORDS.search(error_text(error)))


class StructuredOutput:
    """One endpoint's negotiation state, shared by every alias that points at it.

    Until a level has answered, structured requests go one at a time (``probing``), so a run that
    opens with 64 concurrent judge calls pays for one rejected request, not 64.
    """

    def __init__(self, endpoint: str, levels: tuple[str, ...] = LEVELS):
        self.endpoint = endpoint
        self.levels = levels
        self.floor = 0  # index of the highest level not known to be refused
        self.worked: str | None = None  # the level that last answered
        self.rejected: dict[str, str] = {}  # level -> the server's words
        self.used = False  # a schema request was made
        self._loop: asyncio.AbstractEventLoop | None = None
        self._probe: asyncio.Lock | None = None

    def level_for(self, start: str) -> str:
        self.used = True
        start_index = self.levels.index(start) if start in self.levels else 0
        return self.levels[min(max(start_index, self.floor), len(self.levels) - 1)]

    def reject(self, level: str, message: str) -> str | None:
        """The endpoint refused ``level``: move below it (once, however many requests saw it).
        Returns the level to try next, or None when nothing lower is left."""
        index = self.levels.index(level)
        self.rejected.setdefault(level, message)
        self.floor = max(self.floor, index + 1)
        if self.worked is not None and self.levels.index(self.worked) <= index:
            self.worked = None
        return self.levels[self.floor] if self.floor < len(self.levels) else None

    def confirm(self, level: str) -> None:
        self.worked = level

    @asynccontextmanager
    async def probing(self) -> AsyncIterator[None]:
        if self.worked is not None:
            yield
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._probe = loop, asyncio.Lock()
        probe = self._probe
        assert probe is not None
        await probe.acquire()
        if self.worked is None:
            try:
                yield
            finally:
                probe.release()
            return
        # A level answered while this request waited: it goes out at once, beside the others
        # (holding the lock would send every request that queued behind the probe one at a time).
        probe.release()
        yield

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.worked, "rejected": dict(self.rejected)}
