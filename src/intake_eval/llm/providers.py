"""Which providers are called over plain OpenAI-compatible HTTP, and how.

Every provider that serves an OpenAI-compatible ``/chat/completions`` goes through the direct
aiohttp client (openai_http.py) instead of litellm: same wire format, a fraction of the CPU per
call. Configs keep litellm's spelling of model ids (``together_ai/meta-llama/…``): the prefix
picks the route and is stripped for the wire. Providers without such an endpoint (Anthropic's
native API, Bedrock, Vertex, …) stay on litellm.

``INTAKE_EVAL_BASE_URL_<PROVIDER>`` (e.g. ``INTAKE_EVAL_BASE_URL_TOGETHER_AI``) replaces a
provider's base URL while keeping everything else about it (key variable, price table, wire
model id): tests and benchmarks point a provider at a loopback server with it, and it serves a
proxy in front of a provider too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from intake_eval.llm.base import ModelCallError, ModelSpec

BASE_URL_OVERRIDE = "INTAKE_EVAL_BASE_URL_{}"
NO_KEY = "not-needed"  # OpenAI-compatible servers expect some Bearer value; local ones ignore it


def read_api_key(spec: ModelSpec, key_env: str | None) -> str:
    """Read at call time, never stored: the key is not in any object that is logged or cached."""
    if key_env is None:
        return NO_KEY
    value = os.environ.get(key_env, "").strip()
    if not value:
        raise ModelCallError(
            f"model '{spec.alias or spec.model}' needs the environment variable {key_env}, which is not set",
            kind="fatal")
    return value


@dataclass(frozen=True)
class Provider:
    name: str  # litellm's prefix
    base_url: str | None  # None: only reachable with an api_base (a server you run)
    key_env: str | None  # the variable holding the key (the same one litellm reads)
    max_tokens_field: str = "max_tokens"
    # Gemini's OpenAI-compatible usage may leave the thinking tokens out of completion_tokens.
    completion_from_total: bool = False
    base_url_env: tuple[str, ...] = ()  # variables litellm honours for this provider's URL, kept honoured


PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    # OpenAI's reasoning models refuse max_tokens; max_completion_tokens is accepted by every model.
    Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", max_tokens_field="max_completion_tokens",
             base_url_env=("OPENAI_BASE_URL", "OPENAI_API_BASE")),
    Provider("together_ai", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    Provider("fireworks_ai", "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    Provider("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    Provider("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    Provider("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    Provider("gemini", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY",
             completion_from_total=True),
    Provider("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    Provider("xai", "https://api.x.ai/v1", "XAI_API_KEY"),
    Provider("cerebras", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
    Provider("deepinfra", "https://api.deepinfra.com/v1/openai", "DEEPINFRA_API_KEY"),
    Provider("hosted_vllm", None, None),
    Provider("lm_studio", None, None),
    Provider("local", None, None),  # an embedded llama.cpp server; its api_base is set when it starts
)}


@dataclass(frozen=True)
class DirectRoute:
    """How one alias is called over plain HTTP: where, with which key, under which wire name."""

    provider: Provider
    base_url: str
    wire_model: str
    key_env: str | None  # None → no key (a server you run)
    max_tokens_field: str = "max_tokens"

    def api_key(self, spec: ModelSpec) -> str:
        return read_api_key(spec, self.key_env)

    def body(self, params: dict[str, Any]) -> dict[str, Any]:
        body = {"model": self.wire_model, **params}
        field = self.max_tokens_field
        if field != "max_tokens" and "max_tokens" in body and field not in body:
            body[field] = body.pop("max_tokens")
        return body

    def fix_usage(self, response: dict[str, Any]) -> dict[str, Any]:
        """Usage in OpenAI's shape, as litellm reports it: completion tokens include reasoning tokens,
        and DeepSeek's prompt-cache hits are ``prompt_tokens_details.cached_tokens``."""
        usage = response.get("usage") if isinstance(response, dict) else None
        if not isinstance(usage, dict):
            return response
        fixed = dict(usage)
        given = fixed.get("prompt_tokens_details")
        details: dict[str, Any] = given if isinstance(given, dict) else {}
        if fixed.get("prompt_cache_hit_tokens") and not details.get("cached_tokens"):
            fixed["prompt_tokens_details"] = {**details, "cached_tokens": int(fixed["prompt_cache_hit_tokens"])}
        if self.provider.completion_from_total:
            prompt, completion, total = (int(fixed.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
            if total > prompt + completion:
                fixed["completion_tokens"] = total - prompt
        return response if fixed == usage else {**response, "usage": fixed}


def base_url_override(provider: Provider) -> str | None:
    for name in (BASE_URL_OVERRIDE.format(provider.name.upper()), *provider.base_url_env):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def direct_route(spec: ModelSpec) -> DirectRoute | None:
    """The plain-HTTP route for this alias, or None when it needs litellm.

    An ``api_base`` replaces the provider's URL and, unless the alias names ``api_key_env``, sends no
    key: a custom server never receives the provider's key by default.
    """
    if spec.is_offline or "/" not in spec.model:
        return None
    provider = PROVIDERS.get(spec.provider)
    if provider is None:
        return None
    wire_model = spec.model.split("/", 1)[1]
    if spec.api_base:
        # any server that speaks the protocol: older ones know only max_tokens
        return DirectRoute(provider, spec.api_base.rstrip("/"), wire_model, spec.api_key_env)
    base_url = base_url_override(provider) or provider.base_url
    if base_url is None:
        return None
    return DirectRoute(provider, base_url.rstrip("/"), wire_model, spec.api_key_env or provider.key_env,
                       provider.max_tokens_field)
