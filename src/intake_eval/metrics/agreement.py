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

from intake_eval.core.records import Judgment
from intake_eval.metrics.figures import TurnLabels, figures, turn_labels

LABELS: tuple[str, ...] = ("asked_about", "disclosed", "patient_faithful", "question_type", "actively_covered")


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """κ = (p_o − p_e) / (1 − p_e). None when undefined (no pairs, or both judges used one
    identical label throughout so chance agreement is already 1)."""
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} vs {len(b)})")
    return kappa_from_counts(Counter(zip(a, b)))


def kappa_from_counts(joint: Counter) -> float | None:
    """Cohen's κ from the joint counts {(label_a, label_b): n} of paired labels."""
    n = sum(joint.values())
    if n == 0:
        return None
    observed = sum(count for (x, y), count in joint.items() if x == y) / n
    count_a: Counter[object] = Counter()
    count_b: Counter[object] = Counter()
    for (x, y), count in joint.items():
        count_a[x] += count
        count_b[y] += count
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
    turns = turn_labels(judgment)
    return units_from_labels(turns, hidden, figures(turns, hidden).covered)


def units_from_labels(turns: Sequence[TurnLabels], hidden: Sequence[str], covered: set[str]) -> dict[str, dict[tuple, Hashable]]:
    units: dict[str, dict[tuple, Hashable]] = {label: {} for label in LABELS}
    asked_units, disclosed_units = units["asked_about"], units["disclosed"]
    for turn in turns:
        for domain in hidden:
            label = turn.domains.get(domain)
            if label is not None:
                asked_units[(turn.turn, domain)], disclosed_units[(turn.turn, domain)] = label
        units["patient_faithful"][(turn.turn,)] = turn.patient_faithful
        if turn.turn >= 1:
            units["question_type"][(turn.turn,)] = turn.question_type
    for domain in hidden:
        units["actively_covered"][(domain,)] = domain in covered
    return units


@dataclass
class PairedLabels:
    """Joint counts {(label by a, label by b): n} of two judges' labels, per label, across conversations."""

    joint: dict[str, Counter]
    conversations: int = 0

    @classmethod
    def empty(cls) -> "PairedLabels":
        return cls({label: Counter() for label in LABELS})

    def add(self, units_a: dict[str, dict[tuple, Hashable]], units_b: dict[str, dict[tuple, Hashable]]) -> None:
        self.conversations += 1
        for label in LABELS:
            a, b = units_a[label], units_b[label]
            self.joint[label].update((a[key], b[key]) for key in a.keys() & b.keys())


@dataclass(frozen=True)
class AgreementRow:
    label: str
    n: int
    raw_agreement: float | None
    kappa: float | None
    prevalence_a: float | None  # share of True (or of the most common type) for judge a
    prevalence_b: float | None


def _prevalence(counts: Counter) -> float | None:
    n = sum(counts.values())
    if not n:
        return None
    if all(isinstance(v, bool) for v in counts):
        return counts[True] / n
    return counts.most_common(1)[0][1] / n


def agreement_rows(pairs: PairedLabels) -> list[AgreementRow]:
    rows = []
    for label in LABELS:
        joint = pairs.joint[label]
        n = sum(joint.values())
        count_a: Counter[object] = Counter()
        count_b: Counter[object] = Counter()
        for (x, y), count in joint.items():
            count_a[x] += count
            count_b[y] += count
        raw = sum(count for (x, y), count in joint.items() if x == y) / n if n else None
        rows.append(AgreementRow(label, n, raw, kappa_from_counts(joint), _prevalence(count_a), _prevalence(count_b)))
    return rows
