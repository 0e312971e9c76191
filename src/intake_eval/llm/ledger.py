"""The call ledger: every provider request and every answer, appended to ``<run>/calls.jsonl`` as it happens.

Two kinds of line, joined by ``call`` (an id unique to one HTTP request):
- ``sent``, written once the request's body is on the wire (``REQUEST_SENT``, told by the direct HTTP
  client; before the request goes for a client that cannot tell): alias, role, request hash, attempt,
  the request's size in characters and a priced estimate. A ``sent`` without its ``answer`` is a
  request whose answer never arrived (the process was killed with it in flight): the provider may
  have billed it, so readers count it at an estimate (core/calls.py).
- ``answer``, written the moment the answer (or the error) arrives, before any record uses it:
  HTTP status, error reason, finish_reason, usage, dollars, whether the price is known, whether
  it was billed, latency. A response-cache hit is an ``answer`` with ``cache_hit: true`` and no
  ``sent``: its dollars are what the cache saved, never spend.

Billed attempts are those the provider answered with a body (200s, a truncated 200 body, an answer
later retried or rejected as unusable) and timeouts (the provider may have finished the work);
4xx/5xx/429 answers and refused connections are not billed. An attempt whose usage cannot be read
is billed at an estimate (``cost_known: false``). Offline participants make no provider call and
are not in the ledger.

Each line is one ``os.write`` of a whole line (core.store.JsonlWriter), so a SIGKILL leaves at
most a torn last line, which readers skip. While a call is made, ``CHARGE`` (a context variable a
budget sets around a conversation or a judgment) is told the dollars each billed attempt cost.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from intake_eval.core.manifest import now_iso
from intake_eval.core.store import JsonlWriter
from intake_eval.llm.base import CallUsage, ChatRequest, ChatResult, ModelCallError, ModelSpec
from intake_eval.llm.litellm_backend import estimated_usage
from intake_eval.llm.request_kind import RequestKind
from intake_eval.llm.retry import classify_failure
from intake_eval.llm.usage_check import text_chars

# Told the dollars of every billed attempt made in this context (a budget's hold on one conversation).
CHARGE: ContextVar[Callable[[float], None] | None] = ContextVar("intake_eval_charge", default=None)


class CallLedger:
    """Appends the ledger lines of one process; ``billed_usd`` is what its billed attempts cost so far, and
    ``unusable_usd`` the part of it billed for attempts whose answer was not used (garbled, cut short, rejected)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.stage = ""  # the stage the invocation began last (set by the stage runner)
        self._stage_of: dict[tuple[str, str], str] = {}  # (role, alias) → the stage that registered it
        self.billed_usd = 0.0
        self.unusable_usd = 0.0
        self._writer: JsonlWriter | None = None
        self.prefix = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # every call id of this process starts with it
        self._ids = itertools.count(1)
        self._rates: dict[str, list[float]] = {}  # alias → [dollars, request characters] of priced answers

    def begun(self, stage: str, roles: Mapping[str, Iterable[str]]) -> None:
        """A stage began with these aliases per role: their calls are its calls from now on."""
        self.stage = stage
        for role, aliases in roles.items():
            for alias in aliases:
                self._stage_of[(role, alias)] = stage

    def _stage(self, role: str, alias: str) -> str:
        # a formulation is the clinician's call; a call of an unregistered role is the stage begun last
        owner = RequestKind.CLINICIAN if role == RequestKind.FORMULATION else role
        return self._stage_of.get((role, alias)) or self._stage_of.get((owner, alias)) or self.stage

    def _write(self, line: dict[str, Any]) -> None:
        if self._writer is None:
            self._writer = JsonlWriter(self.path)
        self._writer.write(line)

    def _common(self, spec: ModelSpec, request: ChatRequest, request_hash: str) -> dict[str, Any]:
        alias = spec.alias or spec.model
        role = str(request.purpose or "")  # calls.jsonl keeps "" for an ad-hoc call (a bench script)
        return {"time": now_iso(), "stage": self._stage(role, alias), "role": role, "alias": alias,
                "provider_model": spec.model, "request": request_hash[:16]}

    def sent(self, spec: ModelSpec, request: ChatRequest, request_hash: str, attempt: int) -> str:
        """Write the ``sent`` line of one request; returns its call id."""
        call = f"{self.prefix}-{next(self._ids)}"
        estimate = estimated_usage(spec, request)
        self._write({"event": "sent", "call": call, **self._common(spec, request, request_hash), "attempt": attempt,
                     "prompt_chars": text_chars(request), "estimate_usd": round(estimate.cost_usd, 10)})
        return call

    def answered(self, call: str, spec: ModelSpec, request: ChatRequest, request_hash: str, attempt: int, *,
                 result: ChatResult | None = None, error: BaseException | None = None, latency_s: float) -> None:
        """Write the ``answer`` line of one request (a result, or the error it raised) and charge its dollars."""
        line = {"event": "answer", "call": call, **self._common(spec, request, request_hash), "attempt": attempt}
        if result is not None:
            line.update(self._result_fields(result, billed=True))
        else:
            line.update(self._error_fields(spec, request, error))
        line["latency_s"] = round(latency_s, 6)
        line["cache_hit"] = False
        self._calibrate(line, request)
        self._write(line)
        if line["billed"]:
            self.billed_usd += line["dollars"]
            if line.get("error") is not None:
                self.unusable_usd += line["dollars"]
            charge = CHARGE.get()
            if charge is not None:
                charge(line["dollars"])

    def _calibrate(self, line: dict[str, Any], request: ChatRequest) -> None:
        """An attempt billed at an estimate is priced like this alias's answered calls (dollars per request
        character) once there are some; each priced answer refines that rate."""
        rate = self._rates.setdefault(line["alias"], [0.0, 0])
        chars = text_chars(request)
        if line["billed"] and line["cost_known"]:
            rate[0] += line["dollars"]
            rate[1] += chars
        elif line["billed"] and rate[1] and line.get("error") is not None:
            line["dollars"] = round(rate[0] / rate[1] * chars, 10)

    def cache_hit(self, spec: ModelSpec, request: ChatRequest, request_hash: str, result: ChatResult) -> None:
        """A response-cache hit: its dollars are saved by the cache, never billed."""
        self._write({"event": "answer", "call": f"{self.prefix}-{next(self._ids)}",
                     **self._common(spec, request, request_hash), "attempt": 0,
                     **self._result_fields(result, billed=False), "latency_s": 0.0, "cache_hit": True})

    def batch_answer(self, spec: ModelSpec, request: ChatRequest, request_hash: str, result: ChatResult,
                     answer_id: str | None) -> None:
        """An answer taken from a provider batch (priced at the batch rate). Its call id is the provider's id of
        the answer, so the same answer used again by a rerun is one billed call (readers keep a call's first line)."""
        line = {"event": "answer", "call": f"batch-{answer_id or request_hash}", **self._common(spec, request, request_hash),
                "attempt": 0, **self._result_fields(result, billed=True), "latency_s": 0.0, "cache_hit": False,
                "batch": True}
        self._write(line)
        self.billed_usd += line["dollars"]

    @staticmethod
    def _result_fields(result: ChatResult, *, billed: bool) -> dict[str, Any]:
        return {"status": 200, "error": None, "retryable": False, "model": result.provider_model or result.model,
                "finish_reason": result.finish_reason, "usage": _usage_dict(result.usage),
                "dollars": round(result.usage.cost_usd, 10), "cost_known": result.usage.cost_known, "billed": billed}

    @staticmethod
    def _error_fields(spec: ModelSpec, request: ChatRequest, error: BaseException | None) -> dict[str, Any]:
        usage = getattr(error, "usage", None)
        if isinstance(error, ModelCallError):  # an answer we cannot use: the provider answered and billed it
            answered = usage if isinstance(usage, CallUsage) else estimated_usage(spec, request)
            return {"status": 200, "error": error.kind, "retryable": False, "model": getattr(error, "provider_model", None),
                    "finish_reason": getattr(error, "finish_reason", None), "usage": _usage_dict(answered),
                    "dollars": round(answered.cost_usd, 10), "cost_known": answered.cost_known, "billed": True,
                    "detail": str(error)[:300]}
        failure = classify_failure(error) if error is not None else None
        reason = failure.reason if failure is not None else "unknown"
        # A garbled 200 body was answered (and billed); a timeout may have been finished and billed.
        billed = reason in ("bad_body", "timeout")
        status = failure.status if failure is not None and failure.status else (200 if reason == "bad_body" else None)
        estimate = estimated_usage(spec, request) if billed else CallUsage()
        return {"status": status, "error": reason, "retryable": bool(failure and failure.retryable), "model": None,
                "finish_reason": None, "usage": _usage_dict(estimate) if billed else None,
                "dollars": round(estimate.cost_usd, 10), "cost_known": not billed, "billed": billed}

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _usage_dict(usage: CallUsage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "cached_prompt_tokens": usage.cached_prompt_tokens,
            "cache_write_tokens": usage.cache_write_tokens}
