"""One read of the call ledger (calls.jsonl, see llm/ledger.py), line by line, whose state can be kept and
resumed: ``LedgerRead.read`` counts lines, ``figures`` gives the totals (core/calls says what they mean).

A ledger of a large study holds millions of lines, and ``status`` asks for its figures while a stage appends
to it. The state of a read (the totals so far, a byte of flags per call id, the requests sent and not yet
answered, the few answers billed unread) is small and JSON-shaped (``as_json``), so a read kept beside the
ledger (core/record_facts, ``FolderFacts.kept_stream``) goes on with the appended lines alone and gives what
a read of the whole ledger gives: the same lines in the same order, every float summed in the same order.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Collection, Container, Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.call_flags import ANSWERED, SENT, CallFlags
from intake_eval.core.hash_filter import HashFilter
from intake_eval.core.ledger_totals import AliasCalls, InFlightOdds, LedgerTotals, totals_from_json, totals_json
from intake_eval.core.lines import LineSpan, iter_json_lines_at

# Errors after which the provider may have done (and billed) the work without our reading its usage.
UNREAD_BILLED = ("bad_body", "timeout")
BEFORE_LEDGER = "(before the call ledger)"  # where the records made before the ledger existed are counted


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


SENT_KEYS = ("alias", "stage", "request", "prompt_chars", "estimate_usd")  # what a sent line is read again for


def _prices(line: Mapping[str, Any]) -> bool:
    """Whether an answer line (the first of its call) says what its request costs (``_note_price``)."""
    return bool(line.get("cost_known", True)) and bool(
        line.get("cache_hit") or (line.get("billed") and line.get("error") not in UNREAD_BILLED))


def _note_price(line: Mapping[str, Any], prices: dict[str, float], wanted: Container[str]) -> None:
    """What an answer line (the first of its call) says one request costs, for the requests ``wanted``:
    a billed, priced answer's dollars, else the first priced cache hit's."""
    request = str(line.get("request", ""))
    if request not in wanted or not _prices(line):
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


class LedgerRead:
    """A read of the ledger's lines so far: each line is read once, holding no line once read. A sent line
    waits in ``pending`` until its answer is read; each call id keeps two flags (sent, answered) so a
    repeated line counts once. ``figures`` gives the totals as of the lines read; ``read`` goes on from
    where the last read stopped (a ledger that only grew), and ``as_json``/``from_json`` keep the state
    between processes. The prices of requests billed unread (by their hash, ``_note_price``) are looked up
    once per hash by a second read up to ``end`` and then kept up to date as later lines are read. A read
    made to be ``kept`` also notes every request hash an answer priced in a ``HashFilter``, so that a hash
    it certainly never priced needs no second read."""

    def __init__(self, *, kept: bool = False) -> None:
        self.totals = LedgerTotals()
        self.flags = CallFlags()
        self.pending: dict[str, dict[str, Any]] = {}  # call → what its sent line says that is read again (SENT_KEYS)
        self.unread_answers: list[tuple[dict[str, Any], dict[str, Any], bool]] = []
        self.sent_first: dict[str, None] = {}  # aliases, stages and (stage, alias) as sent lines first name them
        self.before = 0.0  # what records made before the ledger existed cost (its "opened" line)
        self.rate: dict[str, list[float]] = {}  # alias → [dollars, characters] over answered, priced calls
        self.answered_by: dict[str, InFlightOdds] = {}  # alias → how often, and how long, its answers were billed
        self.end = 0  # where the last line read ends
        self.priced: set[str] = set()  # request hashes whose ``prices`` are complete up to ``end``
        self.prices: dict[str, float] = {}  # request hash → its price, for hashes in ``priced`` that have one
        self.priced_somewhere = HashFilter() if kept else None  # every request hash an answer read priced

    def read(self, path: Path, span: LineSpan | None = None) -> None:
        """Count the ledger's lines of ``span`` (its whole, by default; a resumed read: the appended tail)."""
        for line, start, length in iter_json_lines_at(path, model=None, span=span):
            self.end = start + length
            event = line.get("event")
            if event == "opened":
                self.before += _number(line.get("records_cost_usd"))
            elif event == "sent" and isinstance(line.get("call"), str):
                call = line["call"]
                seen = self.flags.mark(call, SENT)
                if not seen & SENT:
                    alias, stage = str(line.get("alias", "")), str(line.get("stage", ""))
                    self.sent_first.update({f"a{alias}": None, f"s{stage}": None, f"p{stage}\0{alias}": None})
                    for calls in _counted(self.totals, line):
                        calls.requests += 1
                if not seen & ANSWERED:
                    self.pending[call] = {key: line[key] for key in SENT_KEYS if key in line}  # the latest sent line
            elif event == "answer" and not self.flags.mark(line.get("call"), ANSWERED) & ANSWERED:
                # (a batch answer used again is one call: only its first line counts)
                request = self.pending.pop(str(line.get("call")), None)
                _count_answer(line, request, lambda counted: _counted(self.totals, counted), self.rate,
                              self.answered_by, self.unread_answers)
                if self.priced:
                    _note_price(line, self.prices, self.priced)
                if self.priced_somewhere is not None and _prices(line):
                    self.priced_somewhere.add(str(line.get("request", "")))

    def figures(self, path: Path, in_flight: str | None = None, *, unanswered_billed: bool = False) -> LedgerTotals:
        """The totals as of the lines read (the state itself is left as it is, but for the prices it looks up).
        Requests whose call id starts with ``in_flight`` (a live process's own) are not counted while
        unanswered. ``unanswered_billed`` counts every request whose answer never arrived as billed in full
        (no weighting by how often the alias's answers were billed): an upper bound rather than the best
        estimate — a budget's view."""
        totals = copy.deepcopy(self.totals)
        unread: list[tuple[dict[str, Any], dict[str, Any], bool]] = []  # (sent line, counted under, never answered)
        for call, request in self.pending.items():
            for calls in _counted(totals, request):
                calls.unanswered += 1
            if not (in_flight and call.startswith(in_flight)):
                unread.append((request, request, True))
        unread += self.unread_answers
        _in_sent_order(totals, self.sent_first)
        if self.before:
            earlier = totals.by_alias.setdefault(BEFORE_LEDGER, AliasCalls())
            earlier.billed_usd += self.before
            earlier.estimated_usd += self.before
        wanted = {str(request.get("request", "")) for request, _, _ in unread} - self.priced
        if wanted and self.priced_somewhere is not None:
            never = {request for request in wanted if not self.priced_somewhere.may_contain(request)}
            self.priced |= never  # (no price up to ``end``: later answers are noted as they are read)
            wanted -= never
        if wanted:
            self.prices.update(_request_prices(path, wanted, self.end))
            self.priced |= wanted
        for request, line, unanswered in unread:
            alias = str(line.get("alias", ""))
            billed_share = 1.0  # an answer that arrived unread (a garbled 200, a timeout) was billed
            if unanswered and not unanswered_billed and alias in self.answered_by:
                billed_share = self.answered_by[alias].billed_share()
            if str(request.get("request", "")) in self.prices:
                dollars = self.prices[str(request.get("request", ""))]
            elif alias in self.rate and self.rate[alias][1] > 0 and _number(request.get("prompt_chars")) > 0:
                dollars = self.rate[alias][0] / self.rate[alias][1] * _number(request.get("prompt_chars"))
            else:
                dollars = _number(request.get("estimate_usd", line.get("dollars")))
            dollars *= billed_share
            for calls in _counted(totals, line):
                calls.billed_usd += dollars
                calls.estimated_usd += dollars
                calls.unusable_usd += 0.0 if unanswered else dollars
        return totals

    def as_json(self) -> dict[str, Any]:
        """The state, JSON-shaped; every order that matters (sums, tables) is kept in lists."""
        return {"totals": totals_json(self.totals), "flags": self.flags.as_json(),
                "pending": [[call, request] for call, request in self.pending.items()],
                "unread_answers": [list(entry) for entry in self.unread_answers],
                "sent_first": list(self.sent_first), "before": self.before,
                "rate": [[alias, pair] for alias, pair in self.rate.items()],
                "answered_by": [[alias, dataclasses.asdict(odds)] for alias, odds in self.answered_by.items()],
                "end": self.end, "priced": sorted(self.priced),
                "prices": [[request, price] for request, price in self.prices.items()],
                "priced_somewhere": self.priced_somewhere.as_json() if self.priced_somewhere is not None else None}

    @classmethod
    def from_json(cls, value: Any) -> LedgerRead | None:
        """The state ``as_json`` gave, or None when it is not one (an older or damaged store)."""
        state = cls()
        try:
            state.totals = totals_from_json(value["totals"])
            state.flags = CallFlags.from_json(value["flags"])
            state.pending = {str(call): dict(request) for call, request in value["pending"]}
            state.unread_answers = [(dict(request), dict(line), bool(never)) for request, line, never
                                    in value["unread_answers"]]
            state.sent_first = dict.fromkeys(str(name) for name in value["sent_first"])
            state.before = float(value["before"])
            state.rate = {str(alias): [float(pair[0]), float(pair[1])] for alias, pair in value["rate"]}
            state.answered_by = {str(alias): InFlightOdds(**odds) for alias, odds in value["answered_by"]}
            state.end = int(value["end"])
            state.priced = {str(request) for request in value["priced"]}
            state.prices = {str(request): float(price) for request, price in value["prices"]}
            kept = value["priced_somewhere"]
            state.priced_somewhere = HashFilter.from_json(kept) if kept is not None else None
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return state


def _counted(totals: LedgerTotals, line: Mapping[str, Any]) -> list[AliasCalls]:
    """The three tables' entries a line counts in: its alias, its stage, its (stage, alias)."""
    alias, stage = str(line.get("alias", "")), str(line.get("stage", ""))
    return [totals.by_alias.setdefault(alias, AliasCalls()), totals.by_stage.setdefault(stage, AliasCalls()),
            totals.by_stage_alias.setdefault((stage, alias), AliasCalls())]
