"""Reading judged records for the metric tables, and writing a CSV (cells by core/numbers.csv_cell): shared by every table writer."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from intake_eval.core.numbers import csv_cell
from intake_eval.core.records import Judgment
from intake_eval.core.fs import named_os_error, remove_quietly
from intake_eval.core.store import iter_records
from intake_eval.metrics.figures import TurnLabels, turn_labels, turn_labels_from_data


class _LabelledJudgment:
    """A judgment line validated once, its turns read straight into labels when they are in the exact form the
    model would accept unchanged (``figures.turn_labels_from_data``: most lines; the rest of the record still
    goes through pydantic), else the whole line through pydantic. Raises pydantic's ValidationError like
    ``Judgment.model_validate``, so the reader skips and names an invalid line as it does any record."""

    @staticmethod
    def model_validate(data: dict[str, Any]) -> tuple[Judgment, list[TurnLabels]]:
        labels = turn_labels_from_data(data)
        if labels is None:
            judgment = Judgment.model_validate(data)
            labels, judgment.turns = turn_labels(judgment), []
            return judgment, labels
        return Judgment.model_validate({**data, "turns": []}), labels


_LabelledJudgment.__name__ = Judgment.__name__  # the reader's warnings name the record kind


def iter_judgment_labels(path: Path) -> Iterator[tuple[Judgment, list[TurnLabels]]]:
    """Stream (judgment without its turns, its labels). Each line is validated once by the reader
    (a line that is not a valid Judgment is skipped there with ``file:line`` and the reason)."""
    reader: Any = _LabelledJudgment  # stands in for the record model: iter_records calls its model_validate
    yield from iter_records(path, reader)


def csv_text(columns: Iterable[str], rows: Iterable[dict[str, Any]]) -> str:
    """The one CSV writer: a header of ``columns``, cells by core/numbers.csv_cell, keys not in ``columns`` ignored."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return buffer.getvalue()


_ROWS_PER_WRITE = 5_000  # rows rendered before their text goes to disk
_AS_IS = frozenset({str, int})  # cells csv_cell gives back unchanged (bool is not int here: it becomes "true")


def _csv_cells(row: Sequence[Any]) -> list[Any]:
    """``csv_cell`` of each value; a text or integer cell (most of a long table's) skips the call."""
    return [value if value.__class__ in _AS_IS else csv_cell(value) for value in row]


def write_csv(path: Path, columns: Iterable[str], rows: Iterable[dict[str, Any]]) -> Path:
    """``csv_text``'s file, written atomically: every metrics/*.csv, report/headline.csv and the patient-QC
    tables. The text goes to disk a few thousand rows at a time (written as ``write_text_atomic`` writes
    text), so a long table is never held as one string."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    try:
        with named_os_error(path):
            handle = open(tmp, "w", encoding="utf-8")
        with handle:
            for count, row in enumerate(rows, start=1):
                writer.writerow({k: csv_cell(v) for k, v in row.items()})
                if count % _ROWS_PER_WRITE == 0:
                    _drain(buffer, handle, path)
            _drain(buffer, handle, path)
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    return path


def _drain(buffer: io.StringIO, handle: Any, path: Path) -> None:
    with named_os_error(path):
        handle.write(buffer.getvalue())
    buffer.seek(0)
    buffer.truncate()


def write_csv_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """``write_csv``'s bytes for rows given as sequences in ``columns`` order, streamed to disk (a long table
    is never held as one text) and moved into place at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(columns)
            for row in rows:
                writer.writerow(_csv_cells(row))
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    return path
