"""The pool hands every stage a ready ``ChatModel``: cache → retry → limiter → provider.

One PooledModel per alias; per endpoint (provider id + api_base, shared by aliases that point at
the same server) one limiter, one structured-output negotiation (llm/structured.py) and one
health record (first failure of each kind announced, breaker: llm/health.py); one usage meter per
alias. The limiter sits inside the retry loop so every attempt, retries included, counts against
the endpoint's rate and in-flight caps and a backoff wait holds no slot. A result's ``latency_s``
runs from sending the answered request to its answer; the time spent waiting for a limiter slot
is ``queue_s``. Offline participants skip cache and limiter (instant, deterministic) but are
metered like the rest.

With a call ledger (llm/ledger.py, the run folder's calls.jsonl), every request this pool sends is
written before it leaves and its answer (or error) the moment it arrives — innermost, around the
backend, so each retry and each response_format fallback is its own line — and every response-cache
hit is written as one. Offline participants make no provider call and are not in the ledger.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.llm.base import (
    REQUEST_SENT,
    ChatModel,
    ChatRequest,
    ChatResult,
    ModelCallError,
    ModelSpec,
    UsageMeter,
    api_base_label,
)
from intake_eval.llm.cache import ResponseCache, cache_key
from intake_eval.llm.health import EndpointHealth
from intake_eval.llm.keys import key_to_redact
from intake_eval.llm.ledger import CallLedger
from intake_eval.llm.limiter import EndpointLimiter
from intake_eval.llm.litellm_backend import ProviderBackend
from intake_eval.llm.local_server import SERVERS, LocalBackend, ServerSettings, gguf_path
from intake_eval.llm.registry import resolve_spec
from intake_eval.llm.retry import RetryPolicy, RetryStats, call_with_retry
from intake_eval.llm.structured import (
    LEVEL_NAMES,
    StructuredOutput,
    error_text,
    levels_for,
    names_response_format,
    starting_level,
)

Endpoint = tuple[str, "str | tuple[str, ...] | None"]


def endpoint_label(endpoint: Endpoint) -> str:
    model, base = endpoint
    return f"{model}@{api_base_label(base)}" if base else model


class PooledModel:
    """A provider endpoint with the cross-cutting concerns applied, behind ChatModel."""

    def __init__(self, spec: ModelSpec, backend: Any, *, limiter: EndpointLimiter | None,
                 policy: RetryPolicy, stats: RetryStats, meter: UsageMeter,
                 cache: ResponseCache | None, use_cache: bool,
                 structured: StructuredOutput | None = None, health: EndpointHealth | None = None,
                 ledger: CallLedger | None = None):
        self.spec = spec
        self.backend = backend
        self.limiter = limiter
        self.policy = policy
        self.stats = stats
        self.meter = meter
        self.cache = cache
        self.use_cache = use_cache
        self.structured = structured or StructuredOutput(endpoint_label((spec.model, spec.api_base)), levels_for(spec))
        self.health = health
        self.ledger = ledger
        self.start_level = starting_level(spec)

    async def _send(self, request: ChatRequest, level: str | None, timing: dict[str, Any]) -> ChatResult:
        if self.limiter is None:
            return await self._post(request, level, timing)
        asked = time.monotonic()
        async with self.limiter.slot():
            timing["queue_s"] += time.monotonic() - asked
            return await self._post(request, level, timing)

    async def _post(self, request: ChatRequest, level: str | None, timing: dict[str, Any]) -> ChatResult:
        if self.health is not None:
            self.health.check()  # the breaker may have opened while this request waited its turn
        if self.ledger is None:
            return await self.backend.complete(request, level=level)
        timing["sent"] += 1
        attempt, request_hash = timing["sent"], timing["request_hash"]
        ledger, spec = self.ledger, self.spec
        call: list[str] = []

        def left() -> None:  # the ``sent`` line, once: when the body is on the wire, or before sending
            if not call:
                call.append(ledger.sent(spec, request, request_hash, attempt))

        if not getattr(self.backend, "reports_sending", False):
            left()  # a client that cannot say when the request left: written before it goes
        told = REQUEST_SENT.set(left)
        started = time.monotonic()
        try:
            result = await self.backend.complete(request, level=level)
        except asyncio.CancelledError:
            raise  # no answer arrived: a ``sent`` line stays unanswered and is counted at its estimate
        except Exception as error:
            left()
            ledger.answered(call[0], spec, request, request_hash, attempt, error=error,
                            latency_s=time.monotonic() - started)
            raise
        finally:
            REQUEST_SENT.reset(told)
        left()
        ledger.answered(call[0], spec, request, request_hash, attempt, result=result, latency_s=time.monotonic() - started)
        return result

    async def _attempt(self, request: ChatRequest, timing: dict[str, Any]) -> ChatResult:
        """One attempt; for a schema request, as many requests as the negotiation needs (a refused
        response_format is not a failed attempt: the next level goes out at once)."""
        if request.response_schema is None:
            return await self._send(request, None, timing)
        structured = self.structured
        async with structured.probing():
            while True:
                level = structured.level_for(self.start_level)
                try:
                    result = await self._send(request, level, timing)
                except ModelCallError:
                    raise
                except Exception as error:
                    if level == "prompt" or not names_response_format(error):
                        raise
                    self._refused(level, error)
                    continue
                structured.confirm(level)
                return result.model_copy(update={"structured_output": level})

    def _refused(self, level: str, error: Exception) -> None:
        words = " ".join(error_text(error).split())
        secret = key_to_redact(self.spec) or ""
        if len(secret) >= 6:
            words = words.replace(secret, "***")  # some servers echo the request's key
        words = words[:300] + ("…" if len(words) > 300 else "")
        following = self.structured.reject(level, words)
        if self.health is not None and following is not None:
            self.health.announce(
                f"response_format:{level}",
                f"{self.structured.endpoint} refused response_format {LEVEL_NAMES[level]} ({words}); "
                f"sending {LEVEL_NAMES[following]} from now on")

    async def complete(self, request: ChatRequest) -> ChatResult:
        key = cache_key(self.spec, request) if self.cache is not None or self.ledger is not None else None
        if self.cache is not None and key is not None and self.use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                # The call keeps its price (the record it lands in cost that much to make);
                # ``cached`` says this process did not pay for it again.
                result = hit.model_copy(update={"cached": True, "attempts": 0, "latency_s": 0.0, "queue_s": 0.0})
                if self.ledger is not None:
                    self.ledger.cache_hit(self.spec, request, key, result)
                self.meter.add(result)
                return result
        pause = self.limiter.pause_for if self.limiter is not None else None
        timing: dict[str, Any] = {"queue_s": 0.0, "sent": 0, "request_hash": key or ""}
        result, attempts = await call_with_retry(
            lambda: self._attempt(request, timing), spec=self.spec, policy=self.policy, stats=self.stats,
            on_retry_after=pause, health=self.health)
        result = result.model_copy(update={"attempts": attempts, "queue_s": round(timing["queue_s"], 6)})
        if self.cache is not None and key is not None:
            self.cache.put(key, self.spec.model, result)
        self.meter.add(result)
        return result


class MeteredModel:
    """An offline participant, counted in usage like any other model."""

    def __init__(self, inner: ChatModel, meter: UsageMeter):
        self.inner = inner
        self.spec = inner.spec
        self.meter = meter

    async def complete(self, request: ChatRequest) -> ChatResult:
        result = await self.inner.complete(request)
        self.meter.add(result)
        return result


class ModelPool:
    """``pool.get(name)`` → a ChatModel for an alias, raw provider id or offline/<name>."""

    def __init__(self, specs: Mapping[str, ModelSpec], cache_path: Path | None = None, use_cache: bool = True,
                 offline: "Callable[[ModelSpec], ChatModel] | None" = None, *, retry_policy: RetryPolicy | None = None,
                 max_concurrency: int | None = None, rpm: float | None = None, client: str = "auto",
                 on_notice: Callable[[str], None] | None = None, ledger_path: Path | None = None):
        self.specs = dict(specs)
        self.use_cache = use_cache
        self.offline = offline  # builds offline/… participants (they live above this layer)
        self.retry_policy = retry_policy or RetryPolicy()
        self.max_concurrency = max_concurrency  # flag override for every endpoint
        self.rpm = rpm
        self.client = client
        self._cache_path = cache_path
        self._cache: ResponseCache | None = None
        self._models: dict[str, ChatModel] = {}
        self._limiters: dict[Endpoint, EndpointLimiter] = {}
        self._structured: dict[Endpoint, StructuredOutput] = {}
        self._health: dict[Endpoint, EndpointHealth] = {}
        self._stats: dict[str, RetryStats] = {}
        self._meters: dict[str, UsageMeter] = {}
        self.on_notice = on_notice  # a console line for each provider problem worth telling the user
        self.notices: list[str] = []
        self.ledger = CallLedger(ledger_path) if ledger_path is not None else None  # calls.jsonl

    def _notify(self, message: str) -> None:
        self.notices.append(message)
        if self.on_notice is not None:
            self.on_notice(message)

    def _cache_db(self) -> ResponseCache | None:
        if self._cache is None and self._cache_path is not None:
            self._cache = ResponseCache(self._cache_path)
        return self._cache

    def open_cache(self) -> None:
        """Start opening the response cache now rather than at the first call (a new one waits on the disk)."""
        self._cache_db()

    def _limiter(self, spec: ModelSpec, in_flight: int | None = None) -> EndpointLimiter:
        endpoint = (spec.model, spec.api_base)  # local/… ids are canonical: one per weights file
        if endpoint not in self._limiters:
            self._limiters[endpoint] = EndpointLimiter(
                max_in_flight=self.max_concurrency or spec.max_concurrency or in_flight, rpm=self.rpm or spec.rpm)
        return self._limiters[endpoint]

    def _endpoint_state(self, spec: ModelSpec) -> tuple[StructuredOutput, EndpointHealth]:
        endpoint = (spec.model, spec.api_base)
        if endpoint not in self._structured:
            self._structured[endpoint] = StructuredOutput(endpoint_label(endpoint), levels_for(spec))
            self._health[endpoint] = EndpointHealth(endpoint_label(endpoint), notify=self._notify)
        return self._structured[endpoint], self._health[endpoint]
    def _backend(self, spec: ModelSpec) -> tuple[Any, EndpointLimiter]:
        if not spec.is_local:
            return ProviderBackend(spec, client=self.client), self._limiter(spec)
        # One embedded server per weights file, sized for every alias naming it and started on
        # the first call; by default as many requests in flight as it has slots (more would queue
        # inside the server and count as latency).
        settings = ServerSettings.for_path(gguf_path(spec), [spec, *self.specs.values()])
        return LocalBackend(spec, settings, owner=self), self._limiter(spec, in_flight=settings.parallel)

    def spec(self, name: str) -> ModelSpec:
        return resolve_spec(name, self.specs)

    def get(self, name: str) -> ChatModel:
        if name in self._models:
            return self._models[name]
        spec = self.spec(name)
        meter = self._meters.setdefault(name, UsageMeter())
        if spec.is_offline:
            if self.offline is None:
                raise IntakeEvalError(f"{name}: this model pool was given no builder for offline participants")
            model: ChatModel = MeteredModel(self.offline(spec), meter)
        else:
            structured, health = self._endpoint_state(spec)
            backend, limiter = self._backend(spec)
            model = PooledModel(
                spec, backend, limiter=limiter,
                policy=self.retry_policy, stats=self._stats.setdefault(name, RetryStats()), meter=meter,
                cache=self._cache_db(), use_cache=self.use_cache, structured=structured, health=health,
                ledger=self.ledger)
        self._models[name] = model
        return model

    @property
    def usage(self) -> dict[str, UsageMeter]:
        return dict(self._meters)

    def usage_by_model(self) -> dict[str, UsageMeter]:
        return dict(self._meters)

    def retry_stats(self) -> dict[str, dict[str, Any]]:
        """Per alias: calls, attempts, retries, failures, seconds waited, retries by reason."""
        return {name: stats.as_dict() for name, stats in sorted(self._stats.items())}

    def limiter_stats(self) -> dict[str, dict[str, Any]]:
        return {
            endpoint_label((model, base)): {
                "max_in_flight": limiter.max_in_flight, "rpm": limiter.rpm, "peak_in_flight": limiter.peak_in_flight}
            for (model, base), limiter in sorted(self._limiters.items(), key=lambda item: str(item[0]))
        }

    def structured_output(self) -> dict[str, dict[str, Any]]:
        """Per endpoint that was sent a schema: the level that answered and the levels it refused."""
        return {state.endpoint: state.as_dict() for _, state in sorted(self._structured.items(), key=lambda i: str(i[0]))
                if state.used}

    def stopped_endpoints(self) -> dict[str, str]:
        """Endpoints whose breaker opened in this process, with the reason."""
        return {health.label: health.stopped for health in self._health.values() if health.stopped}

    def stopped(self, name: str) -> str | None:
        """Why the endpoint behind an alias takes no more requests, or None."""
        spec = self.spec(name)
        health = self._health.get((spec.model, spec.api_base))
        return health.stopped if health is not None else None

    async def aclose(self) -> None:
        """Close provider connections of the running event loop, then the cache."""
        for model in self._models.values():
            closer = getattr(getattr(model, "backend", None), "aclose", None)
            if closer is not None:
                await closer()
        self.close()

    def close(self) -> None:
        SERVERS.release(self)  # stops the embedded servers no other pool uses
        if self.ledger is not None:
            self.ledger.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def __enter__(self) -> "ModelPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
