"""The dollar budget as a property of the run folder.

Spend so far is summed from the records of every stage (``core.usage.run_folder_spend``), so a
second invocation counts the first. Each conversation reserves an estimate before it starts: the
mean cost of the finished ok conversations of its clinician and arm in this folder, else a prior
from the models' prices × expected tokens. A conversation starts only if spend + reservations +
its own estimate fit in the budget; on finishing, its reservation is replaced by the cost in its
record. So however many run at once, the budget is overshot by at most what conversations cost
beyond their estimates (at most about one conversation once the mean is measured). Costs are the
records' (a response-cache hit keeps its price), unknown prices count as zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from intake_eval.core.records import Conversation, arm_condition
from intake_eval.core.usage import latest_lines, run_folder_spend, usage_of
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.llm.litellm_backend import call_cost

# The prior, before any conversation of a clinician/arm is measured: a prompt's fixed part per role
# (system prompt, the patient's profile), the answer lengths of the cost estimate, and a margin so
# that the first conversations rather under- than overspend (over-reserving only delays starts
# until the first conversation has measured the real cost).
BASE_PROMPT_TOKENS = {"clinician": 500, "patient": 2000, "tracker": 1500}
ANSWER_TOKENS = {"clinician": 80, "patient": 90, "tracker": 25, "formulation": 300}
PRIOR_MARGIN = 2.0
JUDGE_PROMPT_TOKENS = 2500  # the judge's instructions and the hidden domains
JUDGE_ANSWER_TOKENS = 400


def record_cost(usage: Mapping[str, Any] | None) -> float:
    """Dollars of a conversation record's usage (role → usage dict)."""
    return sum(usage_of(raw).cost_usd for raw in (usage or {}).values())


def _arm_of(item: PlannedConversation) -> tuple[str, str]:
    fork = {"at": item.fork.at, "nudge": item.fork.nudge} if item.fork is not None else None
    return item.clinician, arm_condition(item.condition, fork)


def _role_cost(spec: Any, prompt_tokens: int, completion_tokens: int) -> float:
    if spec is None or getattr(spec, "is_offline", False):
        return 0.0
    dollars, _known = call_cost(spec, prompt_tokens, completion_tokens)
    return dollars


def prior_cost(item: PlannedConversation, specs: Mapping[str, Any]) -> float:
    """Dollars one conversation is expected to cost from prices × expected tokens (``specs``: role →
    ModelSpec or None), with PRIOR_MARGIN."""
    turns = item.max_turns
    exchange = ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]
    history = exchange * turns * (turns + 1) // 2  # the transcript grows by one exchange per turn
    tokens = {
        "clinician": (BASE_PROMPT_TOKENS["clinician"] * turns + history, ANSWER_TOKENS["clinician"] * turns),
        "patient": (BASE_PROMPT_TOKENS["patient"] * (turns + 1) + history, ANSWER_TOKENS["patient"] * (turns + 1)),
    }
    if specs.get("tracker") is not None:
        tokens["tracker"] = (BASE_PROMPT_TOKENS["tracker"] * turns + history, ANSWER_TOKENS["tracker"] * turns)
    dollars = sum(_role_cost(specs.get(role), *counts) for role, counts in tokens.items())
    if item.formulation:
        dollars += _role_cost(specs.get("clinician"), BASE_PROMPT_TOKENS["clinician"] + exchange * turns,
                              ANSWER_TOKENS["formulation"])
    return dollars * PRIOR_MARGIN


@dataclass
class Reservation:
    """One started conversation's hold on the budget: its estimate until it has spent more."""

    estimate: float
    live: float = 0.0  # dollars of its calls so far

    @property
    def held(self) -> float:
        return max(self.estimate, self.live)


@dataclass
class Budget:
    limit: float
    spent: float = 0.0  # settled: the records at the start plus every finished conversation since
    open: list[Reservation] = field(default_factory=list)
    measured: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (clinician, arm) → ok costs
    specs: dict[str, Any] = field(default_factory=dict)  # role → ModelSpec for the prior
    # Judged as they finish (a study): each conversation also holds its judging until every judge wrote.
    judges: int = 0
    judging_cost: float = 0.0  # estimated dollars to judge one conversation by every judge
    judging: dict[str, tuple[Reservation, int]] = field(default_factory=dict)  # conversation id → (hold, judges left)
    released: asyncio.Event = field(default_factory=asyncio.Event)  # set whenever a hold is replaced by its cost

    @property
    def committed(self) -> float:
        return self.spent + sum(r.held for r in self.open)

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.spent)

    def estimate(self, item: PlannedConversation) -> float:
        """The conversation's expected cost (and its judging, when judged as it finishes)."""
        costs = self.measured.get(_arm_of(item))
        if costs:
            return sum(costs) / len(costs) + self.judging_cost
        specs = {**self.specs, "clinician": self.specs.get(f"clinician:{item.clinician}")}
        return prior_cost(item, specs) + self.judging_cost

    def remaining_cost(self, items: Iterable[PlannedConversation]) -> float:
        """Estimated dollars to run ``items``."""
        return sum(self.estimate(item) for item in items)

    def reserve(self, item: PlannedConversation) -> Reservation | None:
        """A hold for ``item`` if it fits; None when it does not. With nothing measured
        and nothing in flight, one conversation may start while money is left: the prior is only a guess."""
        estimate = self.estimate(item)
        fits = self.committed + estimate <= self.limit + 1e-12
        unmeasured_first = not self.open and _arm_of(item) not in self.measured and self.spent < self.limit
        if not (fits or unmeasured_first):
            return None
        reservation = Reservation(estimate)
        self.open.append(reservation)
        return reservation

    def settle(self, reservation: Reservation, item: PlannedConversation, conversation: Conversation | None) -> None:
        """Replace the hold by the record's cost (or, without a record, what its calls cost)."""
        self.open.remove(reservation)
        self.released.set()
        if conversation is None:
            self.spent += reservation.live
            return
        cost = record_cost({role: usage.model_dump() for role, usage in conversation.usage.items()})
        self.spent += cost
        if conversation.ok:
            self.measured.setdefault(_arm_of(item), []).append(cost)
            if self.judges:
                hold = Reservation(self.judging_cost)
                self.open.append(hold)
                self.judging[conversation.conversation_id] = (hold, self.judges)

    def judged(self, conversation_id: str, dollars: float) -> None:
        """One judgment written: its cost counts; the judging hold is released once every judge wrote."""
        if conversation_id not in self.judging:
            self.spent += dollars
            return
        hold, left = self.judging[conversation_id]
        hold.live += dollars
        if left > 1:
            self.judging[conversation_id] = (hold, left - 1)
            return
        del self.judging[conversation_id]
        self.open.remove(hold)
        self.spent += hold.live
        self.released.set()

    async def wait_for_release(self) -> None:
        self.released.clear()
        await self.released.wait()

    def formulation_estimate(self, item: PlannedConversation) -> float:
        """A formulation asked for a conversation on disk: the clinician reads the whole intake once."""
        exchange = ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]
        return PRIOR_MARGIN * _role_cost(self.specs.get(f"clinician:{item.clinician}"),
                                         BASE_PROMPT_TOKENS["clinician"] + exchange * item.max_turns,
                                         ANSWER_TOKENS["formulation"])

    def hold(self, dollars: float) -> Reservation | None:
        """A hold of ``dollars`` for work that is not a conversation, if it fits (or nothing else is held)."""
        if self.committed + dollars <= self.limit + 1e-12 or not self.open and self.spent < self.limit:
            reservation = Reservation(dollars)
            self.open.append(reservation)
            return reservation
        return None

    def release(self, reservation: Reservation, cost: float) -> None:
        self.open.remove(reservation)
        self.spent += cost
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


def measured_costs(paths: Any, clinicians: Iterable[str]) -> dict[tuple[str, str], list[float]]:
    """Cost of every finished ok conversation on disk, by (clinician, arm)."""
    measured: dict[tuple[str, str], list[float]] = {}
    files = [paths.conversations(alias) for alias in sorted(set(clinicians))]
    for data in latest_lines(files, "conversation_id").values():
        if data.get("status", "ok") != "ok":
            continue
        fork = data.get("fork") if isinstance(data.get("fork"), dict) else None
        key = (str(data.get("clinician", "")), arm_condition(str(data.get("condition", "minimal")), fork))
        measured.setdefault(key, []).append(record_cost(data.get("usage")))
    return measured


def judging_estimate(paths: Any, judges: Mapping[str, Any], turns: int, mode: str) -> float:
    """Dollars to judge one conversation by every judge (label → ModelSpec): the mean judgment cost of
    each judge on disk, else prices × expected tokens (a per-turn judge reads the transcript once per turn)."""
    total = 0.0
    for label, spec in judges.items():
        folder = paths.judge_dir(label)
        costs = [usage_of(data.get("usage")).cost_usd for data in
                 latest_lines(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [], "conversation_id").values()
                 if data.get("status", "ok") == "ok"]
        if costs:
            total += sum(costs) / len(costs)
            continue
        calls = turns + 1 if mode == "per-turn" else 1
        transcript = (ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]) * turns
        total += PRIOR_MARGIN * _role_cost(spec, calls * (JUDGE_PROMPT_TOKENS + transcript), calls * JUDGE_ANSWER_TOKENS)
    return total


def folder_budget(limit: float | None, runner: Any, clinicians: Iterable[str], *, patient: str,
                  tracker: str | None = None, judges: Mapping[str, str] | None = None, turns: int = 12,
                  judge_mode: str = "per-turn") -> Budget | None:
    """The budget of an invocation on ``runner``'s folder: what the records already cost counts.
    ``judges`` (label → alias) judge each conversation as it finishes, so its judging is held too."""
    if limit is None:
        return None
    spent, _known = run_folder_spend(runner.paths, runner.manifest.data)
    clinicians = list(clinicians)
    resolved = runner.resolve([*clinicians, patient, *([tracker] if tracker else [])])
    specs = {f"clinician:{alias}": resolved[alias] for alias in clinicians}
    specs["patient"] = resolved[patient]
    if tracker:
        specs["tracker"] = resolved[tracker]
    budget = Budget(limit=limit, spent=spent, measured=measured_costs(runner.paths, clinicians), specs=specs)
    if judges:
        _hold_judging(budget, runner, judges, turns, judge_mode)
    return budget


def judging_budget(limit: float | None, runner: Any, judges: Mapping[str, str], *, judge_mode: str,
                   turns: int | None = None) -> Budget | None:
    """The folder budget of an invocation that only judges (label → alias): what the records already
    cost counts, and each judgment holds its expected cost through a ``JudgingGate``. ``turns`` defaults
    to the run stage's (12 when the folder has none)."""
    if limit is None:
        return None
    spent, _known = run_folder_spend(runner.paths, runner.manifest.data)
    if turns is None:
        run = (runner.manifest.data.get("stages") or {}).get("run") or {}
        turns = int((run.get("config") or {}).get("turns", 12))
    budget = Budget(limit=limit, spent=spent)
    _hold_judging(budget, runner, judges, turns, judge_mode)
    return budget


def _hold_judging(budget: Budget, runner: Any, judges: Mapping[str, str], turns: int, judge_mode: str) -> None:
    resolved = runner.resolve(list(judges.values()))
    budget.judges = len(judges)
    budget.judging_cost = judging_estimate(runner.paths, {label: resolved[alias] for label, alias in judges.items()},
                                           turns, judge_mode)
