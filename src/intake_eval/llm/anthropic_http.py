"""Anthropic's native Messages API over plain HTTP: POST ``{base}/v1/messages``.

Claude goes through this path instead of litellm (a fraction of the CPU per call, see
scripts/bench_providers.py); Bedrock and Vertex stay on litellm. The request is what litellm sends
(system as top-level blocks, every message as content blocks carrying the prompt cache's
``cache_control`` breakpoints, a schema as the GA ``output_config.format`` where the model supports
native structured outputs — the beta ``output_format`` and its header only as the negotiation's
fallback — and as one forced tool call otherwise), and the answer is turned into the OpenAI shape litellm makes
of it — text, thinking → reasoning, usage with cache reads and writes, ``stop_reason`` as
``finish_reason`` (a ``refusal`` also as ``message.refusal``, other tool calls as ``tool_calls``) —
so the one normalisation (litellm_backend.normalise) gives the same result whichever path made the call. The schema and
model facts come from litellm's own Anthropic tables, looked up once per alias, never per call.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, cast

from intake_eval.llm.base import ModelSpec
from intake_eval.llm.litellm_import import import_litellm
from intake_eval.llm.providers import read_api_key

ANTHROPIC_VERSION = "2023-06-01"
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"
DEFAULT_BASE = "https://api.anthropic.com"
BASE_URL_VARIABLES = ("INTAKE_EVAL_BASE_URL_ANTHROPIC", "ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL")
JSON_TOOL = "json_tool_call"  # litellm's name for the tool that carries a schema answer
# Parameters of an alias's extra_params sent as they are; any other one (reasoning_effort, …)
# needs litellm's mapping, so such an alias stays on litellm.
PASSED_THROUGH = frozenset({"thinking", "top_p", "top_k", "stop_sequences", "metadata"})
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                "refusal": "content_filter", "compaction": "length"}


@dataclass(frozen=True)
class AnthropicRoute:
    """How one Claude alias is called: where, with which key, what the model supports."""

    base_url: str  # without /v1/messages
    wire_model: str
    key_env: str | None  # None → no key (a server you run)
    native_schema: bool  # output_format (structured outputs) rather than a forced tool call
    default_max_tokens: int  # Anthropic requires max_tokens; litellm's value when the alias sets none

    @property
    def messages_url(self) -> str:
        # litellm appends /v1/messages to any base that does not already end with it
        return self.base_url if self.base_url.endswith("/v1/messages") else self.base_url + "/v1/messages"

    def api_key(self, spec: ModelSpec) -> str:
        return read_api_key(spec, self.key_env)

    def headers(self, spec: ModelSpec, body: dict[str, Any]) -> dict[str, str]:
        headers = {"x-api-key": self.api_key(spec), "anthropic-version": ANTHROPIC_VERSION,
                   "content-type": "application/json"}
        if "output_format" in body:
            headers["anthropic-beta"] = STRUCTURED_OUTPUTS_BETA
        return headers


def anthropic_route(spec: ModelSpec) -> AnthropicRoute | None:
    """The direct route for an ``anthropic/…`` alias, or None when it needs litellm."""
    if spec.provider != "anthropic" or "/" not in spec.model or set(spec.extra_params) - PASSED_THROUGH:
        return None
    import_litellm()  # configured for offline use before any of its modules loads
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    wire_model = spec.model.split("/", 1)[1]
    if spec.api_base:
        base, key_env = spec.api_base, spec.api_key_env  # a custom server never gets the provider key by default
    else:
        base = next((os.environ[n].strip() for n in BASE_URL_VARIABLES if os.environ.get(n, "").strip()), DEFAULT_BASE)
        key_env = spec.api_key_env or "ANTHROPIC_API_KEY"
    native = AnthropicConfig._supports_model_capability(wire_model, "supports_native_structured_output", "anthropic")
    return AnthropicRoute(base.rstrip("/"), wire_model, key_env, bool(native),
                          AnthropicConfig.get_max_tokens_for_model(wire_model))


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [dict(block) for block in content]
    return [{"type": "text", "text": str(content)}]


def messages_body(route: AnthropicRoute, params: dict[str, Any], level: str | None = None) -> dict[str, Any]:
    """The Messages API body for the OpenAI-style parameters ProviderBackend.request_params makes.
    A schema goes as the GA ``output_config.format``; at the ``json_schema_beta`` level as the beta
    ``output_format`` (headers() then adds its anthropic-beta header)."""
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for message in params["messages"]:
        blocks = _blocks(message.get("content", ""))
        if message["role"] == "system":
            system.extend(blocks)
        elif messages and messages[-1]["role"] == message["role"]:
            messages[-1]["content"].extend(blocks)  # Anthropic wants the roles to alternate
        else:
            messages.append({"role": message["role"], "content": blocks})
    body: dict[str, Any] = {"model": route.wire_model, "messages": messages}
    for name in ("temperature", "top_p", "top_k", "stop_sequences", "metadata"):
        if params.get(name) is not None:
            body[name] = params[name]
    body["max_tokens"] = params.get("max_tokens") or route.default_max_tokens
    thinking = params.get("thinking")
    if isinstance(thinking, dict):
        thinking = AnthropicConfig.cap_thinking_budget_to_max_tokens(cast(Any, thinking), body["max_tokens"])
    if thinking:
        body["thinking"] = thinking
    if system:
        body["system"] = system
    fmt = params.get("response_format")
    schema = None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt["json_schema"]["schema"]
    if schema is not None and route.native_schema:
        output_format = AnthropicConfig().map_response_format_to_anthropic_output_format(fmt)
        if level == "json_schema_beta":
            body["output_format"] = output_format
        else:
            body["output_config"] = {"format": output_format}
    elif schema is not None:
        body["tools"] = [{"name": JSON_TOOL, "input_schema": {"type": "object", **schema}}]
        if not thinking:  # a forced tool call is refused while thinking is on
            body["tool_choice"] = {"name": JSON_TOOL, "type": "tool"}
    return body


def _reasoning_tokens(usage: dict[str, Any], reasoning: str | None, completion_tokens: int) -> int:
    """As litellm counts them: the provider's thinking_tokens, else an estimate from the text."""
    details = usage.get("output_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("thinking_tokens"), int):
        return min(max(0, details["thinking_tokens"]), completion_tokens)
    if reasoning:
        counted = import_litellm().token_counter(text=reasoning, count_response_tokens=True)
        return max(0, min(counted, completion_tokens))
    return 0


def _tool_calls(tools: list[dict[str, Any]], answered_schema: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Tool calls other than the one carrying a schema answer, as OpenAI names them (None when none)."""
    calls = [{"type": "function", "id": block.get("id"), "function": {"name": block.get("name")}}
             for block in tools if block not in answered_schema]
    return calls or None


def openai_shape(payload: dict[str, Any], json_mode: bool) -> dict[str, Any]:
    """A Messages API answer in the OpenAI chat shape, as litellm builds it."""
    content = payload.get("content") or []
    text = "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")
    thinking = [block for block in content if block.get("type") in ("thinking", "redacted_thinking")]
    reasoning = "".join(str(block.get("thinking")) for block in thinking
                        if block.get("thinking") is not None) if thinking else None
    tools = [block for block in content if block.get("type") in ("tool_use", "server_tool_use")]
    finish = STOP_REASONS.get(str(payload.get("stop_reason")), "stop")
    # Claude says it declined only through stop_reason; the text before it (if any) is kept as its words
    refusal = (text.strip() or "stop_reason: refusal") if payload.get("stop_reason") == "refusal" else None
    schema_calls = [block for block in tools if block.get("name") == JSON_TOOL]
    if json_mode and schema_calls:
        answer = schema_calls[0].get("input")
        if isinstance(answer, dict) and answer.get("values") is not None:
            answer = answer["values"]
        if len(schema_calls) == len(tools):
            text, reasoning, finish = json.dumps(answer), None, "stop"
        else:
            text = text + json.dumps(answer) if text else json.dumps(answer)
    usage = payload.get("usage")
    shaped = _usage_shape(usage, reasoning) if isinstance(usage, dict) else None
    return {
        "id": payload.get("id"), "model": payload.get("model"),
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": text or None, "reasoning_content": reasoning,
                                 "refusal": refusal, "tool_calls": _tool_calls(tools, schema_calls if json_mode else [])}}],
        "usage": shaped,
    }


def _usage_shape(usage: dict[str, Any], reasoning: str | None) -> dict[str, Any] | None:
    """Anthropic's usage in the OpenAI shape (None when it has no counts). Counts that are not whole
    numbers are passed on as they are, for the normalisation's check to name."""
    if usage.get("input_tokens") is None and usage.get("output_tokens") is None:
        return None
    counts = [usage.get(name) or 0 for name in ("input_tokens", "cache_read_input_tokens",
                                                 "cache_creation_input_tokens", "output_tokens")]
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in counts):
        return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    fresh, read, written, completion = counts
    prompt = fresh + read + written  # Anthropic's input_tokens leave the cache out
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": read, "cache_creation_tokens": written},
            "cache_creation_input_tokens": written, "cache_read_input_tokens": read,
            "completion_tokens_details": {"reasoning_tokens": _reasoning_tokens(usage, reasoning, max(0, completion))}}
