"""CompactRows reads back exactly the dicts put in: latest per key wins in the key's first position, a field a
row lacks stays absent (not None), packed fields round-trip, and repeated short texts are one object."""

from __future__ import annotations

from intake_eval.report.compact_rows import CompactRows, Packing


def test_rows_read_back_as_put():
    rows = CompactRows({"usage": Packing(pack=lambda u: (u["a"], u["b"]), unpack=lambda t: {"a": t[0], "b": t[1]})})
    rows.put("c1", {"clinician": "x", "status": "ok", "usage": {"a": 1, "b": 2.5}})
    rows.put("c2", {"clinician": "y", "trial": None})
    rows.put("c1", {"clinician": "x", "n_turns": 12})  # a later line supersedes, keeping c1 first
    assert list(rows) == ["c1", "c2"] and len(rows) == 2 and "c2" in rows and "c3" not in rows
    assert rows["c1"] == {"clinician": "x", "n_turns": 12}
    assert rows["c2"] == {"clinician": "y", "trial": None}
    assert rows.get("c3", {}) == {}
    rows.put("c3", {"clinician": "".join(["x"]), "usage": {"a": 3, "b": 0.0}})
    assert rows["c3"] == {"clinician": "x", "usage": {"a": 3, "b": 0.0}}
    assert rows["c3"]["clinician"] is rows["c1"]["clinician"]  # one copy of a repeated text
    assert dict(rows.items())["c2"] == rows["c2"]
