"""The one async call shape every role uses: messages in → text, reasoning, usage, cost, latency out.

A provider, an offline participant or a test double implements ``ChatModel.complete``.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Protocol, runtime_checkable
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Usage
from intake_eval.llm.request_kind import RequestKind

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}

# Told when a provider request has left (its body is on the wire), by HTTP clients that can tell
# (openai_http.py): the call ledger writes a request as sent then, so a kill before it left is no bill.
REQUEST_SENT: ContextVar[Callable[[], None] | None] = ContextVar("intake_eval_request_sent", default=None)


class ModelSpec(BaseModel):
    """A resolved model alias (configs/models.yaml or --models FILE), or a raw provider id."""

    model_config = ConfigDict(extra="forbid")
    alias: str = ""  # filled in by the registry
    model: str  # provider id as litellm spells it, or offline/<name>
    temperature: float | None = 0.7
    max_tokens: int | None = 350
    reasoning: bool = False
    api_key_env: str | None = None
    # One server, or several replicas of the same model (a conversation sticks to one: llm/affinity.py)
    api_base: str | tuple[str, ...] | None = None
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    timeout_s: float = 120.0
    input_cost_per_token: float | None = None  # override litellm's price table
    output_cost_per_token: float | None = None
    cache_read_cost_per_token: float | None = None  # input read from the provider's prompt cache
    cache_write_cost_per_token: float | None = None  # input written to it (Anthropic)
    batch_cost_factor: float | None = None  # batch price ÷ online price (judge --batch); None → one half
    # Where structured-output negotiation starts: true → json_schema, false → no response_format
    # at all (prompt + validation); None → by provider. See llm/structured.py.
    supports_json_schema: bool | None = None
    extra_params: dict[str, Any] = Field(default_factory=dict)  # passed through to the provider
    description: str = ""
    # local/… models only (an embedded llama.cpp server): tokens per request (prompt + answer),
    # requests decoded together (one slot and prompt cache each), CPU threads.
    n_ctx: int | None = None
    parallel: int | None = None
    threads: int | None = None

    @property
    def is_offline(self) -> bool:
        return self.model.startswith("offline/")

    @property
    def is_local(self) -> bool:
        return self.model.startswith("local/")

    @field_validator("api_base")
    @classmethod
    def _replicas(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        """A list of one is the single-string form (same cache key, same manifest); an empty list is no server."""
        if isinstance(value, tuple):
            if not value:
                raise ValueError("lists no server; give one URL or a list of replica URLs")
            if len(set(value)) != len(value):
                raise ValueError("lists the same replica twice")
            return value[0] if len(value) == 1 else value
        return value

    @property
    def api_bases(self) -> tuple[str, ...]:
        """Every replica's URL, in the order written (one for the single-string form; none without api_base)."""
        if self.api_base is None:
            return ()
        return (self.api_base,) if isinstance(self.api_base, str) else self.api_base

    @field_validator("input_cost_per_token", "output_cost_per_token", "cache_read_cost_per_token",
                     "cache_write_cost_per_token", "batch_cost_factor")
    @classmethod
    def _a_price(cls, value: float | None) -> float | None:
        """A price is a finite number of dollars ≥ 0 (a negative or NaN one would turn every figure into nonsense)."""
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"must be a finite number ≥ 0 (got {value})")
        return value

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    def public_dict(self) -> dict[str, Any]:
        """For manifests and logs: everything but secrets (a key's variable name is not secret; a
        password in the api_base is)."""
        public = self.model_dump(exclude_none=True)
        if self.api_base:
            public["api_base"] = public_api_base(self.api_base)
        return public


@dataclass(frozen=True)
class ChatRequest:
    messages: list[Message]
    sample_index: int = 0  # distinct trials/samples get distinct cache keys
    max_tokens: int | None = None  # overrides the spec
    temperature: float | None = None  # overrides the spec
    response_schema: dict[str, Any] | None = None  # JSON schema for structured output, when supported
    purpose: RequestKind | None = None  # the role it is made for (stats, logs, stage); None: an ad-hoc call
    # Structured facts for offline participants (profile, turn, …). Never sent to a provider,
    # not part of the cache key.
    context: Mapping[str, Any] | None = None
    # Where a prefix this request shares with other calls ends: (message index, character offset in
    # its content). Providers that cache only at explicit breakpoints get them here (prompt_cache.py);
    # the text sent is the same either way, so this is not part of the cache key either.
    cache_points: tuple[tuple[int, int], ...] = ()
    # A fresh sample of the same request after an answer without visible text (llm/answer.py):
    # part of the cache key when not 0, so the unusable answer is not served again.
    answer_retry: int = 0


class CallUsage(BaseModel):
    # defer_build (here and in ChatResult): the validator is built with the first answer, after the first
    # request has left, not at import
    model_config = ConfigDict(extra="ignore", defer_build=True)
    prompt_tokens: int = 0  # every input token, cached ones included
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_prompt_tokens: int = 0  # read from the provider's prompt cache (part of prompt_tokens)
    cache_write_tokens: int = 0  # written to the provider's prompt cache (part of prompt_tokens)
    cost_usd: float = 0.0
    cost_known: bool = True


class ChatResult(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    text: str  # visible answer, reasoning removed
    reasoning: str | None = None
    usage: CallUsage = Field(default_factory=CallUsage)
    latency_s: float = 0.0  # from sending the answered request to its answer
    queue_s: float = 0.0  # time spent waiting for our own endpoint limiter, every attempt included
    cached: bool = False
    attempts: int = 1
    # Why the provider stopped, in OpenAI's words (stop | length | content_filter | tool_calls …) from
    # every route; "length" means the answer was cut at the token cap (llm/answer.py reads these).
    finish_reason: str | None = None
    refusal: str | None = None  # the provider's own refusal (OpenAI message.refusal, Claude stop_reason refusal)
    tool_calls: int = 0  # tool calls the answer made instead of (or beside) text
    model: str = ""  # provider id that answered
    provider_model: str | None = None  # the model id the provider's answer named, when it names one
    structured_output: str | None = None  # the negotiation level that answered a schema request
    # The server's own account of the call when it gives one (llama.cpp: prompt_n, cache_n,
    # prompt_ms, predicted_n, predicted_ms): compute time beside latency, prompt-cache reuse.
    server_timings: dict[str, float] | None = None


@runtime_checkable
class ChatModel(Protocol):
    spec: ModelSpec

    async def complete(self, request: ChatRequest) -> ChatResult: ...


FailureKind = Literal["fatal", "exhausted", "empty_after_length", "invalid_output", "content_policy", "refused",
                      "empty_answer", "truncated"]


class ModelCallError(IntakeEvalError):
    """A model call that did not produce a usable answer.

    kind: fatal (400/401/404, a refused connection, an endpoint stopped after repeated identical
    failures: retrying cannot help), exhausted (retries/deadline used up),
    empty_after_length (length stop with no visible text), invalid_output, content_policy (the
    provider's safety system refused this request: the call fails, other requests go on), refused
    (the answer declined: a refusal or a content filter; ``refusal`` keeps its words), empty_answer
    (no visible text and no refusal, after a retry), truncated (an answer cut at the cap under
    ``--on-truncation fail``). ``finish_reason`` is the provider's, when an answer came back.
    """

    def __init__(self, message: str, *, kind: FailureKind, attempts: int = 1, status_code: int | None = None,
                 finish_reason: str | None = None, refusal: str | None = None,
                 usage: "CallUsage | None" = None):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.status_code = status_code
        self.finish_reason = finish_reason
        self.refusal = refusal
        self.role: str | None = None  # set where one step runs several roles (the tracker inside a patient reply)
        self.usage = usage  # what the unusable answer cost, when the provider answered (the call ledger bills it)


@dataclass
class UsageMeter:
    """Accumulates per-call usage for a record or a stage (thread-unsafe; asyncio only).

    ``cost_usd`` is what the calls cost, cache hits included (a record's usage describes the calls
    that made it, whoever paid); ``paid_usd`` is what this process paid (cache hits excluded)."""

    calls: int = 0
    cache_hits: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    paid_usd: float = 0.0
    cost_known: bool = True
    latency_s: float = 0.0
    queue_s: float = 0.0
    by_purpose: dict[str, "UsageMeter"] = field(default_factory=dict)

    def add(self, result: ChatResult) -> None:
        self.calls += 1
        self.cache_hits += int(result.cached)
        self.attempts += 0 if result.cached else result.attempts
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens
        self.reasoning_tokens += result.usage.reasoning_tokens
        self.cached_prompt_tokens += result.usage.cached_prompt_tokens
        self.cache_write_tokens += result.usage.cache_write_tokens
        self.cost_usd += result.usage.cost_usd
        self.paid_usd += 0.0 if result.cached else result.usage.cost_usd
        self.cost_known = self.cost_known and result.usage.cost_known
        self.latency_s += result.latency_s
        self.queue_s += result.queue_s

    def merge(self, other: "UsageMeter") -> None:
        for name in ("calls", "cache_hits", "attempts", "prompt_tokens", "completion_tokens", "reasoning_tokens",
                     "cached_prompt_tokens", "cache_write_tokens", "cost_usd", "paid_usd", "latency_s", "queue_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost_known = self.cost_known and other.cost_known

    def to_usage(self):  # -> records.Usage
        return Usage(
            calls=self.calls,
            cache_hits=self.cache_hits,
            attempts=self.attempts,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cost_usd=round(self.cost_usd, 8),
            cost_known=self.cost_known,
        )


def public_url(url: str) -> str:
    """The URL whole (scheme, host, port, path, query) with any user name and password replaced by ***."""
    parts = urlparse(url)
    if not (parts.username or parts.password):
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return parts._replace(netloc=netloc).geturl()


def public_api_base(api_base: str | tuple[str, ...]) -> str | list[str]:
    """An alias's api_base as it may be written down: each replica's URL without its credentials."""
    if isinstance(api_base, str):
        return public_url(api_base)
    return [public_url(url) for url in api_base]


def api_base_label(api_base: str | tuple[str, ...]) -> str:
    """One line for messages and tables: the credential-free URL, or the replicas' URLs joined."""
    shown = public_api_base(api_base)
    return shown if isinstance(shown, str) else ", ".join(shown)


def is_local_base(api_base: str | tuple[str, ...] | None) -> bool:
    """Servers on this machine or a private network (every replica): no key needed by default, no cost."""
    if not api_base:
        return False
    if isinstance(api_base, tuple):
        return all(_is_local_url(url) for url in api_base)
    return _is_local_url(api_base)


def _is_local_url(api_base: str) -> bool:
    host = (urlparse(api_base).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified
