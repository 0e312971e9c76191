"""report/load.py: record lines read back for the viewer shards (``parse_record``: always json.loads' result) and
spilled tables walked in key order beside another walk (``in_key_order``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intake_eval.core.spill import SpilledRows, SpillStore
from intake_eval.report.load import in_key_order, parse_record


@pytest.mark.parametrize("line", [
    b'{"conversation_id":"c1","turns":[{"turn":1,"clinician":"How are you?"}],"trial":0}\n',
    b'{"a":18446744073709551616,"b":-9223372036854775809}\n',  # beyond 64 bits: orjson would make them floats
    b'{"a":12345678901234567890123}\n',
    b'{"a":"order 1234567890123456789012 in a text"}\n',
    b'{"a":NaN,"b":Infinity,"c":-Infinity}\n',  # orjson refuses these
    b'{"a":"\\ud800 lone surrogate"}\n',
    b'{"a":1e400,"b":-0.0,"c":-0,"d":2.2250738585072011e-308}\n',
    b'{"a":1,"a":2,"\\u00e9":"\\u0000"}\n',
])
def test_a_record_line_parses_as_json_loads_parses_it(line: bytes):
    found, expected = parse_record(line), json.loads(line)
    assert repr(found) == repr(expected)  # repr: the same types too (an int stays an int, NaN stays NaN)


def test_a_spilled_table_asked_in_key_order_answers_as_get(tmp_path: Path):
    store = SpillStore("report", tmp_path)
    try:
        rows = SpilledRows(store)
        kept = {f"c{n:03d}": {"n": n} for n in (5, 1, 9, 3, 12, 7)}  # put out of order
        for key, value in kept.items():
            rows.put(key, value)
        asked = sorted({*kept, "c000", "c004", "c010", "c099", "é"})  # absent keys between, before and after
        get = in_key_order(rows)
        assert [get(key) for key in asked] == [kept.get(key) for key in asked]
        assert in_key_order({"a": 1})("a") == 1 and in_key_order({"a": 1})("b") is None  # a plain mapping: its get
    finally:
        store.close()
