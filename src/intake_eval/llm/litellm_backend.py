"""Real providers behind the one call shape: one attempt per ``complete`` (retries live in retry.py).

litellm speaks to every provider. For OpenAI-compatible endpoints (the providers listed in
providers.py, and ``openai/…`` or ``hosted_vllm/…`` with an ``api_base``: vLLM, llama.cpp, a local
test server) a plain aiohttp POST is used instead (openai_http.py): same wire format, a fraction of the CPU per call
(see scripts/bench_models.py); Claude's native Messages API likewise (anthropic_http.py). Bedrock,
Vertex and the rest stay on litellm. Every path feeds the same normalisation below, so a result looks the
same whichever path produced it. The API key is read from its variable at call time and is
never logged, cached or put in a message.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from intake_eval.llm.anthropic_http import anthropic_route, messages_body, openai_shape
from intake_eval.llm.base import (
    CallUsage,
    ChatRequest,
    ChatResult,
    ModelCallError,
    ModelSpec,
    is_local_base,
)
from intake_eval.llm.litellm_import import import_litellm
from intake_eval.llm.openai_http import OpenAICompatibleClient
from intake_eval.llm.prompt_cache import with_breakpoints
from intake_eval.llm.providers import direct_route
from intake_eval.llm.reasoning import split_reasoning
from intake_eval.llm.structured import response_format, starting_level

_NO_KEY = "not-needed"  # OpenAI-compatible servers expect some Bearer value; local ones ignore it


def api_key_for(spec: ModelSpec) -> str | None:
    """The key for this call, from the alias's variable. None → the provider's default variable."""
    if spec.api_key_env:
        value = os.environ.get(spec.api_key_env, "").strip()
        if not value:
            raise ModelCallError(
                f"model '{spec.alias or spec.model}' needs the environment variable {spec.api_key_env}, which is not set",
                kind="fatal",
            )
        return value
    # Never let a local/custom server receive the user's OPENAI_API_KEY by default.
    return _NO_KEY if spec.api_base else None


def uses_direct_http(spec: ModelSpec) -> bool:
    return direct_route(spec) is not None or anthropic_route(spec) is not None


@functools.lru_cache(maxsize=512)
def _model_info(model: str) -> dict[str, Any]:
    """litellm's table entry, looked up once per model id (a lookup costs more than the call's HTTP)."""
    try:
        return dict(import_litellm().get_model_info(model))
    except Exception:  # an unmapped model
        return {}


@functools.lru_cache(maxsize=512)
def _linear_prices(model: str) -> tuple[float, float] | None:
    """(input, output) dollars per token when litellm prices this model linearly — checked against
    litellm's own cost_per_token — so a call is priced without asking litellm again; None for a
    tiered, unmapped or otherwise special model, which litellm prices call by call."""
    info = _model_info(model)
    rates = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    tiered = any(value is not None and key.startswith(("input_cost_per_token_above", "output_cost_per_token_above"))
                 for key, value in info.items())
    if tiered or not all(isinstance(rate, (int, float)) for rate in rates):
        return None
    litellm = import_litellm()
    for prompt, completion in ((1000, 1000), (3, 7), (123_457, 0)):
        try:
            expected = litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=completion)
        except Exception:
            return None
        if expected != (rates[0] * prompt, rates[1] * completion):
            return None
    return float(rates[0]), float(rates[1])


def cache_prices(spec: ModelSpec) -> tuple[float | None, float | None]:
    """Dollars per input token read from / written to the provider's prompt cache: the alias's
    override, else litellm's table (not when the alias sets its own input/output prices); None
    where neither says, and such tokens then cost the plain input price."""
    read, write = spec.cache_read_cost_per_token, spec.cache_write_cost_per_token
    overridden = spec.input_cost_per_token is not None or spec.output_cost_per_token is not None
    if (read is None or write is None) and not overridden and not is_local_base(spec.api_base) and not spec.is_offline:
        info = _model_info(spec.model)
        read = read if read is not None else info.get("cache_read_input_token_cost")
        write = write if write is not None else info.get("cache_creation_input_token_cost")
    return read, write


def call_cost(spec: ModelSpec, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
              cache_write_tokens: int = 0) -> tuple[float, bool]:
    """(dollars, known). The alias's prices win; local servers are free; else litellm's table.
    ``prompt_tokens`` counts every input token; the cached and cache-written ones among them are
    priced at the provider's cache rates where known."""
    cached = min(max(cached_tokens, 0), prompt_tokens)
    written = min(max(cache_write_tokens, 0), prompt_tokens - cached)
    if spec.input_cost_per_token is not None or spec.output_cost_per_token is not None:
        per_input = spec.input_cost_per_token or 0.0
        full_prompt = per_input * prompt_tokens
        completion_cost = (spec.output_cost_per_token or 0.0) * completion_tokens
    elif spec.is_local or (spec.api_base and is_local_base(spec.api_base)):
        return 0.0, True
    elif (linear := _linear_prices(spec.model)) is not None:
        full_prompt, completion_cost = linear[0] * prompt_tokens, linear[1] * completion_tokens
        per_input = full_prompt / prompt_tokens if prompt_tokens else 0.0  # as derived from litellm's answer
    else:
        litellm = import_litellm()
        try:
            full_prompt, completion_cost = litellm.cost_per_token(
                model=spec.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        except Exception:  # litellm raises several types for an unmapped model; unknown is not an error
            return 0.0, False
        per_input = float(full_prompt) / prompt_tokens if prompt_tokens else 0.0
    if not (cached or written):
        return float(full_prompt) + float(completion_cost), True
    read_price, write_price = cache_prices(spec)
    read_price = per_input if read_price is None else read_price
    write_price = per_input if write_price is None else write_price
    prompt_cost = float(full_prompt) - per_input * (cached + written) + read_price * cached + write_price * written
    return prompt_cost + float(completion_cost), True


def cache_tokens(response: Any, usage: Any) -> tuple[int, int]:
    """(read from, written to) the provider's prompt cache, from its own usage shape: OpenAI and vLLM
    ``prompt_tokens_details.cached_tokens`` (also litellm's mapping of Anthropic's and Gemini's counts),
    Anthropic ``cache_read_input_tokens`` / ``cache_creation_input_tokens``, Together's top-level
    ``usage.cached_tokens``, llama.cpp ``timings.cache_n``. A zero in one field does not hide a
    count in another (Together sends ``cached_tokens`` beside an empty details object)."""
    details = _field(usage, "prompt_tokens_details")
    read = _field(details, "cached_tokens") or None
    if read is None:
        read = _field(usage, "cache_read_input_tokens") or None
    if read is None:
        read = _field(usage, "cached_tokens")
    if read is None:
        read = _field(_field(response, "timings"), "cache_n")
    written = _field(usage, "cache_creation_input_tokens")
    if written is None:
        written = _field(details, "cache_creation_tokens")
    return int(read or 0), int(written or 0)


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def normalise(spec: ModelSpec, request: ChatRequest, response: Any, latency_s: float) -> ChatResult:
    """A provider response (litellm ModelResponse or openai ChatCompletion) → ChatResult."""
    choices = _field(response, "choices") or []
    if not choices:
        raise ModelCallError(f"model '{spec.alias or spec.model}' returned no choices", kind="invalid_output")
    choice = choices[0]
    message = _field(choice, "message")
    finish_reason = _field(choice, "finish_reason")
    text, reasoning = split_reasoning(
        _field(message, "content"), _field(message, "reasoning_content"), _field(message, "reasoning"))
    refusal = _field(message, "refusal")  # OpenAI's structured refusal; Claude's via anthropic_http
    tool_calls = _field(message, "tool_calls")
    usage = _field(response, "usage")
    prompt_tokens = int(_field(usage, "prompt_tokens") or 0)
    completion_tokens = int(_field(usage, "completion_tokens") or 0)
    reasoning_tokens = int(_field(_field(usage, "completion_tokens_details"), "reasoning_tokens") or 0)
    cached, written = cache_tokens(response, usage)
    if not text and finish_reason == "length":
        limit = request.max_tokens if request.max_tokens is not None else spec.max_tokens
        raise ModelCallError(
            f"model '{spec.alias or spec.model}' stopped at max_tokens={limit} with no visible answer "
            f"({reasoning_tokens or completion_tokens} tokens spent, reasoning included); raise max_tokens for this alias",
            kind="empty_after_length",
        )
    cost, known = call_cost(spec, prompt_tokens, completion_tokens, cached_tokens=cached, cache_write_tokens=written)
    timings = _field(response, "timings")
    return ChatResult(
        text=text,
        reasoning=reasoning,
        usage=CallUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        reasoning_tokens=reasoning_tokens, cached_prompt_tokens=min(cached, prompt_tokens),
                        cache_write_tokens=written, cost_usd=cost, cost_known=known),
        latency_s=latency_s,
        finish_reason=finish_reason,
        refusal=str(refusal) if refusal else None,
        tool_calls=len(tool_calls) if isinstance(tool_calls, list) else 0,
        model=spec.model,
        server_timings={key: float(value) for key, value in timings.items() if isinstance(value, (int, float))}
        if isinstance(timings, dict) else None,
    )


class ProviderBackend:
    """One endpoint. ``complete`` makes exactly one HTTP attempt; errors propagate raw to retry.py."""

    def __init__(self, spec: ModelSpec, client: str = "auto"):
        if client not in ("auto", "litellm"):
            raise ValueError(f"client must be 'auto' or 'litellm', not {client!r}")
        self.spec = spec
        self._http = None  # client="litellm" forces litellm even for OpenAI-compatible endpoints
        self._route = direct_route(spec) if client == "auto" else None
        priced_by_litellm = not is_local_base(spec.api_base) and (
            spec.input_cost_per_token is None and spec.output_cost_per_token is None)
        if self._route is None or priced_by_litellm:
            import_litellm()  # here, not inside the event loop: the import takes seconds
        # Claude's native API: its model facts come from litellm's tables, read here once
        self._anthropic = anthropic_route(spec) if client == "auto" and self._route is None else None
        if self._route is not None:
            self._http = OpenAICompatibleClient(self._route.base_url, spec.timeout_s)
        elif self._anthropic is not None:
            self._http = OpenAICompatibleClient(self._anthropic.base_url, spec.timeout_s)

    def request_params(self, request: ChatRequest, level: str | None = None) -> dict[str, Any]:
        """The provider parameters; ``level`` is the structured-output level for a schema request
        (None → where this alias's negotiation starts)."""
        spec = self.spec
        params: dict[str, Any] = {"messages": with_breakpoints(spec, request.messages, request.cache_points)}
        temperature = request.temperature if request.temperature is not None else spec.temperature
        max_tokens = request.max_tokens if request.max_tokens is not None else spec.max_tokens
        if temperature is not None:
            params["temperature"] = temperature
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        fmt = response_format(level or starting_level(spec), request.response_schema, spec.provider)
        if fmt is not None:
            params["response_format"] = fmt
        params.update(spec.extra_params)
        return params

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def complete(self, request: ChatRequest, level: str | None = None) -> ChatResult:
        spec = self.spec
        params = self.request_params(request, level)
        started = time.monotonic()
        if self._http is not None and self._route is not None:
            route = self._route
            response = route.fix_usage(await self._http.chat(route.body(params), route.api_key(spec)))
        elif self._http is not None and self._anthropic is not None:
            claude = self._anthropic
            body = messages_body(claude, params, level or starting_level(spec))
            payload = await self._http.post(claude.messages_url, body, claude.headers(spec, body))
            response = openai_shape(payload, json_mode="response_format" in params)
        else:
            api_key = api_key_for(spec)
            litellm = import_litellm()
            response = await litellm.acompletion(
                model=spec.model, api_key=api_key, api_base=spec.api_base, timeout=spec.timeout_s,
                num_retries=0, max_retries=0, **params)
        return normalise(spec, request, response, time.monotonic() - started)
