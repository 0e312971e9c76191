"""metrics/turn_labels.csv: every judge label in long form, one row per conversation × judge × turn × domain.

Collected in the metrics pass (``TurnLabelRows.add`` has the shape of ``tables.collect``'s ``also``
hook), so the judgments are read once. The latest record per (judge, conversation) wins, as in
every other table. Turn 0 is the patient's opening (it has disclosures but no clinician question).
``hidden`` says whether the domain is one of the profile's hidden domains (the ones coverage counts).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from intake_eval.core.numbers import csv_cell
from intake_eval.core.records import Judgment
from intake_eval.core.store import RunPaths, write_text_atomic
from intake_eval.metrics.figures import TurnLabels

TURN_LABELS_TABLE = "turn_labels"
HEADER_COLUMNS = ("conversation_id", "judge", "clinician", "phenotype", "profile_id", "condition", "patient_mode",
                  "trial", "judge_status")
LABEL_COLUMNS = ("turn", "question_type", "patient_faithful", "domain", "hidden", "asked_about", "disclosed")
TURN_LABEL_COLUMNS = (*HEADER_COLUMNS, *LABEL_COLUMNS)


def header_tuple(judgment: Judgment) -> tuple:
    return (judgment.conversation_id, judgment.judge, judgment.clinician, judgment.phenotype, judgment.profile_id,
            judgment.condition, judgment.patient_mode, judgment.trial, judgment.status)


_BOOL = {True: "true", False: "false"}
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./")


def _csv_line(cells: Sequence[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()


def _safe(text: str) -> str:
    """A cell as the csv module would write it (ids rarely need quoting; check before paying for it)."""
    return text if text and _PLAIN.issuperset(text) else _csv_line([text])[:-1]


class TurnLabelRows:
    """The long-form labels of every judgment seen, kept as one CSV text chunk per judgment (a study
    has a million rows; a string per judgment is a fraction of the memory of a tuple per row)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], str] = {}

    def add(self, judgment: Judgment, labels: Sequence[TurnLabels], hidden: Sequence[str], _figures: Any = None) -> None:
        prefix = _csv_line([csv_cell(v) for v in header_tuple(judgment)])[:-1] + ","
        hidden_set = set(hidden)
        lines = []
        for turn in labels:
            head = f"{prefix}{turn.turn},{_safe(turn.question_type)},{_BOOL[turn.patient_faithful]},"
            for domain, (asked, disclosed) in sorted(turn.domains.items()):
                lines.append(f"{head}{_safe(domain)},{_BOOL[domain in hidden_set]},{_BOOL[asked]},{_BOOL[disclosed]}\n")
        self._by_key[(judgment.judge, judgment.conversation_id)] = "".join(lines)

    def rows(self) -> Iterator[dict[str, Any]]:
        """The rows as dicts of CSV cells, in (judge, conversation) order."""
        for line in csv.reader(io.StringIO(self.text(header=False))):
            yield dict(zip(TURN_LABEL_COLUMNS, line))

    def text(self, header: bool = True) -> str:
        first = ",".join(TURN_LABEL_COLUMNS) + "\n" if header else ""
        return first + "".join(self._by_key[key] for key in sorted(self._by_key))

    def write(self, paths: RunPaths) -> Path:
        target = paths.metrics(TURN_LABELS_TABLE)
        write_text_atomic(target, self.text())
        return target
