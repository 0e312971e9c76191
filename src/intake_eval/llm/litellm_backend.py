"""Real providers behind the one call shape: one attempt per ``complete`` (retries live in retry.py),
and what every route shares — the normalisation of an answer into a ChatResult and its price.

Which wire format carries an alias's request is the route registry's business (llm/routes/): plain
aiohttp for OpenAI-compatible endpoints (openai_http.py; a fraction of litellm's CPU per call, see
scripts/bench_models.py) and for Claude's native Messages API (anthropic_http.py), litellm for
Bedrock, Vertex and the rest. Every route feeds the same normalisation below, so a result looks the
same whichever route produced it.

Prices come from litellm's table read without importing litellm (llm/price_table.py) for every
model the table prices linearly; litellm itself prices the others (tiers above a prompt length,
per-second or per-character bases), and ``ProviderBackend`` imports it up front for such a model, so
that the direct routes never wait for ``import litellm``. The API key is read by llm/keys.py at call
time and is never logged, cached or put in a message.
"""

from __future__ import annotations

import time
from typing import Any

from intake_eval.llm.base import (
    CallUsage,
    ChatRequest,
    ChatResult,
    ModelCallError,
    ModelSpec,
    is_local_base,
)
from intake_eval.llm.litellm_import import import_litellm
from intake_eval.llm.price_table import table_entry
from intake_eval.llm.prompt_cache import with_breakpoints
from intake_eval.llm.reasoning import split_reasoning
from intake_eval.llm.routes.table import route_for
from intake_eval.llm.structured import response_format, starting_level
from intake_eval.llm.usage_check import (
    ImplausibleUsage,
    checked_count,
    count_bound,
    estimate_tokens,
    usage_is_missing,
)


def _linear_prices(model: str) -> tuple[float, float] | None:
    """(input, output) dollars per token when litellm's table prices this model linearly (read from
    the extract, no litellm import); None for a tiered, unmapped or otherwise special model, which
    litellm prices call by call."""
    entry = table_entry(model)
    if not entry.get("linear"):
        return None
    return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])


def _priced_by_table(spec: ModelSpec) -> bool:
    overridden = spec.input_cost_per_token is not None or spec.output_cost_per_token is not None
    return not (overridden or spec.is_local or spec.is_offline or is_local_base(spec.api_base))


def needs_litellm_prices(spec: ModelSpec) -> bool:
    """Whether pricing this alias's calls takes litellm itself (its table has no linear entry for it)."""
    return _priced_by_table(spec) and _linear_prices(spec.model) is None


def cache_prices(spec: ModelSpec) -> tuple[float | None, float | None]:
    """Dollars per input token read from / written to the provider's prompt cache: the alias's
    override, else litellm's table (not when the alias sets its own input/output prices); None
    where neither says, and such tokens then cost the plain input price."""
    read, write = spec.cache_read_cost_per_token, spec.cache_write_cost_per_token
    overridden = spec.input_cost_per_token is not None or spec.output_cost_per_token is not None
    if (read is None or write is None) and not overridden and not is_local_base(spec.api_base) and not spec.is_offline:
        info = table_entry(spec.model)
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
    if not _priced_by_table(spec):
        return None
    info = table_entry(spec.model)
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
    """One alias's endpoint. ``complete`` makes exactly one attempt through the alias's route (llm/routes/);
    errors propagate raw to retry.py. ``client="litellm"`` forces the litellm route for any alias."""

    def __init__(self, spec: ModelSpec, client: str = "auto"):
        self.spec = spec
        self.route = route_for(spec, client)
        if needs_litellm_prices(spec):
            import_litellm()  # here, not inside the event loop: the import takes seconds

    @property
    def reports_sending(self) -> bool:
        """Whether this backend tells ``REQUEST_SENT`` when a request has left (the direct HTTP routes do)."""
        return self.route.reports_sending

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
        await self.route.aclose()

    async def complete(self, request: ChatRequest, level: str | None = None) -> ChatResult:
        params = self.request_params(request, level)
        started = time.monotonic()
        response = await self.route.send(params, level)
        return normalise(self.spec, request, response, time.monotonic() - started)
