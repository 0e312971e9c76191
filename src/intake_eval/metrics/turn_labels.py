"""metrics/turn_labels.parquet (and .csv while it fits a spreadsheet): every judge label in long form, one row
per conversation × judge × turn × domain.

Collected in the metrics pass (``TurnLabelRows.add`` has the shape of ``tables.collect``'s ``also``
hook), so the judgments are read once. The rows stream to Parquet in row groups as judgments arrive, so
memory stays one row group whatever the run's size. The CSV is for people opening the table in a
spreadsheet: it is written, sorted by (judge, conversation), while the table has at most
``SPREADSHEET_ROWS`` rows (a spreadsheet's own limit; a larger CSV could not be opened anyway), and
removed when the table outgrows it. The latest record per (judge, conversation) wins, as in every other
table: the rows of a superseded record (an uncompacted file after a crash) are dropped before the
Parquet file is moved into place. Turn 0 is the patient's opening (it has disclosures but no clinician
question). ``hidden`` says whether the domain is one of the profile's hidden domains (the ones coverage counts).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from intake_eval.core.numbers import csv_cell
from intake_eval.core.records import Judgment
from intake_eval.core.spill import SpilledRows, key_of
from intake_eval.core.store import RunPaths
from intake_eval.metrics.columnar import ParquetRows, parquet_path
from intake_eval.metrics.figures import TurnLabels

TURN_LABELS_TABLE = "turn_labels"
HEADER_COLUMNS = ("conversation_id", "judge", "clinician", "phenotype", "profile_id", "condition", "patient_mode",
                  "trial", "judge_status")
LABEL_COLUMNS = ("turn", "question_type", "patient_faithful", "domain", "hidden", "asked_about", "disclosed")
TURN_LABEL_COLUMNS = (*HEADER_COLUMNS, *LABEL_COLUMNS)
COLUMN_TYPES = {"trial": "int64", "turn": "int64", "patient_faithful": "bool", "hidden": "bool", "asked_about": "bool",
                "disclosed": "bool"}  # every other column is text
SPREADSHEET_ROWS = 1_048_575  # a spreadsheet's row limit, less the header row


def label_tuples(labels: Sequence[TurnLabels], hidden: Sequence[str]) -> list[tuple]:
    """(turn, question type, patient faithful, domain, hidden, asked, disclosed) per turn × labelled domain."""
    hidden_set = set(hidden)
    return [(turn.turn, turn.question_type, turn.patient_faithful, domain, domain in hidden_set, asked, disclosed)
            for turn in labels for domain, (asked, disclosed) in sorted(turn.domains.items())]


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


class _LabelText:
    """A judgment's label rows as CSV lines. The cells after the turn number repeat across judgments (a run
    has few question types and domains), so each distinct run of them is rendered once and reused."""

    LIMIT = 10_000  # distinct texts kept; beyond, the cache starts over (memory stays bounded)

    def __init__(self) -> None:
        self._texts: dict[tuple, str] = {}

    def _text(self, cells: tuple) -> str:
        found = self._texts.get(cells)
        if found is None:
            if len(self._texts) >= self.LIMIT:
                self._texts.clear()
            if len(cells) == 2:  # question type, patient faithful
                found = f"{_safe(cells[0])},{_BOOL[cells[1]]},"
            else:  # domain, hidden, asked about, disclosed
                found = f"{_safe(cells[0])},{_BOOL[cells[1]]},{_BOOL[cells[2]]},{_BOOL[cells[3]]}\n"
            self._texts[cells] = found
        return found

    def lines(self, prefix: str, labels: Sequence[TurnLabels], hidden: Sequence[str]) -> str:
        """The rows of ``label_tuples(labels, hidden)``, each line ``prefix`` then its cells."""
        hidden_set = set(hidden)
        parts: list[str] = []
        for turn in labels:
            head = f"{prefix}{turn.turn},{self._text((turn.question_type, turn.patient_faithful))}"
            for domain, (asked, disclosed) in sorted(turn.domains.items()):
                parts += (head, self._text((domain, domain in hidden_set, asked, disclosed)))
        return "".join(parts)


class TurnLabelRows:
    """The long-form labels of every judgment seen: streamed to Parquet, and, while the table fits a
    spreadsheet, spilled to disk as one CSV text chunk per judgment (core/spill.SpilledRows), so memory holds
    a row group and a batch whatever the run's size."""

    def __init__(self, paths: RunPaths | None = None) -> None:
        self._parquet = ParquetRows(parquet_path(paths.metrics(TURN_LABELS_TABLE)), TURN_LABEL_COLUMNS, COLUMN_TYPES,
                                    head_columns=len(HEADER_COLUMNS)) if paths is not None else None
        self._by_key: SpilledRows | None = SpilledRows.alone("turn-labels", paths.metrics_dir if paths is not None else None)  # key_of(judge, conversation) → its CSV lines
        self._rows_by_key: dict[str, int] = {}  # while the table fits a spreadsheet: bounded by its row limit
        self._rows = 0  # rows of the latest record per key
        self._text = _LabelText()

    def add(self, judgment: Judgment, labels: Sequence[TurnLabels], hidden: Sequence[str], _figures: Any = None) -> None:
        tuples = label_tuples(labels, hidden)
        if self._parquet is not None:
            self._parquet.add((judgment.judge, judgment.conversation_id), tuples, head=header_tuple(judgment))
        if self._by_key is None:
            return  # past a spreadsheet's size: the CSV is not written, whatever comes later
        key = key_of(judgment.judge, judgment.conversation_id)
        self._rows += len(tuples) - self._rows_by_key.get(key, 0)
        self._rows_by_key[key] = len(tuples)
        if self._rows > SPREADSHEET_ROWS:
            self._by_key.close()
            self._by_key = None  # too long for a spreadsheet: Parquet only
            self._rows_by_key = {}
            return
        prefix = _csv_line([csv_cell(v) for v in header_tuple(judgment)])[:-1] + ","
        self._by_key[key] = self._text.lines(prefix, labels, hidden)

    def discard(self) -> None:
        """Drop the partly written Parquet file (the metrics pass failed; nothing in metrics/ changes)."""
        if self._parquet is not None:
            self._parquet.discard()
        self._close_text()

    def _close_text(self) -> None:
        if self._by_key is not None:
            self._by_key.close()

    @property
    def fits_a_spreadsheet(self) -> bool:
        return self._by_key is not None

    def rows(self) -> Iterator[dict[str, Any]]:
        """The rows as dicts of CSV cells, in (judge, conversation) order (while the table fits a spreadsheet)."""
        for chunk in self._chunks():
            for line in csv.reader(io.StringIO(chunk)):
                yield dict(zip(TURN_LABEL_COLUMNS, line))

    def _chunks(self) -> Iterator[str]:
        """Each judgment's CSV lines in (judge, conversation) order."""
        if self._by_key is None:
            raise ValueError(f"turn labels beyond {SPREADSHEET_ROWS:,} rows are kept as Parquet only")
        return self._by_key.sorted_values()

    def text(self, header: bool = True) -> str:
        chunks = self._chunks()
        return (",".join(TURN_LABEL_COLUMNS) + "\n" if header else "") + "".join(chunks)

    def _write_csv(self, target: Path) -> None:
        """``text()`` written to ``target`` a judgment at a time, moved into place at the end."""
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(",".join(TURN_LABEL_COLUMNS) + "\n")
                handle.writelines(self._chunks())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def write(self, paths: RunPaths) -> Path:
        """metrics/turn_labels.parquet (when streaming to it) and the CSV while it fits; the main file's path."""
        target = paths.metrics(TURN_LABELS_TABLE)
        fits = self._by_key is not None
        try:
            if fits:
                self._write_csv(target)
            elif target.exists():
                os.unlink(target)  # an earlier, smaller run's CSV would disagree with the Parquet table
        finally:
            self._close_text()
        if self._parquet is None:
            return target
        written = self._parquet.close()
        return target if fits else written
