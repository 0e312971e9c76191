"""Reading JSONL record files: every line parsed and validated against the record model of its
file, so a corrupt line and a line of the wrong shape are handled alike: skipped with ``file:line``
and the reason as a warning, counted, and (not being on disk as done) redone on resume.

Lines are parsed by orjson where it gives exactly what ``json.loads`` gives, and by ``json.loads`` otherwise
(``parse_line``), so which lines count as corrupt, and every value read, is the standard library's.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError

from intake_eval.core.schema import SCHEMA_VERSION
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import (
    Conversation,
    Judgment,
    PatientProbe,
    Profile,
    Record,
    RenderFailure,
)

T = TypeVar("T", bound=BaseModel)


@dataclass
class ReadStats:
    lines: int = 0
    skipped_corrupt: int = 0  # not JSON, or JSON that is not a valid record of the file's kind
    truncated_tail: bool = False


@dataclass(frozen=True)
class LineSpan:
    """A byte range of a file that starts a line: from ``begin`` (line ``first_line``) to ``stop`` (None: the end)."""

    begin: int = 0
    first_line: int = 1
    stop: int | None = None


# Which record each run-folder file holds, so every reader validates what it reads (a line of the
# wrong shape is skipped like a corrupt one and redone on resume, never taken as done).
def record_model_of(path: Path) -> type[Record] | None:
    """The record model of a run-folder JSONL file from where it sits, or None (stage log, others)."""
    if path.suffix != ".jsonl":
        return None
    if path.name == "profiles.jsonl":
        return Profile
    if path.name == "render_failures.jsonl":
        return RenderFailure
    if path.parent.name == "conversations":
        return Conversation
    if path.parent.parent.name == "judgments":
        return Judgment
    if path.parent.name == "qc" and path.name.startswith("patient_"):
        return PatientProbe
    return None


_BY_LOCATION: Any = object()  # default: the model from record_model_of


def _invalid_reason(error: ValidationError) -> str:
    if not error.errors():
        return "(top level): invalid"
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


# orjson reads an integer beyond 64 bits as a float (json.loads keeps it exact); such an integer has at
# least 19 digits in a row, so a line holding 19 digits in a row (rare: never in a record we write) goes to
# json.loads. Every line orjson refuses goes there too: NaN and Infinity, a byte-order mark, lone surrogates
# and invalid UTF-8 are json.loads's to accept or refuse.
_DIGITS_ONLY = bytes(ord("0") if chr(byte).isdigit() and byte < 128 else ord("x") for byte in range(256))
_LONG_DIGIT_RUN = b"0" * 19


def parse_line(raw: bytes) -> Any:
    """``json.loads(raw)``: the same value, or the same ValueError, faster for almost every line."""
    if _LONG_DIGIT_RUN not in raw.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def _iter_lines(path: Path, stats: ReadStats, model: type[BaseModel] | None, span: LineSpan | None = None
                ) -> Iterator[tuple[dict[str, Any], BaseModel | None, int, int]]:
    """(dict, validated record or None, byte offset, length) per good line; bad lines skipped with a warning.
    ``span``: only the lines of that byte range, numbered from its first line's number."""
    if not path.exists():
        return
    span = span or LineSpan()
    offset = span.begin
    with open(path, "rb") as handle:
        handle.seek(span.begin)
        for number, raw in enumerate(handle, start=span.first_line):
            if span.stop is not None:  # the file as it was when it was ``stop`` bytes long
                if offset >= span.stop:
                    break
                raw = raw[:span.stop - offset]
            start, offset = offset, offset + len(raw)
            if raw.isspace():  # a blank line (strip would copy every line to learn this)
                continue
            is_tail = not raw.endswith(b"\n")
            try:
                data = parse_line(raw)
                if not isinstance(data, dict):
                    raise ValueError("not an object")
            except ValueError:
                if is_tail:
                    stats.truncated_tail = True
                    warnings.warn(f"{path}: ignoring a half-written last line (a crash mid-write)", stacklevel=4)
                else:
                    stats.skipped_corrupt += 1
                    warnings.warn(f"{path}:{number}: skipping a corrupt line", stacklevel=4)
                continue
            record = None
            if model is not None:
                version = data.get("schema_version", 1)
                if isinstance(version, int) and version > SCHEMA_VERSION:
                    raise IntakeEvalError(f"{path}: written by a newer intake-eval (schema_version {version} > "
                                          f"{SCHEMA_VERSION}); upgrade to read it")
                try:
                    record = model.model_validate(data)
                except ValidationError as error:
                    stats.skipped_corrupt += 1
                    warnings.warn(f"{path}:{number}: skipping a line that is not a valid {model.__name__} record "
                                  f"({_invalid_reason(error)}); rerun its stage to redo it", stacklevel=4)
                    continue
            stats.lines += 1
            yield data, record, start, len(raw)


def _model(path: Path, model: Any) -> type[BaseModel] | None:
    return record_model_of(path) if model is _BY_LOCATION else model


def iter_json_lines(path: Path, stats: ReadStats | None = None, model: Any = _BY_LOCATION) -> Iterator[dict[str, Any]]:
    """Stream dicts from a JSONL file. A corrupt line, or one that is not a valid record of the
    file's kind (``record_model_of``; pass ``model`` to choose), is skipped with a warning and counted."""
    for data, _record, _offset, _length in _iter_lines(path, stats or ReadStats(), _model(path, model)):
        yield data


def iter_json_lines_at(path: Path, stats: ReadStats | None = None, model: Any = _BY_LOCATION,
                       span: LineSpan | None = None) -> Iterator[tuple[dict[str, Any], int, int]]:
    """Like iter_json_lines, with each line's byte offset and length (to read it back later); ``span``: only
    the lines of that byte range (a file's appended tail), as in iter_json_records_in."""
    for data, _record, start, length in _iter_lines(path, stats or ReadStats(), _model(path, model), span):
        yield data, start, length


def iter_records(path: Path, model: type[T], stats: ReadStats | None = None) -> Iterator[T]:
    for _data, record, _offset, _length in _iter_lines(path, stats or ReadStats(), model):
        yield cast(T, record)  # validated against ``model`` by _iter_lines, so never None here


def iter_json_records(path: Path, stats: ReadStats | None = None) -> Iterator[tuple[dict[str, Any], Record | None]]:
    """Like iter_json_lines, with each line's record validated against its file's model (None: no model)."""
    for data, record, _offset, _length in _iter_lines(path, stats or ReadStats(), record_model_of(path)):
        yield data, cast(Record | None, record)


def iter_json_records_in(path: Path, span: LineSpan, stats: ReadStats | None = None
                         ) -> Iterator[tuple[dict[str, Any], Record | None]]:
    """Like iter_json_records, over the lines of ``span`` only (a file's appended tail): the same lines
    are good, corrupt or half-written, with the same warnings, as in a read of the whole file."""
    for data, record, _offset, _length in _iter_lines(path, stats or ReadStats(), record_model_of(path), span):
        yield data, cast(Record | None, record)
