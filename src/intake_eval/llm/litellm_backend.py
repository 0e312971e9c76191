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
from intake_eval.llm.usage_check import (
    ImplausibleUsage,
    checked_count,
    count_bound,
    estimate_tokens,
    usage_is_missing,
)

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


def cache_tokens(response: Any, usage: Any) -> tuple[Any, Any]:
    """(read from, written to) the provider's prompt cache, from its own usage shape: OpenAI and vLLM
    ``prompt_tokens_details.cached_tokens`` (also litellm's mapping of Anthropic's and Gemini's counts),
    Anthropic ``cache_read_input_tokens`` / ``cache_creation_input_tokens``, Together's top-level
    ``usage.cached_tokens``, llama.cpp ``timings.cache_n``, as the provider sent them (checked by the caller).
    A zero in one field does not hide a count in another (Together sends ``cached_tokens`` beside an empty
    details object)."""
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
    return read, written


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


def estimated_usage(spec: ModelSpec, request: ChatRequest, answer_text: str | None = None) -> CallUsage:
    """Usage and dollars estimated from the request's own size (and the answer's, when there is one;
    else the request's max_tokens), ``cost_known: false``: what a call is held at when the provider's
    count is missing or unreadable."""
    max_tokens = request.max_tokens if request.max_tokens is not None else spec.max_tokens
    prompt, completion = estimate_tokens(request, answer_text, max_tokens)
    dollars, _known = call_cost(spec, prompt, completion)
    return CallUsage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=dollars, cost_known=False)


def _context_tokens(spec: ModelSpec) -> int | None:
    """The model's context window from litellm's table, for a model litellm prices (the backend imported
    litellm for it already); None for a local server or an alias with its own prices."""
    priced_here = spec.input_cost_per_token is not None or spec.output_cost_per_token is not None
    if priced_here or spec.is_local or spec.is_offline or is_local_base(spec.api_base):
        return None
    info = _model_info(spec.model)
    return info.get("max_input_tokens") or info.get("max_tokens")


def counted_usage(spec: ModelSpec, request: ChatRequest, response: Any, text: str | None) -> CallUsage:
    """The answer's usage, priced: the provider's counts checked (usage_check.py; an implausible one
    fails the call, unpriced), or an estimate when the answer carries no usage."""
    usage = _field(response, "usage")
    if usage_is_missing(usage):
        return estimated_usage(spec, request, text or "")
    bound = count_bound(_context_tokens(spec))
    try:
        prompt_tokens = checked_count("prompt_tokens", _field(usage, "prompt_tokens"), bound)
        completion_tokens = checked_count("completion_tokens", _field(usage, "completion_tokens"), bound)
        reasoning_tokens = checked_count("completion_tokens_details.reasoning_tokens",
                                         _field(_field(usage, "completion_tokens_details"), "reasoning_tokens"), bound)
        read, written = cache_tokens(response, usage)
        cached = checked_count("cached_tokens", read, bound)
        written = checked_count("cache_write_tokens", written, bound)
    except ImplausibleUsage as error:
        raise ModelCallError(f"model '{spec.alias or spec.model}' answered with unusable usage: {error}; "
                             "the call is not priced from it", kind="invalid_output",
                             usage=estimated_usage(spec, request, text or "")) from None
    cost, known = call_cost(spec, prompt_tokens, completion_tokens, cached_tokens=cached, cache_write_tokens=written)
    return CallUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                     reasoning_tokens=reasoning_tokens, cached_prompt_tokens=min(cached, prompt_tokens),
                     cache_write_tokens=written, cost_usd=cost, cost_known=known)


def served_model(spec: ModelSpec, named: Any) -> str | None:
    """The model id the provider's answer named, as the provider spelled it (litellm prefixes its own
    provider name, which the direct path does not see)."""
    if not named:
        return None
    return str(named).removeprefix(f"{spec.provider}/")


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
    usage = counted_usage(spec, request, response, text)
    if not text and finish_reason == "length":
        limit = request.max_tokens if request.max_tokens is not None else spec.max_tokens
        raise ModelCallError(
            f"model '{spec.alias or spec.model}' stopped at max_tokens={limit} with no visible answer "
            f"({usage.reasoning_tokens or usage.completion_tokens} tokens spent, reasoning included); "
            "raise max_tokens for this alias",
            kind="empty_after_length", usage=usage,
        )
    timings = _field(response, "timings")
    return ChatResult(
        text=text,
        reasoning=reasoning,
        usage=usage,
        latency_s=latency_s,
        finish_reason=finish_reason,
        refusal=str(refusal) if refusal else None,
        tool_calls=len(tool_calls) if isinstance(tool_calls, list) else 0,
        model=spec.model,
        provider_model=served_model(spec, _field(response, "model")),
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

    @property
    def reports_sending(self) -> bool:
        """Whether this backend tells ``REQUEST_SENT`` when a request has left (the direct HTTP paths do)."""
        return self._http is not None

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
