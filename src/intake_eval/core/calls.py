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

A request in flight now (sent by the process holding the folder's lock, no answer yet) is counted as
unanswered but not billed: it is not billed yet, and its answer will say. Once that process is gone, a request
it left unanswered is one a kill caught in flight.

A folder made before the ledger existed starts it with an ``opened`` line naming what its records
cost then; billed counts that as an estimate (under the alias ``BEFORE_LEDGER``).

Retries are counted here too: failed attempts the retry policy repeats (429, 5xx, timeouts,
dropped connections, garbled bodies).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.ledger_read import BEFORE_LEDGER, UNREAD_BILLED, LedgerRead
from intake_eval.core.ledger_totals import AliasCalls, LedgerTotals
from intake_eval.core.record_facts import FolderFacts
from intake_eval.core.run_lock import RunLock
from intake_eval.core.stage_kinds import StageKinds

__all__ = ["BEFORE_LEDGER", "UNREAD_BILLED", "AliasCalls", "LedgerTotals", "billed_so_far", "ledger_figures",
           "money_figures", "read_ledger"]

LEDGER_FACTS = "call_ledger"  # the ledger's figures as kept beside it (core/record_facts)


def read_ledger(path: Path, in_flight: str | None = None, *, unanswered_billed: bool = False) -> LedgerTotals | None:
    """The ledger's figures, or None when the folder has no ledger (made before it existed). Requests whose
    call id starts with ``in_flight`` (a live process's own) are not counted while unanswered.
    ``unanswered_billed`` counts every request whose answer never arrived as billed in full (no weighting by
    how often the alias's answers were billed): an upper bound rather than the best estimate — a budget's view."""
    if not path.exists():
        return None
    state = LedgerRead()
    state.read(path)
    return state.figures(path, in_flight, unanswered_billed=unanswered_billed)


def ledger_figures(paths: Any, facts: FolderFacts) -> dict[str, Any] | None:
    """The ledger's figures (``LedgerTotals.as_dict``), None without one. Kept beside the ledger with the
    state of its read: while calls.jsonl is unchanged they are read from there, and while it only grew
    (a stage appending now) only its new lines are read. The requests in flight now (sent by the process
    holding the folder's lock, no answer yet) are counted as unanswered, not billed: none is billed yet."""
    if not paths.calls.exists():
        return None
    holder = RunLock.holder(paths)
    in_flight = f"{holder}-" if holder is not None else None  # llm/ledger.py: call ids start "<pid>-"

    def figures(state: LedgerRead) -> dict[str, Any]:
        return state.figures(paths.calls, in_flight).as_dict()

    kept: dict[str, Any] = facts.kept_stream(LEDGER_FACTS, paths.calls, lambda: LedgerRead(kept=True),
                                             LedgerRead.from_json, figures, variant=in_flight or "")
    return kept


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
