"""Record lines read back for the viewer shards (report/load.py ``parse_record``): always json.loads' result."""

from __future__ import annotations

import json

import pytest

from intake_eval.report.load import parse_record


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
