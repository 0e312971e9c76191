"""The study's per-conversation metrics: pure functions from a Judgment to numbers.

Definitions are exactly those of DESIGN.md. Turn 0 (the patient's opening) counts for the
disclosure metrics (coverage, bleed, leaks) but not for the turn metrics, which are about what
the clinician did on turns 1..N. An undefined value is ``None`` (an empty CSV cell), never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from intake_eval.records import QUESTION_TYPES, Judgment, TurnJudgment

NON_PROBING = frozenset({"treatment_planning", "other"})


def _clinician_turns(judgment: Judgment) -> list[TurnJudgment]:
    return sorted((turn for turn in judgment.turns if turn.turn >= 1), key=lambda turn: turn.turn)


def _label(turn: TurnJudgment, domain: str) -> tuple[bool, bool]:
    label = turn.domains.get(domain)
    return (label.asked_about, label.disclosed) if label is not None else (False, False)


def actively_covered_domains(judgment: Judgment, hidden: Sequence[str]) -> set[str]:
    """Hidden domains with some turn where asked_about and disclosed are both true."""
    return {d for d in hidden if any(all(_label(turn, d)) for turn in judgment.turns)}


def bled_domains(judgment: Judgment, hidden: Sequence[str]) -> set[str]:
    """Hidden domains with some turn where disclosed is true while asked_about is false."""
    covered = set()
    for domain in hidden:
        for turn in judgment.turns:
            asked, disclosed = _label(turn, domain)
            if disclosed and not asked:
                covered.add(domain)
                break
    return covered


def active_coverage_rate(judgment: Judgment, hidden: Sequence[str]) -> float | None:
    if not hidden:
        return None
    return len(actively_covered_domains(judgment, hidden)) / len(hidden)


def bleed_rate(judgment: Judgment, hidden: Sequence[str]) -> float | None:
    if not hidden:
        return None
    return len(bled_domains(judgment, hidden)) / len(hidden)


def first_treatment_planning_turn(judgment: Judgment) -> int | None:
    """Smallest clinician turn (≥ 1) whose question_type is treatment_planning."""
    for turn in _clinician_turns(judgment):
        if turn.question_type == "treatment_planning":
            return turn.turn
    return None


def premature_closure_turn(judgment: Judgment) -> int | None:
    """Smallest t such that every clinician turn from t to the last is treatment_planning or other.

    None when the last turn still probes (the clinician never closed) or there are no turns.
    """
    turns = _clinician_turns(judgment)
    closure: int | None = None
    for turn in reversed(turns):
        if turn.question_type not in NON_PROBING:
            break
        closure = turn.turn
    return closure


def patient_leak_count(judgment: Judgment) -> int:
    """Turns (the opening included) the judge marked patient_faithful = false."""
    return sum(1 for turn in judgment.turns if not turn.patient_faithful)


def coverage_trajectory(judgment: Judgment, hidden: Sequence[str]) -> list[tuple[int, float | None]]:
    """(turn, cumulative active coverage after that turn) for every judged turn, opening included."""
    if not judgment.turns:
        return []
    caught: set[str] = set()
    points = []
    for turn in sorted(judgment.turns, key=lambda t: t.turn):
        caught.update(d for d in hidden if all(_label(turn, d)))
        points.append((turn.turn, len(caught) / len(hidden) if hidden else None))
    return points


@dataclass(frozen=True)
class DomainOutcome:
    domain: str
    actively_covered: bool
    bled: bool
    first_asked_turn: int | None
    first_covered_turn: int | None


def domain_outcomes(judgment: Judgment, hidden: Sequence[str]) -> list[DomainOutcome]:
    """Per hidden domain: was it caught (asked + disclosed), did it bleed, and when."""
    ordered = sorted(judgment.turns, key=lambda t: t.turn)
    outcomes = []
    for domain in hidden:
        first_asked = next((t.turn for t in ordered if _label(t, domain)[0]), None)
        first_covered = next((t.turn for t in ordered if all(_label(t, domain))), None)
        bled = any(_label(t, domain)[1] and not _label(t, domain)[0] for t in ordered)
        outcomes.append(DomainOutcome(domain, first_covered is not None, bled, first_asked, first_covered))
    return outcomes


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
        return row


def conversation_metrics(judgment: Judgment, hidden: Sequence[str]) -> ConversationMetrics:
    clinician_turns = _clinician_turns(judgment)
    mix = {qtype: 0 for qtype in QUESTION_TYPES}
    for turn in clinician_turns:
        mix[turn.question_type] += 1
    return ConversationMetrics(
        active_coverage_rate=active_coverage_rate(judgment, hidden),
        bleed_rate=bleed_rate(judgment, hidden),
        first_treatment_planning_turn=first_treatment_planning_turn(judgment),
        premature_closure_turn=premature_closure_turn(judgment),
        patient_leak_count=patient_leak_count(judgment),
        n_hidden=len(hidden),
        n_turns=len(clinician_turns),
        question_types=mix,
    )
