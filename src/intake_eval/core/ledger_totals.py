"""The call ledger's figures per alias, per stage and per (stage, alias), as core/calls reads them, and their
JSON form: a read of the ledger can be kept beside it (core/ledger_read) and resumed where it stopped, so
every table keeps its order (the order its dollars are summed in) through the JSON form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class AliasCalls:
    requests: int = 0  # sent lines
    answers: int = 0  # answer lines from the provider (errors included)
    cache_hits: int = 0
    unanswered: int = 0  # sent, no answer (in flight at a kill, or in flight now)
    retries: int = 0
    failed_attempts: int = 0
    billed_usd: float = 0.0
    estimated_usd: float = 0.0  # the part of billed_usd that is an estimate
    unusable_usd: float = 0.0  # the part of billed_usd paid for answers that were not used (an error line)
    usable_usd: float = 0.0  # the part of billed_usd paid for answers that were used
    saved_by_cache_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_known: bool = True
    by_reason: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "answers": self.answers, "cache_hits": self.cache_hits,
                "unanswered": self.unanswered, "retries": self.retries, "failed_attempts": self.failed_attempts,
                "billed_usd": round(self.billed_usd, 8), "billed_estimated_usd": round(self.estimated_usd, 8),
                "billed_known": self.cost_known and self.estimated_usd == 0,
                "saved_by_cache_usd": round(self.saved_by_cache_usd, 8), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "failures_by_reason": dict(sorted(self.by_reason.items()))}


@dataclass
class LedgerTotals:
    by_alias: dict[str, AliasCalls] = field(default_factory=dict)
    by_stage: dict[str, AliasCalls] = field(default_factory=dict)
    by_stage_alias: dict[tuple[str, str], AliasCalls] = field(default_factory=dict)

    def _sum(self, name: str) -> Any:
        return sum(getattr(calls, name) for calls in self.by_alias.values())

    @property
    def billed_usd(self) -> float:
        return round(self._sum("billed_usd"), 8)

    @property
    def billed_known(self) -> bool:
        return all(calls.cost_known and calls.estimated_usd == 0 for calls in self.by_alias.values())

    @property
    def saved_by_cache_usd(self) -> float:
        return round(self._sum("saved_by_cache_usd"), 8)

    @property
    def usable_usd(self) -> float:
        """Billed dollars of answers that were used."""
        return round(self._sum("usable_usd"), 8)

    @property
    def unusable_usd(self) -> float:
        """Billed dollars of attempts whose answer was not used (garbled, cut short, rejected)."""
        return round(self._sum("unusable_usd"), 8)

    @property
    def retries(self) -> int:
        return int(self._sum("retries"))

    def as_dict(self) -> dict[str, Any]:
        return {"billed_usd": self.billed_usd, "billed_known": self.billed_known,
                "billed_estimated_usd": round(self._sum("estimated_usd"), 8),
                "saved_by_cache_usd": self.saved_by_cache_usd, "requests": int(self._sum("requests")),
                "cache_hits": int(self._sum("cache_hits")), "retries": self.retries,
                "failed_attempts": int(self._sum("failed_attempts")), "unanswered": int(self._sum("unanswered")),
                "by_alias": {alias: calls.as_dict() for alias, calls in sorted(self.by_alias.items())},
                "by_stage": {stage: calls.as_dict() for stage, calls in sorted(self.by_stage.items())},
                "retries_by_stage_alias": {stage: {alias: calls.retries for (where, alias), calls in
                                                   sorted(self.by_stage_alias.items()) if where == stage}
                                           for stage in sorted(self.by_stage)}}


@dataclass
class InFlightOdds:
    """One alias's answers from the provider, to weigh a request a kill caught in flight: the chance it
    would have been billed is the billed answers' share of the answer time (a request is caught in
    flight in proportion to its latency), or of the answers when no latency was recorded."""

    billed: int = 0
    answers: int = 0
    billed_seconds: float = 0.0
    seconds: float = 0.0

    def add(self, billed: bool, latency_s: float) -> None:
        self.answers += 1
        self.billed += billed
        self.seconds += latency_s
        self.billed_seconds += latency_s if billed else 0.0

    def billed_share(self) -> float:
        if self.seconds > 0:
            return self.billed_seconds / self.seconds
        return self.billed / self.answers if self.answers else 1.0


def calls_from_json(value: Any) -> AliasCalls:
    return AliasCalls(**{**value, "by_reason": dict(value.get("by_reason") or {})})


def totals_json(totals: LedgerTotals) -> dict[str, Any]:
    """The totals as JSON-shaped lists (a store may sort object keys: the tables' order is kept in lists)."""
    return {"by_alias": [[alias, dataclasses.asdict(calls)] for alias, calls in totals.by_alias.items()],
            "by_stage": [[stage, dataclasses.asdict(calls)] for stage, calls in totals.by_stage.items()],
            "by_stage_alias": [[stage, alias, dataclasses.asdict(calls)]
                               for (stage, alias), calls in totals.by_stage_alias.items()]}


def totals_from_json(value: Any) -> LedgerTotals:
    return LedgerTotals(by_alias={alias: calls_from_json(calls) for alias, calls in value["by_alias"]},
                        by_stage={stage: calls_from_json(calls) for stage, calls in value["by_stage"]},
                        by_stage_alias={(stage, alias): calls_from_json(calls)
                                        for stage, alias, calls in value["by_stage_alias"]})
