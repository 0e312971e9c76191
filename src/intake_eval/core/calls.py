"""The three money figures of a run folder, read from its call ledger (calls.jsonl, see llm/ledger.py).

- **billed**: what providers charged — every billed attempt in the ledger, from every invocation
  and every kill. Attempts whose usage could not be read (a truncated 200 body, a timeout) and
  requests whose answer never arrived (in flight at a kill) are counted at an estimate, best first:
  what an answered request with the same hash cost (a response-cache hit of it included); else the
  request's size × the dollars per character the same alias's answered calls cost; else the
  estimate written when it was sent. A request whose answer never arrived may have been answered
  with an error that is not billed (a 429, a 5xx): its estimate is weighted by the chance that a
  request of the same alias caught in flight was one that would be billed. A kill catches a request
  in proportion to how long it is in flight (length-biased sampling), and unbilled errors come back
  fast, so that chance is the billed answers' share of the alias's answer *time* (their latencies);
  by count when no latency was recorded. ``billed_known`` is false when any estimate or unknown
  price is in the figure.
- **saved by the cache**: what the response-cache hits would have cost; never spend.
- **records' cost** (core/usage.py): what the kept results would cost to reproduce.

A folder made before the ledger existed starts it with an ``opened`` line naming what its records
cost then; billed counts that as an estimate (under the alias ``BEFORE_LEDGER``).

Retries are counted here too: failed attempts the retry policy repeats (429, 5xx, timeouts,
dropped connections, garbled bodies).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.core.call_flags import ANSWERED, SENT, CallFlags
from intake_eval.core.lines import iter_json_lines_at
from intake_eval.core.record_facts import FolderFacts
from intake_eval.core.stage_kinds import StageKinds

# Errors after which the provider may have done (and billed) the work without our reading its usage.
UNREAD_BILLED = ("bad_body", "timeout")
BEFORE_LEDGER = "(before the call ledger)"  # where the records made before the ledger existed are counted
LEDGER_FACTS = "call_ledger"  # the ledger's figures as kept beside it (core/record_facts)


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


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


SENT_KEYS = ("alias", "stage", "request", "prompt_chars", "estimate_usd")  # what a sent line is read again for


def _note_price(line: Mapping[str, Any], prices: dict[str, float], wanted: Container[str]) -> None:
    """What an answer line (the first of its call) says one request costs, for the requests ``wanted``:
    a billed, priced answer's dollars, else the first priced cache hit's."""
    request = str(line.get("request", ""))
    if request not in wanted or not line.get("cost_known", True):
        return
    if line.get("cache_hit"):
        prices.setdefault(request, _number(line.get("dollars")))
    elif line.get("billed") and line.get("error") not in UNREAD_BILLED:
        prices[request] = _number(line.get("dollars"))


def _request_prices(path: Path, wanted: Collection[str], end: int) -> dict[str, float]:
    """request hash → its price (``_note_price``) for the requests ``wanted``: a second read of the ledger up
    to byte ``end`` (where the first read stopped: a live stage may be appending), made only when some request
    was billed unread, so that no price is held per request while reading."""
    prices: dict[str, float] = {}
    flags = CallFlags()
    wanted_bytes = {request.encode() for request in wanted}
    offset = 0
    with path.open("rb") as ledger:
        for raw in ledger:
            offset += len(raw)
            if offset > end:
                break
            if not _may_name(raw, wanted_bytes):
                continue  # (most lines: not parsed again)
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # the first read warned of it
            if isinstance(line, dict) and line.get("event") == "answer" \
                    and not flags.mark(line.get("call"), ANSWERED) & ANSWERED:
                _note_price(line, prices, wanted)
    return prices


_REQUEST_FIELD = re.compile(rb'"request"\s*:\s*"([^"\\]*)"')


def _may_name(raw: bytes, wanted: Container[bytes]) -> bool:
    """Whether a raw ledger line may be an answer to a ``wanted`` request: some "request" field of it holds a
    wanted hash, or one it holds cannot be read without parsing the line (an escaped text)."""
    matches = _REQUEST_FIELD.findall(raw)
    return any(value in wanted for value in matches) or raw.count(b'"request"') != len(matches)


def _count_answer(line: Mapping[str, Any], request: Mapping[str, Any] | None,
                  counted: Callable[[Mapping[str, Any]], list[AliasCalls]],
                  rate: dict[str, list[float]], answered_by: dict[str, InFlightOdds],
                  unread: list[tuple[Any, Any, bool]]) -> None:
    """One answer line (the first of its call) into the totals; ``request``: its sent line, if read."""
    raw_usage = line.get("usage")
    dollars, usage = _number(line.get("dollars")), raw_usage if isinstance(raw_usage, dict) else {}
    if not line.get("cache_hit"):
        answered_by.setdefault(str(line.get("alias", "")), InFlightOdds()).add(
            bool(line.get("billed")), _number(line.get("latency_s")))
    for calls in counted(line):
        if line.get("cache_hit"):
            calls.cache_hits += 1
            calls.saved_by_cache_usd += dollars
            continue
        calls.answers += 1
        if line.get("error") is not None:
            calls.failed_attempts += 1
            calls.retries += bool(line.get("retryable"))
            reason = str(line.get("error"))
            calls.by_reason[reason] = calls.by_reason.get(reason, 0) + 1
    if line.get("cache_hit") or not line.get("billed"):
        return
    if line.get("error") in UNREAD_BILLED:
        unread.append((request if request is not None else dict(line), dict(line), False))
        return
    if line.get("error") is not None:
        for calls in counted(line):
            calls.unusable_usd += dollars
    for calls in counted(line):
        calls.billed_usd += dollars
        calls.usable_usd += dollars if line.get("error") is None else 0.0
        calls.cost_known = calls.cost_known and bool(line.get("cost_known", True))
        calls.prompt_tokens += int(_number(usage.get("prompt_tokens")))
        calls.completion_tokens += int(_number(usage.get("completion_tokens")))
    if line.get("cost_known", True):
        if request is not None and _number(request.get("prompt_chars")) > 0:
            pair = rate.setdefault(str(line.get("alias", "")), [0.0, 0.0])
            pair[0] += dollars
            pair[1] += _number(request.get("prompt_chars"))


def _in_sent_order(totals: LedgerTotals, sent_first: Mapping[str, None]) -> None:
    """Order the per-alias, per-stage and per-pair figures as the sent lines first name them, then the rest
    as answers do (the order their dollars are summed in)."""
    rank = {key: index for index, key in enumerate(sent_first)}
    tables: tuple[tuple[dict[Any, AliasCalls], Callable[[Any], str]], ...] = (
        (totals.by_alias, lambda alias: f"a{alias}"), (totals.by_stage, lambda stage: f"s{stage}"),
        (totals.by_stage_alias, lambda pair: f"p{pair[0]}\0{pair[1]}"))
    for table, name in tables:
        # sorted is stable: the keys no sent line named keep the order the answers made them in
        keys = sorted(table, key=lambda key: (0, rank[name(key)]) if name(key) in rank else (1, 0))
        reordered = {key: table[key] for key in keys}
        table.clear()
        table.update(reordered)


def read_ledger(path: Path, in_flight: str | None = None, *, unanswered_billed: bool = False) -> LedgerTotals | None:
    """The ledger's figures, or None when the folder has no ledger (made before it existed). Requests whose
    call id starts with ``in_flight`` (a live process's own) are not counted while unanswered.
    ``unanswered_billed`` counts every request whose answer never arrived as billed in full (no weighting by
    how often the alias's answers were billed): an upper bound rather than the best estimate — a budget's view."""
    if not path.exists():
        return None
    totals = LedgerTotals()
    # Streamed, holding no line once read: a sent line waits in ``pending`` until its answer is read; each
    # call id keeps two flags (sent, answered) so a repeated line counts once.
    flags = CallFlags()
    pending: dict[str, dict[str, Any]] = {}  # call → what its sent line says that is read again (SENT_KEYS)
    unread_answers: list[tuple[dict[str, Any], dict[str, Any], bool]] = []
    sent_first: dict[str, None] = {}  # aliases, stages and (stage, alias) as sent lines first name them
    before = 0.0  # what records made before the ledger existed cost (its "opened" line)
    rate: dict[str, list[float]] = {}  # alias → [dollars, characters] over answered, priced calls
    answered_by: dict[str, InFlightOdds] = {}  # alias → how often, and how long, its answers were billed

    def counted(line: Mapping[str, Any]) -> list[AliasCalls]:
        alias, stage = str(line.get("alias", "")), str(line.get("stage", ""))
        return [totals.by_alias.setdefault(alias, AliasCalls()), totals.by_stage.setdefault(stage, AliasCalls()),
                totals.by_stage_alias.setdefault((stage, alias), AliasCalls())]

    end = 0  # where the last line read ends
    for line, start, length in iter_json_lines_at(path, model=None):
        end = start + length
        event = line.get("event")
        if event == "opened":
            before += _number(line.get("records_cost_usd"))
        elif event == "sent" and isinstance(line.get("call"), str):
            call = line["call"]
            seen = flags.mark(call, SENT)
            if not seen & SENT:
                alias, stage = str(line.get("alias", "")), str(line.get("stage", ""))
                sent_first.update({f"a{alias}": None, f"s{stage}": None, f"p{stage}\0{alias}": None})
                for calls in counted(line):
                    calls.requests += 1
            if not seen & ANSWERED:
                pending[call] = {key: line[key] for key in SENT_KEYS if key in line}  # the latest sent line
        elif event == "answer" and not flags.mark(line.get("call"), ANSWERED) & ANSWERED:
            # (a batch answer used again is one call: only its first line counts)
            request = pending.pop(str(line.get("call")), None)
            _count_answer(line, request, counted, rate, answered_by, unread_answers)
    unread: list[tuple[dict[str, Any], dict[str, Any], bool]] = []  # (sent line, counted under, never answered)
    for call, request in pending.items():
        for calls in counted(request):
            calls.unanswered += 1
        if not (in_flight and call.startswith(in_flight)):
            unread.append((request, request, True))
    unread += unread_answers
    _in_sent_order(totals, sent_first)
    if before:
        earlier = totals.by_alias.setdefault(BEFORE_LEDGER, AliasCalls())
        earlier.billed_usd += before
        earlier.estimated_usd += before
    unread_requests = {str(request.get("request", "")) for request, _, _ in unread}
    priced_hash = _request_prices(path, unread_requests, end) if unread else {}
    for request, line, unanswered in unread:
        alias = str(line.get("alias", ""))
        billed_share = 1.0  # an answer that arrived unread (a garbled 200, a timeout) was billed
        if unanswered and not unanswered_billed and alias in answered_by:
            billed_share = answered_by[alias].billed_share()
        if str(request.get("request", "")) in priced_hash:
            dollars = priced_hash[str(request.get("request", ""))]
        elif alias in rate and rate[alias][1] > 0 and _number(request.get("prompt_chars")) > 0:
            dollars = rate[alias][0] / rate[alias][1] * _number(request.get("prompt_chars"))
        else:
            dollars = _number(request.get("estimate_usd", line.get("dollars")))
        dollars *= billed_share
        for calls in counted(line):
            calls.billed_usd += dollars
            calls.estimated_usd += dollars
            calls.unusable_usd += 0.0 if unanswered else dollars
    return totals


def ledger_figures(paths: Any, facts: FolderFacts) -> dict[str, Any] | None:
    """The ledger's figures (``LedgerTotals.as_dict``), kept while calls.jsonl is unchanged; None without one."""
    def read() -> dict[str, Any] | None:
        totals = read_ledger(paths.calls)
        return totals.as_dict() if totals is not None else None

    figures: dict[str, Any] | None = facts.kept(LEDGER_FACTS, paths.calls, read)
    return figures


def money_figures(paths: Any, manifest: Mapping[str, Any], kinds: StageKinds,
                  facts: FolderFacts | None = None) -> dict[str, Any]:
    """The three figures, one name each, as ``status --json`` shows them under ``spend``: ``billed_usd``
    (None when the folder has no ledger), ``saved_by_cache_usd``, ``records_cost_usd``; with the ledger's
    retries, failed attempts and per-alias and per-stage figures. ``facts``: the folder's kept facts to read
    them from (else the folder's as kept, nothing written)."""
    facts = facts or kinds.folder_facts(paths, keep=False)
    records, records_known = kinds.run_folder_spend(paths, manifest, facts)
    ledger = ledger_figures(paths, facts)
    figures: dict[str, Any] = {"billed_usd": None, "billed_known": False, "saved_by_cache_usd": None,
                               "records_cost_usd": records, "records_cost_known": records_known}
    if ledger is not None:
        figures.update(ledger)
        figures["records_cost_usd"], figures["records_cost_known"] = records, records_known
    return figures


def billed_so_far(path: Path, in_flight: str | None = None, *, unanswered_billed: bool = False) -> float | None:
    """The folder's billed dollars, or None without a ledger (``in_flight``, ``unanswered_billed``: see read_ledger)."""
    totals = read_ledger(path, in_flight, unanswered_billed=unanswered_billed)
    return totals.billed_usd if totals is not None else None
