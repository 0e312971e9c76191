"""core/lines: a record line reads as json.loads reads it (value and refusal), whichever parser did the work."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from intake_eval.core.lines import ReadStats, iter_json_lines, parse_line

# Lines where a fast parser could differ from the standard library: integers beyond 64 bits (orjson would
# read them as floats), NaN/Infinity, a byte-order mark, lone surrogates, invalid UTF-8, control characters,
# duplicate keys, and ordinary records.
LINES = [
    b'{"conversation_id": "c1", "turns": [{"turn": 1, "patient": "fine"}], "cost_usd": 0.00012}',
    b'{"n": 123456789012345678901234567890}',
    b'{"n": -9223372036854775809}',
    b'{"n": 18446744073709551615}',
    b'{"n": 9223372036854775807, "m": -9223372036854775808}',
    b'{"x": 0.1000000000000000055511151231257827}',
    b'{"x": NaN, "y": Infinity, "z": -Infinity}',
    b'{"x": 1e400}',
    b'\xef\xbb\xbf{"a": 1}',
    b'{"a": "\\ud800"}',
    b'{"a": "\xed\xa0\x80"}',
    b'{"a": "\xff"}',
    b'{"a": "x\x01y"}',
    b'{"a": 1, "a": 2}',
    b'{"a": 1,}',
    b'{"a": 01}',
    b'[1, 2]',
    b'  {"a": -0.0}  \r\n',
    b'{"id": "1234567890123456789012", "n": 5}',
]


def _outcome(read: Any, raw: bytes) -> tuple[str, str]:
    try:
        value = read(raw)
    except ValueError:
        return ("refused", "")
    return ("read", repr(value) + repr(_types(value)))


def _types(value: Any) -> Any:
    """The value's shape with every leaf's type: 10**30 and 1e30 compare equal, their types do not."""
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__


@pytest.mark.parametrize("raw", LINES)
def test_a_line_reads_as_json_loads_reads_it(raw: bytes) -> None:
    assert _outcome(parse_line, raw) == _outcome(json.loads, raw)


def test_a_huge_integer_stays_exact() -> None:
    value = parse_line(b'{"n": 123456789012345678901234567890}')["n"]
    assert isinstance(value, int) and value == 123456789012345678901234567890


def test_nan_is_read_as_the_standard_library_reads_it() -> None:
    assert math.isnan(parse_line(b'{"x": NaN}')["x"])


def test_which_lines_are_corrupt_does_not_change(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    stats = ReadStats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read = list(iter_json_lines(path, stats, model=None))
    expected = []
    for raw in LINES:
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            expected.append(value)
    assert repr(read) == repr(expected)
    assert stats.skipped_corrupt == len(LINES) - len(expected)
    assert len(caught) == stats.skipped_corrupt
