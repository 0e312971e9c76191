"""The folder budget of stages that run conversations (run, forks, a study judging as it goes): the
run folder's ``FolderBudget`` (runner/budget.py: it counts what providers billed, and states the bound)
with each conversation's hold sized from what its arm costs.

Each conversation holds, before it starts, the mean cost plus one standard deviation of the finished ok
conversations of its clinician and arm in this folder (records' cost, scaled by billed ÷ records' cost
for those on disk, or what one was billed when that is more), times the folder's billed-per-used-dollar
overhead (``FolderBudget.overhead``); else a prior from the models' prices × expected tokens.

Why the overhead, measured (10 SIGKILLs, concurrency 64, $5, 3 % truncated bodies): when the kills left
nothing finished, the last invocation measured its first 54 conversations at exactly their records' cost
($0.0418, spread 0) — those finishing first are those without a retry — and held that for each of the
64 in flight at the stop; the retried ones among them then overran their holds by $0.083 in all (≈ 64 ×
$0.0418 × 3 %), billing $5.045–5.186. The bill's overshoot is the retries' share of the work in flight,
known from the ledger from the first billed attempts on, not from the finished conversations' spread.

The "about $X more" forecast uses no safety margin: measured means where an arm has them, else the
prior scaled by how measured arms compared with theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from intake_eval.core.calls import billed_so_far
from intake_eval.core.limits import DEFAULT_TURNS
from intake_eval.core.records import Conversation
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.interview.cost_forecast import (
    ANSWER_TOKENS,
    BASE_PROMPT_TOKENS,
    PRIOR_MARGIN,
    arm_of,
    measured_costs,
    prior_cost,
    record_cost,
    role_cost,
)
from intake_eval.runner.budget import FolderBudget, JudgingGate, Reservation
from intake_eval.runner.cost_estimate import judging_estimate

@dataclass
class Budget(FolderBudget):
    """The folder budget with a hold per conversation sized from its arm (and its judging, when judged
    as it finishes)."""

    measured: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (clinician, arm) → ok costs
    specs: dict[str, Any] = field(default_factory=dict)  # role → ModelSpec for the prior
    # Judged as they finish (a study): each conversation also holds its judging until every judge wrote.
    judges: int = 0
    judging_cost: float = 0.0  # estimated dollars to judge one conversation by every judge
    judging_measured: bool = False  # judging_cost is the mean of judgments on disk (no prior margin in it)
    judging: dict[str, tuple[Reservation, int]] = field(default_factory=dict)  # conversation id → (hold, judges left)
    judged_costs: list[float] = field(default_factory=list)  # what judging one conversation cost, as measured here
    priors: dict[tuple[str, str], float] = field(default_factory=dict)  # arm → its unmargined prior (forecast scale)

    def estimate(self, item: PlannedConversation) -> float:
        """What a conversation holds (and its judging, when judged as it finishes): once its arm is measured,
        the mean cost plus one standard deviation, times the folder's billed-per-used-dollar overhead (the
        conversations that finish first are those without retries: their spread alone does not cover the
        retried ones still in flight); else the prior."""
        costs = self.measured.get(arm_of(item))
        if costs:
            mean = sum(costs) / len(costs)
            spread = (sum((cost - mean) ** 2 for cost in costs) / (len(costs) - 1)) ** 0.5 if len(costs) > 1 else 0.0
            return (mean + spread) * self.overhead + self.judging_cost
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
            self._settle_cost(reservation.live)
            return
        cost = record_cost({role: usage.model_dump() for role, usage in conversation.usage.items()})
        self._settle_cost(cost)
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
            self._settle_cost(dollars)
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
        self._settle_cost(hold.live)
        self.released.set()

    def judging_hold(self, conversation_id: str) -> Reservation | None:
        """The hold a conversation's judging is charged to, while its judges are at work."""
        entry = self.judging.get(conversation_id)
        return entry[0] if entry is not None else None

    def formulation_estimate(self, item: PlannedConversation) -> float:
        """A formulation asked for a conversation on disk: the clinician reads the whole intake once."""
        exchange = ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]
        return PRIOR_MARGIN * role_cost(self.specs.get(f"clinician:{item.clinician}"),
                                         BASE_PROMPT_TOKENS["clinician"] + exchange * item.max_turns,
                                         ANSWER_TOKENS["formulation"])


def folder_budget(limit: float | None, runner: Any, clinicians: Iterable[str], *, patient: str,
                  tracker: str | None = None, judges: Mapping[str, str] | None = None, turns: int = DEFAULT_TURNS,
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
    return budget.backed_by(runner)


def study_judging_gate(budget: Budget) -> JudgingGate:
    """The judgments a study starts apart from their conversation (those an earlier invocation left
    unjudged), admitted by the same folder budget at one judgment's share of the judging estimate."""
    return JudgingGate(budget, budget.judging_cost / max(1, budget.judges))


def _hold_judging(budget: Budget, runner: Any, judges: Mapping[str, str], turns: int, judge_mode: str) -> None:
    resolved = runner.resolve(list(judges.values()))
    budget.judges = len(judges)
    budget.judging_cost, budget.judging_measured = judging_estimate(
        runner.paths, {label: resolved[alias] for label, alias in judges.items()}, turns, judge_mode)
