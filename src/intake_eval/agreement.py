"""Inter-judge agreement: Cohen's κ and raw agreement per label between two judges.

Labels are paired on the same unit: (conversation, turn, domain) for asked_about and disclosed,
(conversation, turn) for patient_faithful and question_type (clinician turns only, since the
opening's type is fixed), and (conversation, domain) for the derived "actively covered" outcome.
Only conversations both judges labelled successfully are compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from intake_eval.metrics import actively_covered_domains
from intake_eval.records import Judgment

LABELS: tuple[str, ...] = ("asked_about", "disclosed", "patient_faithful", "question_type", "actively_covered")


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """κ = (p_o − p_e) / (1 − p_e). None when undefined (no pairs, or both judges used one
    identical label throughout so chance agreement is already 1)."""
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} vs {len(b)})")
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(a, b) if x == y) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if expected == 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def raw_agreement(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} vs {len(b)})")
    return sum(1 for x, y in zip(a, b) if x == y) / len(a) if a else None


def judgment_units(judgment: Judgment, hidden: Sequence[str]) -> dict[str, dict[tuple, Hashable]]:
    """Every label of one judgment keyed by its unit, so two judges' labels can be paired."""
    units: dict[str, dict[tuple, Hashable]] = {label: {} for label in LABELS}
    for turn in judgment.turns:
        for domain in hidden:
            label = turn.domains.get(domain)
            if label is not None:
                units["asked_about"][(turn.turn, domain)] = label.asked_about
                units["disclosed"][(turn.turn, domain)] = label.disclosed
        units["patient_faithful"][(turn.turn,)] = turn.patient_faithful
        if turn.turn >= 1:
            units["question_type"][(turn.turn,)] = turn.question_type
    covered = actively_covered_domains(judgment, hidden)
    for domain in hidden:
        units["actively_covered"][(domain,)] = domain in covered
    return units


@dataclass
class PairedLabels:
    """Accumulates paired labels of two judges across conversations (a few bytes per label)."""

    a: dict[str, list[Hashable]]
    b: dict[str, list[Hashable]]
    conversations: int = 0

    @classmethod
    def empty(cls) -> "PairedLabels":
        return cls({label: [] for label in LABELS}, {label: [] for label in LABELS})

    def add(self, units_a: dict[str, dict[tuple, Hashable]], units_b: dict[str, dict[tuple, Hashable]]) -> None:
        self.conversations += 1
        for label in LABELS:
            for key in sorted(units_a[label].keys() & units_b[label].keys(), key=repr):
                self.a[label].append(units_a[label][key])
                self.b[label].append(units_b[label][key])


@dataclass(frozen=True)
class AgreementRow:
    label: str
    n: int
    raw_agreement: float | None
    kappa: float | None
    prevalence_a: float | None  # share of True (or of the most common type) for judge a
    prevalence_b: float | None


def _prevalence(values: Sequence[Hashable]) -> float | None:
    if not values:
        return None
    if all(isinstance(v, bool) for v in values):
        return sum(values) / len(values)
    return Counter(values).most_common(1)[0][1] / len(values)


def agreement_rows(pairs: PairedLabels) -> list[AgreementRow]:
    rows = []
    for label in LABELS:
        a, b = pairs.a[label], pairs.b[label]
        rows.append(AgreementRow(label, len(a), raw_agreement(a, b), cohen_kappa(a, b), _prevalence(a), _prevalence(b)))
    return rows
