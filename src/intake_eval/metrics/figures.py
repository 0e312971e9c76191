"""The study's per-conversation metrics: pure functions from a Judgment to numbers.

Definitions are exactly those of DESIGN.md. Turn 0 (the patient's opening) counts for the
disclosure metrics (coverage, bleed, leaks) but not for the turn metrics, which are about what
the clinician did on turns 1..N. An undefined value is ``None`` (an empty CSV cell), never 0.

Every definition is written once, over ``TurnLabels`` (a judgment's labels, turns in order).
``turn_labels(judgment)`` builds them from a validated record; ``turn_labels_from_data`` from a
record's JSON dict when it is already in canonical form (the metrics writer's fast path, which
skips pydantic for the tens of thousands of judgments of a study).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from intake_eval.core.records import QUESTION_TYPES, Judgment

NON_PROBING = frozenset({"treatment_planning", "other"})
_QTYPES = frozenset(QUESTION_TYPES)
_NO_LABEL = (False, False)


class TurnLabels(NamedTuple):
    """One judged turn: domain -> (asked_about, disclosed). A tuple: tens of thousands are built per table."""

    turn: int
    question_type: str
    patient_faithful: bool
    domains: dict[str, tuple[bool, bool]]


def turn_labels(judgment: Judgment) -> list[TurnLabels]:
    """The judgment's turns sorted by turn number (stable), labels as (asked_about, disclosed)."""
    return [TurnLabels(t.turn, t.question_type, t.patient_faithful,
                       {d: (label.asked_about, label.disclosed) for d, label in t.domains.items()})
            for t in sorted(judgment.turns, key=lambda t: t.turn)]


def turn_labels_from_data(data: dict[str, Any]) -> list[TurnLabels] | None:
    """Labels straight from a judgment's JSON dict, or None when any field is not in the exact
    form the Judgment model would accept unchanged (then validate it with pydantic instead)."""
    turns = data.get("turns", [])
    if turns.__class__ is not list:
        return None
    out = []
    for t in turns:
        if t.__class__ is not dict:
            return None
        number, qtype, faithful, domains = t.get("turn"), t.get("question_type"), t.get("patient_faithful", True), t.get("domains")
        if (number.__class__ is not int or qtype not in _QTYPES or faithful.__class__ is not bool
                or domains.__class__ is not dict or t.get("reasoning", "").__class__ is not str):
            return None
        labels = {}
        for domain, label in domains.items():
            if label.__class__ is not dict:
                return None
            asked, disclosed = label.get("asked_about"), label.get("disclosed")
            if not isinstance(asked, bool) or not isinstance(disclosed, bool) or label.get("reasoning", "").__class__ is not str:
                return None
            labels[domain] = (asked, disclosed)
        out.append(TurnLabels(number, qtype, faithful, labels))
    out.sort(key=_turn_number)
    return out


def _turn_number(turn: TurnLabels) -> int:
    return turn.turn


# ---------------------------------------------------------------- definitions (over TurnLabels)

@dataclass(frozen=True)
class DomainOutcome:
    domain: str
    actively_covered: bool
    bled: bool
    first_asked_turn: int | None
    first_covered_turn: int | None
    first_disclosed_turn: int | None = None
    leaked: bool = False  # the first turn that disclosed it did not ask about it


@dataclass(frozen=True)
class ConversationMetrics:
    active_coverage_rate: float | None
    bleed_rate: float | None
    first_treatment_planning_turn: int | None
    premature_closure_turn: int | None
    patient_leak_count: int
    n_hidden: int
    n_turns: int
    question_types: dict[str, int] = field(default_factory=dict)
    leak_adjusted_active_coverage_rate: float | None = None
    overshared: bool = False

    def as_row(self) -> dict[str, object]:
        row: dict[str, object] = {
            "active_coverage_rate": self.active_coverage_rate,
            "bleed_rate": self.bleed_rate,
            "first_treatment_planning_turn": self.first_treatment_planning_turn,
            "premature_closure_turn": self.premature_closure_turn,
            "patient_leak_count": self.patient_leak_count,
            "n_hidden": self.n_hidden,
            "n_turns": self.n_turns,
        }
        row.update({f"n_{qtype}": self.question_types.get(qtype, 0) for qtype in QUESTION_TYPES})
        row["leak_adjusted_active_coverage_rate"] = self.leak_adjusted_active_coverage_rate
        row["overshared"] = self.overshared
        return row


@dataclass(frozen=True)
class Figures:
    """Everything the metrics tables need from one judgment, computed in one pass."""

    metrics: ConversationMetrics
    outcomes: list[DomainOutcome]
    trajectory: list[tuple[int, float | None]]
    covered: set[str]


class _Scan(NamedTuple):
    first_asked: int | None
    covered_at: int | None  # index (not turn number) of the first asked-and-disclosed turn
    bled: bool
    first_disclosed: int | None
    leaked: bool


def _domain_scan(turns: Sequence[TurnLabels], domain: str) -> _Scan:
    """One pass over the turns for one domain: when it was first asked, caught and disclosed."""
    first_asked = covered_at = first_disclosed = None
    bled = leaked = False
    for index, turn in enumerate(turns):
        asked, disclosed = turn.domains.get(domain, _NO_LABEL)
        if asked and first_asked is None:
            first_asked = turn.turn
        if asked and disclosed and covered_at is None:
            covered_at = index
        if disclosed and first_disclosed is None:
            first_disclosed, leaked = turn.turn, not asked
        bled = bled or (disclosed and not asked)
    return _Scan(first_asked, covered_at, bled, first_disclosed, leaked)


def leak_adjusted_coverage(outcomes: Sequence[DomainOutcome]) -> float | None:
    """Active coverage over the hidden domains the patient did not leak (first disclosure unasked):
    leaked domains leave numerator and denominator. None when every domain leaked (or none hidden)."""
    kept = [o for o in outcomes if not o.leaked]
    return sum(o.actively_covered for o in kept) / len(kept) if kept else None


def first_treatment_planning(turns: Sequence[TurnLabels]) -> int | None:
    """Smallest clinician turn (≥ 1) whose question_type is treatment_planning."""
    return next((t.turn for t in turns if t.turn >= 1 and t.question_type == "treatment_planning"), None)


def last_clinician_turn(turns: Sequence[TurnLabels]) -> int:
    """The last judged clinician turn (0 when the clinician never spoke): where time-to-event
    curves censor a conversation."""
    return max((t.turn for t in turns if t.turn >= 1), default=0)


def premature_closure(turns: Sequence[TurnLabels]) -> int | None:
    """Smallest t such that every clinician turn from t to the last is treatment_planning or other.

    None when the last turn still probes (the clinician never closed) or there are no turns.
    """
    closure: int | None = None
    for turn in reversed([t for t in turns if t.turn >= 1]):
        if turn.question_type not in NON_PROBING:
            break
        closure = turn.turn
    return closure


def figures(turns: Sequence[TurnLabels], hidden: Sequence[str]) -> Figures:
    """Coverage (raw and leak-adjusted), bleed, turn metrics, per-domain outcomes and the coverage trajectory."""
    scans = {domain: _domain_scan(turns, domain) for domain in dict.fromkeys(hidden)}
    covered = {d for d, scan in scans.items() if scan.covered_at is not None}
    bled = {d for d, scan in scans.items() if scan.bled}
    by_domain = {d: DomainOutcome(d, scan.covered_at is not None, scan.bled, scan.first_asked,
                                  turns[scan.covered_at].turn if scan.covered_at is not None else None,
                                  scan.first_disclosed, scan.leaked)
                 for d, scan in scans.items()}
    outcomes = [by_domain[d] for d in hidden]
    caught_by = [0] * (len(turns) + 1)
    for scan in scans.values():
        if scan.covered_at is not None:
            caught_by[scan.covered_at] += 1
    trajectory, caught = [], 0
    for index, turn in enumerate(turns):
        caught += caught_by[index]
        trajectory.append((turn.turn, caught / len(hidden) if hidden else None))
    clinician = [t for t in turns if t.turn >= 1]
    mix = {qtype: 0 for qtype in QUESTION_TYPES}
    for turn in clinician:
        mix[turn.question_type] += 1
    metrics = ConversationMetrics(
        active_coverage_rate=len(covered) / len(hidden) if hidden else None,
        bleed_rate=len(bled) / len(hidden) if hidden else None,
        first_treatment_planning_turn=first_treatment_planning(turns),
        premature_closure_turn=premature_closure(turns),
        patient_leak_count=sum(1 for t in turns if not t.patient_faithful),
        n_hidden=len(hidden), n_turns=len(clinician), question_types=mix,
        leak_adjusted_active_coverage_rate=leak_adjusted_coverage(outcomes),
        overshared=any(scan.leaked for scan in scans.values()),
    )
    return Figures(metrics, outcomes, trajectory, covered)


# ---------------------------------------------------------------- the same, from a Judgment

def bled_domains(judgment: Judgment, hidden: Sequence[str]) -> set[str]:
    """Hidden domains with some turn where disclosed is true while asked_about is false."""
    return {o.domain for o in figures(turn_labels(judgment), hidden).outcomes if o.bled}


def active_coverage_rate(judgment: Judgment, hidden: Sequence[str]) -> float | None:
    return figures(turn_labels(judgment), hidden).metrics.active_coverage_rate


def leak_adjusted_active_coverage_rate(judgment: Judgment, hidden: Sequence[str]) -> float | None:
    return figures(turn_labels(judgment), hidden).metrics.leak_adjusted_active_coverage_rate


def bleed_rate(judgment: Judgment, hidden: Sequence[str]) -> float | None:
    return figures(turn_labels(judgment), hidden).metrics.bleed_rate


def first_treatment_planning_turn(judgment: Judgment) -> int | None:
    return first_treatment_planning(turn_labels(judgment))


def premature_closure_turn(judgment: Judgment) -> int | None:
    return premature_closure(turn_labels(judgment))


def patient_leak_count(judgment: Judgment) -> int:
    """Turns (the opening included) the judge marked patient_faithful = false."""
    return sum(1 for turn in judgment.turns if not turn.patient_faithful)


def coverage_trajectory(judgment: Judgment, hidden: Sequence[str]) -> list[tuple[int, float | None]]:
    """(turn, cumulative active coverage after that turn) for every judged turn, opening included."""
    return figures(turn_labels(judgment), hidden).trajectory


def domain_outcomes(judgment: Judgment, hidden: Sequence[str]) -> list[DomainOutcome]:
    """Per hidden domain: was it caught (asked + disclosed), did it bleed, and when."""
    return figures(turn_labels(judgment), hidden).outcomes


def conversation_metrics(judgment: Judgment, hidden: Sequence[str]) -> ConversationMetrics:
    return figures(turn_labels(judgment), hidden).metrics
