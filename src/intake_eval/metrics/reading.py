"""Reading judged records for the metric tables, and writing a CSV: shared by every table writer."""

from __future__ import annotations

import csv
import io
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from intake_eval import SCHEMA_VERSION
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Judgment
from intake_eval.core.store import iter_json_lines, write_text_atomic
from intake_eval.metrics.figures import TurnLabels, turn_labels, turn_labels_from_data


def iter_judgment_labels(path: Path) -> Iterator[tuple[Judgment, list[TurnLabels]]]:
    """Stream (judgment without its turns, its labels). Pydantic validates the record's header
    always and its turns only when they are not already in canonical form (the labels are then
    exactly what the Judgment model would hold); a record it rejects is skipped with a warning."""

    for data in iter_json_lines(path):
        version = data.get("schema_version", 1)
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise IntakeEvalError(
                f"{path}: written by a newer intake-eval (schema_version {version} > {SCHEMA_VERSION}); upgrade to read it")
        labels = turn_labels_from_data(data)
        try:
            if labels is None:
                judgment = Judgment.model_validate(data)
                labels, judgment.turns = turn_labels(judgment), []
            else:
                judgment = Judgment.model_validate({**data, "turns": []})
        except ValidationError:
            warnings.warn(f"{path}: skipping a record that does not match Judgment", stacklevel=2)
            continue
        yield judgment, labels


def format_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) >= 1e-4 or value == 0 else f"{value:.3e}"
    return value


def write_csv(path: Path, columns: Iterable[str], rows: Iterable[dict[str, Any]]) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: format_cell(v) for k, v in row.items()})
    write_text_atomic(path, buffer.getvalue())
    return path
