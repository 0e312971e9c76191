"""Real providers behind the one call shape: one attempt per ``complete`` (retries live in retry.py).

litellm speaks to every provider. For OpenAI-compatible endpoints (``openai/…`` or
``hosted_vllm/…`` with an ``api_base``: vLLM, Ollama, llama.cpp, a local test server) a plain
aiohttp POST is used instead (openai_http.py): same wire format, a fraction of the CPU per call
(see scripts/bench_models.py). Both paths feed the same normalisation below, so a result looks the
same whichever path produced it. The API key is read from its variable at call time and is
never logged, cached or put in a message.
"""

from __future__ import annotations

import os
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
from intake_eval.llm.openai_http import OpenAICompatibleClient
from intake_eval.llm.reasoning import split_reasoning
from intake_eval.llm.structured import response_format, starting_level

_OPENAI_COMPATIBLE = {"openai", "hosted_vllm"}
_NO_KEY = "not-needed"  # OpenAI-compatible servers expect some Bearer value; local ones ignore it


def import_litellm():
    """Import litellm offline-safe: local price map, no .env loading, no banner on stdout."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import logging

    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # Its warnings (e.g. "event loop changed" when a pool serves a second asyncio.run) are not the
    # user's business; our own errors say what went wrong.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return litellm


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
    return bool(spec.api_base) and spec.provider in _OPENAI_COMPATIBLE


def call_cost(spec: ModelSpec, prompt_tokens: int, completion_tokens: int) -> tuple[float, bool]:
    """(dollars, known). The alias's prices win; local servers are free; else litellm's table."""
    if spec.input_cost_per_token is not None or spec.output_cost_per_token is not None:
        return ((spec.input_cost_per_token or 0.0) * prompt_tokens
                + (spec.output_cost_per_token or 0.0) * completion_tokens), True
    if spec.api_base and is_local_base(spec.api_base):
        return 0.0, True
    litellm = import_litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=spec.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception:  # litellm raises several types for an unmapped model; unknown is not an error
        return 0.0, False
    return float(prompt_cost) + float(completion_cost), True


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
    usage = _field(response, "usage")
    prompt_tokens = int(_field(usage, "prompt_tokens") or 0)
    completion_tokens = int(_field(usage, "completion_tokens") or 0)
    reasoning_tokens = int(_field(_field(usage, "completion_tokens_details"), "reasoning_tokens") or 0)
    if not text and finish_reason == "length":
        limit = request.max_tokens if request.max_tokens is not None else spec.max_tokens
        raise ModelCallError(
            f"model '{spec.alias or spec.model}' stopped at max_tokens={limit} with no visible answer "
            f"({reasoning_tokens or completion_tokens} tokens spent, reasoning included); raise max_tokens for this alias",
            kind="empty_after_length",
        )
    cost, known = call_cost(spec, prompt_tokens, completion_tokens)
    return ChatResult(
        text=text,
        reasoning=reasoning,
        usage=CallUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        reasoning_tokens=reasoning_tokens, cost_usd=cost, cost_known=known),
        latency_s=latency_s,
        finish_reason=finish_reason,
        model=spec.model,
    )


class ProviderBackend:
    """One endpoint. ``complete`` makes exactly one HTTP attempt; errors propagate raw to retry.py."""

    def __init__(self, spec: ModelSpec, client: str = "auto"):
        if client not in ("auto", "litellm"):
            raise ValueError(f"client must be 'auto' or 'litellm', not {client!r}")
        self.spec = spec
        self._http = None  # client="litellm" forces litellm even for OpenAI-compatible endpoints
        if client == "auto" and uses_direct_http(spec):
            self._http = OpenAICompatibleClient(spec.api_base or "", spec.timeout_s)
        priced_by_litellm = not is_local_base(spec.api_base) and (
            spec.input_cost_per_token is None and spec.output_cost_per_token is None)
        if self._http is None or priced_by_litellm:
            import_litellm()  # here, not inside the event loop: the import takes seconds

    def request_params(self, request: ChatRequest, level: str | None = None) -> dict[str, Any]:
        """The provider parameters; ``level`` is the structured-output level for a schema request
        (None → where this alias's negotiation starts)."""
        spec = self.spec
        params: dict[str, Any] = {"messages": request.messages}
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
        api_key = api_key_for(spec)
        started = time.monotonic()
        if self._http is not None:
            response = await self._http.chat({"model": spec.model.split("/", 1)[1], **params}, api_key or _NO_KEY)
        else:
            litellm = import_litellm()
            response = await litellm.acompletion(
                model=spec.model, api_key=api_key, api_base=spec.api_base, timeout=spec.timeout_s,
                num_retries=0, max_retries=0, **params)
        return normalise(spec, request, response, time.monotonic() - started)
