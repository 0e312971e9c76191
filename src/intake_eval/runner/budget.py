"""The dollar budget of a run folder, for any stage: it counts what providers *billed*.

Public API (all a stage needs):
- ``FolderBudget.on_folder(limit, runner)`` opens the budget of an invocation on ``runner``'s folder;
- ``hold(dollars)`` → a ``Reservation`` if that much more fits (or nothing else is held), else None;
- ``charging(reservation)`` around the work: each billed attempt is charged to the hold as it arrives;
- ``release(reservation, dollars)`` once the work is done; ``wait_for_release()`` while nothing fits;
- ``spent`` / ``limit``: what the folder was billed so far, and the limit.
``JudgingGate`` wraps a budget for work made of judgments (``judging_gate`` opens one for a judge stage).

Spend is the folder's billed figure from its call ledger (core/calls.py) — every invocation, every kill,
every retried or truncated attempt — plus, live, every billed attempt of this process as it arrives;
response-cache hits are never spend. Requests whose answer never arrived (in flight at a kill) count as
billed in full: the budget needs an upper bound, where ``status`` shows the best estimate (such a request
weighted by how often its alias's answers were billed; on one measured seed every request in flight at
the kills had been answered and billed, and the weighted figure left $0.0165 unseen). A folder made
before the ledger existed counts its records' cost. ``overhead`` is the folder's billed dollars per
dollar of answers used, for holds sized from kept work (interview/budget.py).

Work starts only if spend + what the holds have not spent yet + its own hold fit in the limit, so
**billed ≤ limit + Σ over the work in flight at the stop of (what it cost − its hold)⁺**, plus the error of
the per-character estimate of requests in flight at kills. With holds at the expected billed cost (mean
+ one sd, times the overhead) the sum is a few random retries, measured under one conversation at
concurrency 64 (tests/test_billed_ledger.py).

A budget that already stopped this folder (the stage log's ``budget_stop``) at this limit or a larger
one starts nothing: a rerun with the same budget sends no request.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Self, cast

from intake_eval.core.calls import billed_so_far, read_ledger
from intake_eval.core.store import iter_json_lines
from intake_eval.llm.ledger import CHARGE
from intake_eval.runner.cost_estimate import judging_estimate


@dataclass(eq=False)  # each hold is itself: two with the same figures are not one (the budget removes by identity)
class Reservation:
    """One piece of work's hold on the budget: its estimate until it has spent more."""

    estimate: float
    live: float = 0.0  # dollars of its calls so far

    @property
    def held(self) -> float:
        return max(self.estimate, self.live)

    def charge(self, dollars: float) -> None:
        self.live += dollars


@dataclass
class FolderBudget:
    limit: float
    settled: float = 0.0  # without a ledger: the records at the start plus all work finished since
    open: list[Reservation] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)  # set whenever a hold is replaced by its cost
    # The folder's billed dollars now (the ledger's figure at the start + this process's billed attempts);
    # None → the records' cost, settled as work finishes (a pool without a ledger).
    billed: Callable[[], float] | None = None
    stopped_before: bool = False  # an earlier invocation stopped this folder at this limit or a larger one
    on_stop: Callable[[], None] | None = None  # told once when this budget stops starting work
    # Reads the folder's billed figure anew (estimates of earlier kills' requests priced by their answers since)
    refresh: Callable[[], None] | None = None
    refreshed: float = 0.0  # monotonic time of the last refresh
    # The folder's billed dollars of used and of unused answers (retried, garbled, cut short) so far
    paid_for: Callable[[], tuple[float, float]] | None = None

    @property
    def overhead(self) -> float:
        """Dollars billed per dollar of answers used (≥ 1): what retries and unusable answers add to the cost
        of the work that is kept. Known from the first billed attempts on, well before the work that was
        retried (and so finishes last) is measured."""
        if self.paid_for is None:
            return 1.0
        used, unused = self.paid_for()
        return 1.0 + unused / used if used > 0 else 1.0

    @classmethod
    def on_folder(cls, limit: float, runner: Any, **fields: Any) -> Self:
        """The budget of an invocation on ``runner``'s folder (``fields``: a subclass's own)."""
        spent, _known = runner.folder_spend()
        return cls(limit=limit, settled=spent, **fields).backed_by(runner)

    @property
    def spent(self) -> float:
        return self.billed() if self.billed is not None else self.settled

    def _outstanding(self, reservation: Reservation) -> float:
        """What a hold still keeps back: with the ledger its billed dollars are already in ``spent``."""
        return reservation.held - reservation.live if self.billed is not None else reservation.held

    @property
    def committed(self) -> float:
        return self.spent + sum(self._outstanding(r) for r in self.open)

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.spent)

    @contextmanager
    def charging(self, reservation: Reservation | None) -> Iterator[None]:
        """Within this block, every billed attempt (call ledger) is charged to ``reservation``."""
        if reservation is None or self.billed is None:
            yield
            return
        token = CHARGE.set(reservation.charge)
        try:
            yield
        finally:
            CHARGE.reset(token)

    def _settle_cost(self, dollars: float) -> None:
        if self.billed is None:
            self.settled += dollars

    def _fits(self, dollars: float) -> bool:
        """Whether ``dollars`` more fit; before saying no, the billed figure is read anew (at most once a
        second while work is in flight: its answers settle what earlier estimates guessed)."""
        if self.committed + dollars <= self.limit + 1e-12:
            return True
        if self.refresh is None or (self.open and time.monotonic() - self.refreshed < 1.0):
            return False
        self.refresh()
        self.refreshed = time.monotonic()
        return self.committed + dollars <= self.limit + 1e-12

    def _refused(self) -> None:
        """Nothing fits: when nothing is in flight either, this budget has stopped the folder."""
        if not self.open and self.on_stop is not None:
            self.on_stop()
            self.on_stop = None

    def hold(self, dollars: float) -> Reservation | None:
        """A hold of ``dollars`` if it fits (or nothing else is held while money is left); else None."""
        if not self.stopped_before and (self._fits(dollars) or not self.open and self.spent < self.limit):
            reservation = Reservation(dollars)
            self.open.append(reservation)
            return reservation
        self._refused()
        return None

    def release(self, reservation: Reservation, cost: float) -> None:
        """The work of ``reservation`` is done; it cost ``cost`` (counted only without a ledger)."""
        self.open.remove(reservation)
        self._settle_cost(cost)
        self.released.set()

    async def wait_for_release(self) -> None:
        self.released.clear()
        await self.released.wait()

    def backed_by(self, runner: Any) -> Self:
        """Count what providers billed (the folder's ledger, then this process's calls as they arrive), stop
        at once if an earlier invocation stopped this folder at this limit or a larger one, and log a stop."""
        paths = runner.paths
        ledger = runner.pool.ledger
        totals = read_ledger(paths.calls, unanswered_billed=True)
        before = totals.billed_usd if totals is not None else None
        if ledger is not None:
            # billed = the ledger file's figure when last read + what this process was billed since
            read = {"base": before if before is not None else self.settled, "at": ledger.billed_usd}

            def billed() -> float:
                return read["base"] + ledger.billed_usd - read["at"]

            def refresh() -> None:
                at = ledger.billed_usd
                now = billed_so_far(paths.calls, in_flight=ledger.prefix, unanswered_billed=True)
                if now is not None:
                    read["base"], read["at"] = now, at

            self.billed, self.refresh = billed, refresh
            earlier = (totals.usable_usd, totals.unusable_usd) if totals is not None else (0.0, 0.0)

            def paid_for() -> tuple[float, float]:
                return (earlier[0] + ledger.billed_usd - ledger.unusable_usd, earlier[1] + ledger.unusable_usd)

            self.paid_for = paid_for
        invocation = ledger.prefix if ledger is not None else f"{os.getpid()}-{id(runner)}"
        limit = self.limit
        self.stopped_before = any(
            entry.get("event") == "budget_stop" and entry.get("invocation") != invocation
            and isinstance(entry.get("limit"), (int, float)) and entry["limit"] >= limit - 1e-9
            for entry in iter_json_lines(paths.stage_log))

        def stopped() -> None:
            runner.log({"event": "budget_stop", "invocation": invocation, "limit": limit,
                        "billed_usd": round(self.spent, 6)})

        self.on_stop = stopped
        return self


class JudgingGate:
    """A folder budget for judgments started one by one (the judge stage, a study's sweeps of conversations
    left unjudged and of its forks): each holds one judgment's expected cost until its record is written."""

    def __init__(self, budget: FolderBudget, per_judgment: float):
        self.budget = budget
        self.estimate = per_judgment
        self.settled: list[float] = []  # what the judgments made through this gate cost

    def admit(self) -> Reservation | None:
        return self.budget.hold(self.estimate)

    def charging(self, hold: object) -> AbstractContextManager[None]:
        return self.budget.charging(cast(Reservation, hold))

    def settle(self, hold: object, dollars: float) -> None:
        self.settled.append(dollars)
        self.budget.release(cast(Reservation, hold), dollars)

    @property
    def per_judgment(self) -> float:
        """Expected dollars of one more judgment: the mean of those made here, else the estimate."""
        return sum(self.settled) / len(self.settled) if self.settled else self.estimate

    def left(self, judgments: int) -> dict[str, float | int]:
        """What a stop left: the judgments not started and the estimated dollars to make them."""
        return {"limit": self.budget.limit, "spent": round(self.budget.spent, 6), "conversations": 0,
                "judgments": judgments, "dollars_to_finish": round(judgments * self.per_judgment, 6)}


def judging_turns(runner: Any) -> int:
    """The run stage's number of turns (12 when the folder has none)."""
    run = (runner.manifest.data.get("stages") or {}).get("run") or {}
    return int((run.get("config") or {}).get("turns", 12))


def judging_gate(limit: float | None, runner: Any, judges: Mapping[str, str], *, judge_mode: str,
                 turns: int | None = None) -> JudgingGate | None:
    """The folder budget of a stage that only judges (label → alias): what the folder was billed already
    counts, and each judgment holds its expected cost. None without a limit."""
    if limit is None:
        return None
    resolved = runner.resolve(list(judges.values()))
    per_conversation, _measured = judging_estimate(runner.paths, {label: resolved[alias] for label, alias in judges.items()},
                                                   turns if turns is not None else judging_turns(runner), judge_mode)
    return JudgingGate(FolderBudget.on_folder(limit, runner), per_conversation / max(1, len(judges)))
