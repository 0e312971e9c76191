"""The report's spilled rows read back exactly what was put, with dict semantics (latest put wins, a key keeps
its first position), walk keys in Python's sorted order, are readable from a forked process, and are gone
once closed. And the report holds no Python object per conversation: what load_run keeps in memory does not
grow with the number of conversations."""

from __future__ import annotations

import multiprocessing
import tracemalloc
from pathlib import Path

import pytest

from intake_eval.report.spill import (
    SpilledLocations,
    SpilledRows,
    SpilledSet,
    SpillStore,
)


@pytest.fixture
def store():
    spill = SpillStore()
    yield spill
    spill.close()


def test_rows_read_back_as_put_latest_wins_in_first_position(store: SpillStore):
    rows = SpilledRows(store)
    rows.put("c1", {"clinician": "x", "status": "ok", "usage": {"patient": {"cost_usd": 0.1 + 0.2, "cost_known": True}}})
    rows.put("c2", {"clinician": "y", "trial": None, "hidden": ["a", "b"]})
    rows.put("c1", {"clinician": "x", "n_turns": 12})  # a later line supersedes, keeping c1 first
    rows.put("c3", 0.3333333333333333)
    assert list(rows) == ["c1", "c2", "c3"] and len(rows) == 3 and "c2" in rows and "c9" not in rows and 5 not in rows
    assert rows["c1"] == {"clinician": "x", "n_turns": 12}
    assert rows["c2"] == {"clinician": "y", "trial": None, "hidden": ["a", "b"]}
    assert rows["c3"] == 0.3333333333333333
    assert rows.get("c9", {}) == {} and None not in rows
    assert list(rows.items()) == [(key, rows[key]) for key in rows]
    assert list(rows.values()) == [rows[key] for key in rows]


def test_floats_and_odd_text_survive_exactly(store: SpillStore):
    rows = SpilledRows(store)
    values = [0.1 + 0.2, 1e-300, 123456789.123456789, float("inf"), -0.0, 2**62, "ünïcode </script>", "\ud800"]
    rows.put("k", {"v": values})
    back = rows["k"]["v"]
    assert [repr(v) for v in back] == [repr(v) for v in values]


def test_sorted_items_follow_python_str_order(store: SpillStore):
    rows = SpilledRows(store)
    keys = ["p10", "p1", "P2", "é", "e", "z\x01", "z", "a-b", "a", "日本", "~"]
    for key in keys:
        rows.put(key, {"k": key})
    assert [key for key, _ in rows.sorted_items()] == sorted(keys)
    members = SpilledSet(store)
    for key in keys + keys:
        members.add(key)
    assert list(members.sorted_keys()) == sorted(keys) and len(members) == len(keys) and "z" in members


def test_locations_move_to_the_later_record(store: SpillStore):
    at = SpilledLocations(store)
    at["c1"] = (0, 10, 5)
    at["c2"] = (1, 0, 7)
    at["c1"] = (2, 99, 3)
    assert list(at) == ["c1", "c2"] and at["c1"] == (2, 99, 3) and at.get("c3") is None


_INHERITED: dict[str, SpilledRows] = {}  # handed to the forked workers by fork itself, like the report's shard inputs


def _read_in_child(key: str) -> object:
    return _INHERITED["rows"][key]


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_process_reads_the_rows_through_its_own_connection(store: SpillStore):
    rows = SpilledRows(store)
    for i in range(50):
        rows.put(f"c{i}", {"i": i})
    store.commit()
    before = store.connection()
    _INHERITED["rows"] = rows
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            assert pool.map(_read_in_child, [f"c{i}" for i in range(50)]) == [{"i": i} for i in range(50)]
    finally:
        _INHERITED.clear()
    assert store.connection() is before and rows["c7"] == {"i": 7}  # the parent's connection is untouched


def test_close_removes_the_file():
    spill = SpillStore()
    SpilledRows(spill).put("k", {})
    spill.commit()
    assert spill.path.exists()
    spill.close()
    assert not spill.path.parent.exists()


def _held_bytes(root: Path) -> int:
    """Bytes of Python objects load_run leaves held (traced), records read back by the run's Mappings."""
    from intake_eval.core.store import RunPaths
    from intake_eval.report.load import load_run

    tracemalloc.start()
    try:
        data = load_run(RunPaths(root), refresh=False)
        try:
            held = tracemalloc.get_traced_memory()[0]
            assert len(data.conversations) > 0 and sum(1 for _ in data.conversations.values()) == len(data.conversations)
        finally:
            data.close()
    finally:
        tracemalloc.stop()
    return held


def test_what_the_report_holds_does_not_grow_with_the_conversations(tmp_path: Path):
    """Five times the conversations: the slim rows held as dicts (main's CompactRows) would add ~1 kB each; held in
    the spill file they add nothing but SQLite's bounded page cache."""
    from tests.helpers.report_runs import synth_run

    small = synth_run(tmp_path / "small", n_profiles=20, clinicians=("offline/screener", "offline/anchored"))
    large = synth_run(tmp_path / "large", n_profiles=100, clinicians=("offline/screener", "offline/anchored"))
    _held_bytes(small.root)  # warm-up: imports and caches are not the run's
    grown = _held_bytes(large.root) - _held_bytes(small.root)
    per_conversation = grown / (2 * (100 - 20))
    assert per_conversation < 100, f"{per_conversation:.0f} bytes held per extra conversation"


def test_a_store_left_open_is_removed_when_collected():
    import gc

    spill = SpillStore()
    SpilledRows(spill).put("k", {})
    folder = spill.path.parent
    assert folder.exists()
    del spill
    gc.collect()
    assert not folder.exists()
