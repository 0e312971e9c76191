"""metrics/turn_labels.csv: every judge label in long form, one row per conversation × judge × turn × domain.

Collected in the metrics pass (``TurnLabelRows.add`` has the shape of ``tables.collect``'s ``also``
hook), so the judgments are read once. The latest record per (judge, conversation) wins, as in
every other table. Turn 0 is the patient's opening (it has disclosures but no clinician question).
``hidden`` says whether the domain is one of the profile's hidden domains (the ones coverage counts).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from intake_eval.core.records import Judgment
from intake_eval.core.store import RunPaths
from intake_eval.metrics.figures import TurnLabels
from intake_eval.metrics.reading import write_csv

TURN_LABELS_TABLE = "turn_labels"
HEADER_COLUMNS = ("conversation_id", "judge", "clinician", "phenotype", "profile_id", "condition", "patient_mode",
                  "trial", "judge_status")
LABEL_COLUMNS = ("turn", "question_type", "patient_faithful", "domain", "hidden", "asked_about", "disclosed")
TURN_LABEL_COLUMNS = (*HEADER_COLUMNS, *LABEL_COLUMNS)


def label_tuples(labels: Sequence[TurnLabels], hidden: Sequence[str]) -> list[tuple]:
    """(turn, question type, patient faithful, domain, hidden, asked, disclosed) per turn × labelled domain."""
    hidden_set = set(hidden)
    return [(turn.turn, turn.question_type, turn.patient_faithful, domain, domain in hidden_set, asked, disclosed)
            for turn in labels for domain, (asked, disclosed) in sorted(turn.domains.items())]


def header_tuple(judgment: Judgment) -> tuple:
    return (judgment.conversation_id, judgment.judge, judgment.clinician, judgment.phenotype, judgment.profile_id,
            judgment.condition, judgment.patient_mode, judgment.trial, judgment.status)


class TurnLabelRows:
    """The long-form labels of every judgment seen, kept as tuples (a study has a million of them)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], tuple[tuple, list[tuple]]] = {}

    def add(self, judgment: Judgment, labels: Sequence[TurnLabels], hidden: Sequence[str], _figures: Any = None) -> None:
        self._by_key[(judgment.judge, judgment.conversation_id)] = (header_tuple(judgment), label_tuples(labels, hidden))

    def rows(self) -> Iterator[dict[str, Any]]:
        for key in sorted(self._by_key):
            header, labels = self._by_key[key]
            for label in labels:
                yield dict(zip(TURN_LABEL_COLUMNS, (*header, *label)))

    def write(self, paths: RunPaths) -> Path:
        return write_csv(paths.metrics(TURN_LABELS_TABLE), TURN_LABEL_COLUMNS, self.rows())
