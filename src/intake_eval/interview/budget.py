"""The dollar budget as a property of the run folder: it counts what providers *billed*.

Spend so far is the folder's billed figure from its call ledger (core/calls.py: every invocation,
every kill, every retried or truncated attempt and every request in flight at a kill; response-cache
hits are never spend), plus, live, every billed attempt of this process as it arrives. A folder made
before the ledger existed counts its records' cost (the ledger's ``opened`` line). Each conversation reserves an estimate
before it starts: the mean cost plus one standard deviation of the finished ok conversations of its
clinician and arm in this folder (records' cost, scaled by billed ÷ records' cost for those on disk, or what
one was billed when that is more), else a prior from the models' prices × expected tokens. A conversation starts only if
spend + what its holds have not spent yet + its own estimate fit in the budget; the dollars its calls
bill are charged to its hold as they arrive (``CHARGE``, set around the conversation), so a hold
covers only what the conversation has not yet billed. However many run at once, and however often
the process is killed, the budget is overshot by at most what conversations cost beyond their
estimates (about one conversation once the mean is measured).

A budget that already stopped this folder (the stage log's ``budget_stop``) at this limit or a larger
one starts nothing: a rerun with the same budget sends no request. The "about $X more" forecast uses
no safety margin: measured means where an arm has them, else the prior scaled by how measured arms
compared with theirs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from intake_eval.core.calls import billed_so_far
from intake_eval.core.records import Conversation
from intake_eval.core.store import iter_json_lines
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.interview.kind import RUN_STAGE
from intake_eval.interview.cost_forecast import (
    ANSWER_TOKENS,
    BASE_PROMPT_TOKENS,
    PRIOR_MARGIN,
    arm_of,
    judging_estimate,
    measured_costs,
    prior_cost,
    record_cost,
    role_cost,
)
from intake_eval.llm.ledger import CHARGE


@dataclass(eq=False)  # each hold is itself: two with the same figures are not one (the budget removes by identity)
class Reservation:
    """One started conversation's hold on the budget: its estimate until it has spent more."""

    estimate: float
    live: float = 0.0  # dollars of its calls so far

    @property
    def held(self) -> float:
        return max(self.estimate, self.live)

    def charge(self, dollars: float) -> None:
        self.live += dollars


@dataclass
class Budget:
    limit: float
    settled: float = 0.0  # without a ledger: the records at the start plus every finished conversation since
    open: list[Reservation] = field(default_factory=list)
    measured: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (clinician, arm) → ok costs
    specs: dict[str, Any] = field(default_factory=dict)  # role → ModelSpec for the prior
    # Judged as they finish (a study): each conversation also holds its judging until every judge wrote.
    judges: int = 0
    judging_cost: float = 0.0  # estimated dollars to judge one conversation by every judge
    judging_measured: bool = False  # judging_cost is the mean of judgments on disk (no prior margin in it)
    judging: dict[str, tuple[Reservation, int]] = field(default_factory=dict)  # conversation id → (hold, judges left)
    judged_costs: list[float] = field(default_factory=list)  # what judging one conversation cost, as measured here
    released: asyncio.Event = field(default_factory=asyncio.Event)  # set whenever a hold is replaced by its cost
    # The folder's billed dollars now (the ledger's figure at the start + this process's billed attempts);
    # None → the records' cost, settled as work finishes (a pool without a ledger).
    billed: Callable[[], float] | None = None
    stopped_before: bool = False  # an earlier invocation stopped this folder at this limit or a larger one
    on_stop: Callable[[], None] | None = None  # told once when this budget stops starting work
    # Reads the folder's billed figure anew (estimates of earlier kills' requests priced by their answers since)
    refresh: Callable[[], None] | None = None
    refreshed: float = 0.0  # monotonic time of the last refresh
    priors: dict[tuple[str, str], float] = field(default_factory=dict)  # arm → its unmargined prior (forecast scale)

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

    def _settle_cost(self, reservation: Reservation, dollars: float) -> None:
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

    def estimate(self, item: PlannedConversation) -> float:
        """What a conversation holds (and its judging, when judged as it finishes): once its arm is measured,
        the mean cost plus one standard deviation, so that many in flight at once do not together outrun
        their holds; else the prior."""
        costs = self.measured.get(arm_of(item))
        if costs:
            mean = sum(costs) / len(costs)
            spread = (sum((cost - mean) ** 2 for cost in costs) / (len(costs) - 1)) ** 0.5 if len(costs) > 1 else 0.0
            return mean + spread + self.judging_cost
        specs = {**self.specs, "clinician": self.specs.get(f"clinician:{item.clinician}")}
        return prior_cost(item, specs) + self.judging_cost

    def forecast(self, item: PlannedConversation) -> float:
        """The conversation's expected cost without a safety margin (the "about $X more" figure):
        the measured mean of its arm, else its prior scaled by how measured arms compared with theirs;
        its judging likewise (measured here, else the estimate without its margin)."""
        judging = (sum(self.judged_costs) / len(self.judged_costs) if self.judged_costs
                   else self.judging_cost / (1.0 if self.judging_measured else PRIOR_MARGIN))
        costs = self.measured.get(arm_of(item))
        if costs:
            return sum(costs) / len(costs) + judging
        specs = {**self.specs, "clinician": self.specs.get(f"clinician:{item.clinician}")}
        prior = prior_cost(item, specs, margin=1.0)
        compared = [(sum(c) / len(c), self.priors[arm]) for arm, c in self.measured.items()
                    if c and self.priors.get(arm)]
        if compared:
            prior *= sum(mean for mean, _ in compared) / sum(expected for _, expected in compared)
        return prior + judging

    def remaining_cost(self, items: Iterable[PlannedConversation]) -> float:
        """Forecast dollars to run ``items``."""
        items = list(items)
        for item in items:
            specs = {**self.specs, "clinician": self.specs.get(f"clinician:{item.clinician}")}
            self.priors.setdefault(arm_of(item), prior_cost(item, specs, margin=1.0))
        return sum(self.forecast(item) for item in items)

    def reserve(self, item: PlannedConversation) -> Reservation | None:
        """A hold for ``item`` if it fits; None when it does not. With nothing measured
        and nothing in flight, one conversation may start while money is left: the prior is only a guess
        (not after an earlier invocation stopped at this budget: then nothing starts)."""
        if self.stopped_before:
            self._refused()
            return None
        estimate = self.estimate(item)
        fits = self._fits(estimate)
        unmeasured_first = not self.open and arm_of(item) not in self.measured and self.spent < self.limit
        if not (fits or unmeasured_first):
            self._refused()
            return None
        reservation = Reservation(estimate)
        self.open.append(reservation)
        return reservation

    def settle(self, reservation: Reservation, item: PlannedConversation, conversation: Conversation | None) -> None:
        """Replace the hold by the record's cost (or, without a record, what its calls cost)."""
        self.open.remove(reservation)
        self.released.set()
        if conversation is None:
            self._settle_cost(reservation, reservation.live)
            return
        cost = record_cost({role: usage.model_dump() for role, usage in conversation.usage.items()})
        self._settle_cost(reservation, cost)
        if conversation.ok:
            # what running it again would cost: its records' cost (cache hits at full price), or what it was
            # billed when more (retried and garbled attempts included)
            self.measured.setdefault(arm_of(item), []).append(max(cost, reservation.live))
            if self.judges:
                hold = Reservation(self.judging_cost)
                self.open.append(hold)
                self.judging[conversation.conversation_id] = (hold, self.judges)

    def judged(self, conversation_id: str, dollars: float) -> None:
        """One judgment written: its cost counts; the judging hold is released once every judge wrote."""
        if conversation_id not in self.judging:
            self._settle_cost(Reservation(0.0), dollars)
            return
        hold, left = self.judging[conversation_id]
        if self.billed is None:
            hold.live += dollars  # with the ledger, its calls were charged to the hold as they arrived
        if left > 1:
            self.judging[conversation_id] = (hold, left - 1)
            return
        del self.judging[conversation_id]
        self.open.remove(hold)
        self.judged_costs.append(hold.live)
        self._settle_cost(hold, hold.live)
        self.released.set()

    def judging_hold(self, conversation_id: str) -> Reservation | None:
        """The hold a conversation's judging is charged to, while its judges are at work."""
        entry = self.judging.get(conversation_id)
        return entry[0] if entry is not None else None

    async def wait_for_release(self) -> None:
        self.released.clear()
        await self.released.wait()

    def formulation_estimate(self, item: PlannedConversation) -> float:
        """A formulation asked for a conversation on disk: the clinician reads the whole intake once."""
        exchange = ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]
        return PRIOR_MARGIN * role_cost(self.specs.get(f"clinician:{item.clinician}"),
                                         BASE_PROMPT_TOKENS["clinician"] + exchange * item.max_turns,
                                         ANSWER_TOKENS["formulation"])

    def hold(self, dollars: float) -> Reservation | None:
        """A hold of ``dollars`` for work that is not a conversation, if it fits (or nothing else is held)."""
        if not self.stopped_before and (self._fits(dollars) or not self.open and self.spent < self.limit):
            reservation = Reservation(dollars)
            self.open.append(reservation)
            return reservation
        self._refused()
        return None

    def release(self, reservation: Reservation, cost: float) -> None:
        self.open.remove(reservation)
        self._settle_cost(reservation, cost)
        self.released.set()


class JudgingGate:
    """The folder budget for judgments started apart from their conversation (the judge command, a
    study's sweeps of conversations left unjudged and of its forks): each holds one judgment's expected
    cost until its record is written."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.estimate = budget.judging_cost / max(1, budget.judges)
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


def _ledger_backed(budget: Budget, runner: Any, limit: float) -> Budget:
    """Count what providers billed (the folder's ledger, then this process's calls as they arrive), stop
    at once if an earlier invocation stopped this folder at this limit or a larger one, and log a stop."""
    paths = runner.paths
    ledger = runner.pool.ledger
    before = billed_so_far(paths.calls)
    if ledger is not None:
        # billed = the ledger file's figure when last read + what this process was billed since
        read = {"base": before if before is not None else budget.settled, "at": ledger.billed_usd}

        def billed() -> float:
            return read["base"] + ledger.billed_usd - read["at"]

        def refresh() -> None:
            at = ledger.billed_usd
            now = billed_so_far(paths.calls, in_flight=ledger.prefix)
            if now is not None:
                read["base"], read["at"] = now, at

        budget.billed, budget.refresh = billed, refresh
    invocation = ledger.prefix if ledger is not None else f"{os.getpid()}-{id(runner)}"
    budget.stopped_before = any(
        entry.get("event") == "budget_stop" and entry.get("invocation") != invocation
        and isinstance(entry.get("limit"), (int, float)) and entry["limit"] >= limit - 1e-9
        for entry in iter_json_lines(paths.stage_log))

    def stopped() -> None:
        runner.log({"event": "budget_stop", "invocation": invocation, "limit": limit,
                    "billed_usd": round(budget.spent, 6)})

    budget.on_stop = stopped
    return budget


def folder_budget(limit: float | None, runner: Any, clinicians: Iterable[str], *, patient: str,
                  tracker: str | None = None, judges: Mapping[str, str] | None = None, turns: int = 12,
                  judge_mode: str = "per-turn") -> Budget | None:
    """The budget of an invocation on ``runner``'s folder: what the folder was billed already counts.
    ``judges`` (label → alias) judge each conversation as it finishes, so its judging is held too."""
    if limit is None:
        return None
    spent, _known = runner.folder_spend()
    clinicians = list(clinicians)
    resolved = runner.resolve([*clinicians, patient, *([tracker] if tracker else [])])
    specs = {f"clinician:{alias}": resolved[alias] for alias in clinicians}
    specs["patient"] = resolved[patient]
    if tracker:
        specs["tracker"] = resolved[tracker]
    measured = measured_costs(runner.paths, clinicians)
    billed = billed_so_far(runner.paths.calls)
    if billed is not None and spent > 0:
        # records' costs leave out what was billed and not kept (retries, garbled answers, kills): scale them up
        # by the folder's billed ÷ records' cost (never down: cache hits make records dearer than the bill)
        scale = min(2.0, max(1.0, billed / spent))
        measured = {arm: [cost * scale for cost in costs] for arm, costs in measured.items()}
    budget = Budget(limit=limit, settled=spent, measured=measured, specs=specs)
    if judges:
        _hold_judging(budget, runner, judges, turns, judge_mode)
    return _ledger_backed(budget, runner, limit)


def judging_budget(limit: float | None, runner: Any, judges: Mapping[str, str], *, judge_mode: str,
                   turns: int | None = None) -> Budget | None:
    """The folder budget of an invocation that only judges (label → alias): what the folder was billed
    already counts, and each judgment holds its expected cost through a ``JudgingGate``. ``turns``
    defaults to the run stage's (12 when the folder has none)."""
    if limit is None:
        return None
    spent, _known = runner.folder_spend()
    if turns is None:
        turns = int(runner.manifest.stage_config(RUN_STAGE).get("turns", 12))
    budget = Budget(limit=limit, settled=spent)
    _hold_judging(budget, runner, judges, turns, judge_mode)
    return _ledger_backed(budget, runner, limit)


def _hold_judging(budget: Budget, runner: Any, judges: Mapping[str, str], turns: int, judge_mode: str) -> None:
    resolved = runner.resolve(list(judges.values()))
    budget.judges = len(judges)
    budget.judging_cost, budget.judging_measured = judging_estimate(
        runner.paths, {label: resolved[alias] for label, alias in judges.items()}, turns, judge_mode)
