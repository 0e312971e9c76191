"""The spill store reads back exactly what was put, with dict semantics (latest put wins, a key keeps its first
position), walks keys in Python's sorted order (also of tuples of parts, and by group), is readable from a forked
process, goes once closed or dropped, and holds no memory per key. And its two users hold nothing per
conversation: what the report's load_run keeps does not grow with the conversations (the metrics pass's own
check is tests/metrics/test_pass_memory.py)."""

from __future__ import annotations

import gc
import multiprocessing
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from intake_eval.core import spill as spill_module
from intake_eval.core.spill import (
    SpilledLocations,
    SpilledRows,
    SpilledSet,
    SpillStore,
    key_of,
    parts_of,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SpillStore]:
    spill = SpillStore("test", tmp_path)
    yield spill
    spill.close()


def test_rows_read_back_as_put_latest_wins_in_first_position(store: SpillStore) -> None:
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


@pytest.mark.parametrize("batch", [1, 3, 5_000])
def test_latest_wins_across_batches_and_removal_forgets(store: SpillStore, monkeypatch: pytest.MonkeyPatch,
                                                         batch: int) -> None:
    """Whether a key's earlier value is still pending or already on file, the later one is the answer; a key
    removed and put again goes last, as in a dict."""
    monkeypatch.setattr("intake_eval.core.spill.BATCH", batch)
    rows, mirror = SpilledRows(store), {}
    for key, value in [("a", {"n": 1}), ("b", 2), ("a", {"n": 2}), ("c", None), ("d", 4)]:
        rows[key] = mirror[key] = value
    assert rows.get("a") == {"n": 2} and rows["c"] is None and "c" in rows  # a stored None is a value
    rows.discard("b")
    del mirror["b"]
    rows.discard("absent")  # forgetting what is not there is no error
    rows["b"] = mirror["b"] = "back"
    del rows["a"]
    del mirror["a"]
    assert "a" not in rows and rows.get("a", "absent") == "absent"
    with pytest.raises(KeyError):
        del rows["a"]
    rows["a"] = mirror["a"] = "again"
    assert list(rows.items()) == list(mirror.items()) and len(rows) == len(mirror)


def test_floats_and_odd_text_survive_exactly(store: SpillStore) -> None:
    rows = SpilledRows(store)
    values = [0.1 + 0.2, 1e-300, 123456789.123456789, float("inf"), -0.0, 2**62, "ünïcode </script>", "\ud800",
              ("a", 1, 2.5)]
    rows.put("k", {"v": values})
    back = rows["k"]["v"]
    assert [repr(v) for v in back] == [repr(v) for v in values]


def test_sorted_items_follow_python_str_order(store: SpillStore) -> None:
    rows = SpilledRows(store)
    keys = ["p10", "p1", "P2", "é", "e", "z\x01", "z", "a-b", "a", "日本", "~"]
    for key in keys:
        rows.put(key, {"k": key})
    assert [key for key, _ in rows.sorted_items()] == sorted(keys)
    assert [value["k"] for value in rows.sorted_values()] == sorted(keys)
    members = SpilledSet(store)
    for key in keys + keys:
        members.add(key)
    assert list(members.sorted_keys()) == sorted(keys) and len(members) == len(keys) and "z" in members
    assert list(members) == keys  # first-add order


def test_keys_of_parts_sort_as_their_tuples(store: SpillStore) -> None:
    pairs = [("judge", "c10"), ("judge", "c2"), ("judge-b", "c1"), ("judg", "zz"), ("é", "a"), ("z", "ä"),
             ("judge", "c2.t1"), ("a b", ""), ("", "x")]
    rows = SpilledRows(store)
    for index, (first, second) in enumerate(reversed(pairs)):
        rows[key_of(first, second)] = index
    assert [parts_of(key) for key, _value in rows.sorted_items()] == sorted(pairs)


def test_grouped_items_order_groups_then_keys(store: SpillStore) -> None:
    rows = SpilledRows(store)
    entries = [("k3", ("j", "b")), ("k1", ("j", "b")), ("k2", ("j", "a")), ("k0", ("i", "z"))]
    for key, group in entries:
        rows.put(key, key.upper(), group=key_of(*group))
    seen = [(parts_of(group), key, value) for group, key, value in rows.grouped_items()]
    assert seen == sorted((group, key, key.upper()) for key, group in entries)


def test_locations_move_to_the_later_record(store: SpillStore) -> None:
    at = SpilledLocations(store)
    at["c1"] = (0, 10, 5)
    at["c2"] = (1, 0, 7)
    at["c1"] = (2, 99, 3)
    assert list(at) == ["c1", "c2"] and at["c1"] == (2, 99, 3) and at.get("c3") is None


_INHERITED: dict[str, SpilledRows] = {}  # handed to the forked workers by fork itself, like the report's shard inputs


def _read_in_child(key: str) -> object:
    return _INHERITED["rows"][key]


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_process_reads_the_rows_through_its_own_connection(store: SpillStore) -> None:
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
    assert store.path.exists()  # the workers' exit left the parent's folder alone


def test_the_folder_is_hidden_inside_the_given_output_folder(tmp_path: Path) -> None:
    rows = SpilledRows.alone("test", tmp_path / "metrics")  # made when missing
    rows["x"] = 1
    folder = rows._store.path.parent
    assert folder.parent == tmp_path / "metrics" and folder.name.startswith(".intake-eval-test.")
    rows.close()
    assert not folder.exists()


def test_an_output_folder_made_only_to_spill_in_is_not_left_behind(tmp_path: Path) -> None:
    rows = SpilledRows.alone("test", tmp_path / "report")  # a report that fails before writing anything
    rows["x"] = 1
    rows.close()
    assert not (tmp_path / "report").exists()
    (tmp_path / "metrics").mkdir()
    SpilledRows.alone("test", tmp_path / "metrics").close()
    assert (tmp_path / "metrics").is_dir()  # there before: kept


def test_a_folder_left_by_a_killed_process_is_removed_by_the_next_store(tmp_path: Path) -> None:
    import subprocess
    import sys

    left = subprocess.run([sys.executable, "-c", "import os, sys\nfrom pathlib import Path\n"
                           "from intake_eval.core.spill import SpilledRows\n"
                           "rows = SpilledRows.alone('killed', Path(sys.argv[1])); rows['k'] = 1; rows.flush()\n"
                           "print(rows._store.path.parent)\nsys.stdout.flush(); os._exit(0)", str(tmp_path)],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert Path(left).is_dir()  # its process ended without removing it, as a SIGKILL would
    alive = SpilledRows.alone("alive", tmp_path)
    other_host = tmp_path / ".intake-eval-x.another_host.1.abc"
    other_host.mkdir()
    SpilledRows.alone("next", tmp_path).close()
    assert not Path(left).exists()
    assert alive._store.path.parent.is_dir() and other_host.is_dir()  # a live process's, another host's: kept
    alive.close()


def test_a_lookup_sees_pending_and_written_rows(store: SpillStore) -> None:
    rows = SpilledRows(store)
    assert rows.get("k") is None and "k" not in rows
    rows["k"] = 1
    assert rows["k"] == 1
    rows.flush()
    assert rows["k"] == 1 and "j" not in rows


def test_close_removes_the_file(tmp_path: Path) -> None:
    spill = SpillStore("test", tmp_path)
    SpilledRows(spill).put("k", {})
    spill.commit()
    assert spill.path.exists()
    spill.close()
    assert not spill.path.parent.exists()


def test_a_store_left_open_is_removed_when_collected(tmp_path: Path) -> None:
    spill = SpillStore("test", tmp_path)
    SpilledRows(spill).put("k", {})
    spill.commit()
    folder = spill.path.parent
    assert folder.exists()
    del spill
    gc.collect()
    assert not folder.exists()


def test_dropped_rows_remove_their_own_store(tmp_path: Path) -> None:
    rows = SpilledRows.alone("test", tmp_path)
    rows["x"] = 1
    rows.flush()
    folder = rows._store.path.parent
    del rows
    gc.collect()
    assert not folder.exists()


def _held_after(keys: int, parent: Path) -> int:
    """Python memory still allocated after ``keys`` entries were written to rows that stay open."""
    gc.collect()
    tracemalloc.start()
    try:
        rows = SpilledRows.alone("test", parent)
        for index in range(keys):
            rows[key_of("judge", f"conversation-{index:07d}")] = ("row", index, float(index))
        held, _peak = tracemalloc.get_traced_memory()
        rows.close()
        return held
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_keys(tmp_path: Path) -> None:
    """A dict of these entries would hold ~200 bytes per key: 16 MB more at 80,000 keys than at 2,000."""
    small, large = _held_after(2_000, tmp_path), _held_after(80_000, tmp_path)
    assert large - small < 2_000_000


def _held_bytes(root: Path) -> int:
    """Bytes of Python objects load_run leaves held (traced), records read back by the run's Mappings."""
    from intake_eval.core.store import RunPaths
    from intake_eval.report.load import load_run

    tracemalloc.start()
    try:
        paths = RunPaths(root)
        data = load_run(paths, spill_in=paths.report_dir, refresh=False)
        try:
            gc.collect()  # also empties the interpreter's free lists of tuples and dicts: bounded, not the run's
            held = tracemalloc.get_traced_memory()[0]
            assert len(data.conversations) > 0 and sum(1 for _ in data.conversations.values()) == len(data.conversations)
        finally:
            data.close()
    finally:
        tracemalloc.stop()
    return held


def test_what_the_report_holds_does_not_grow_with_the_conversations(tmp_path: Path) -> None:
    """Five times the conversations: the slim rows held as dicts (CompactRows before the spill) would add ~1 kB
    each; held in the spill file they add nothing but each table's bounded batch and SQLite's page cache."""
    from tests.helpers.report_runs import synth_run

    small = synth_run(tmp_path / "small", n_profiles=20, clinicians=("offline/screener", "offline/anchored"))
    large = synth_run(tmp_path / "large", n_profiles=100, clinicians=("offline/screener", "offline/anchored"))
    _held_bytes(small.root)  # warm-up: imports and caches are not the run's
    grown = _held_bytes(large.root) - _held_bytes(small.root)
    per_conversation = grown / (2 * (100 - 20))
    assert per_conversation < 100, f"{per_conversation:.0f} bytes held per extra conversation"


def test_a_working_folder_left_by_a_killed_metrics_pass_is_swept_like_a_spill(tmp_path: Path) -> None:
    import subprocess
    import sys

    from intake_eval.core.spill import spill_folder

    left = subprocess.run([sys.executable, "-c", "import os, sys\nfrom pathlib import Path\n"
                           "from intake_eval.core.spill import spill_folder\n"
                           "print(spill_folder('metrics-pass', Path(sys.argv[1])))\nsys.stdout.flush(); os._exit(0)",
                           str(tmp_path)], capture_output=True, text=True, check=True).stdout.strip()
    assert Path(left).is_dir() and Path(left).parent == tmp_path
    mine = spill_folder("metrics-pass", tmp_path)
    assert not Path(left).exists() and mine.is_dir()


def _walk_counting_queries(rows: SpilledRows, keys: list[str], store: SpillStore) -> tuple[list[Any], int]:
    """The values of ``keys`` looked up in turn, and how many SQL statements the lookups ran."""
    statements: list[str] = []
    store.connection().set_trace_callback(statements.append)
    try:
        found = [rows.get(key) for key in keys]
    finally:
        store.connection().set_trace_callback(None)
    return found, len(statements)


def test_lookups_in_the_tables_order_read_ahead(store: SpillStore) -> None:
    rows = SpilledRows(store, read_ahead=True)
    keys = [f"c{index:05d}" for index in range(2_000)]
    for index, key in enumerate(keys):
        rows[key] = index
    rows.flush()
    found, statements = _walk_counting_queries(rows, keys, store)
    assert found == list(range(2_000))
    assert statements <= 2 * (2_000 // spill_module.AHEAD + 2)  # one lookup per row would be 2,000


def test_lookups_out_of_order_read_no_rows_ahead(store: SpillStore) -> None:
    rows = SpilledRows(store, read_ahead=True)
    keys = [f"c{index:05d}" for index in range(1_000)]
    for index, key in enumerate(keys):
        rows[key] = index
    rows.flush()
    scattered = keys[::-(spill_module.AHEAD + 7)]  # each lookup far from the last: reading ahead would be waste
    found, statements = _walk_counting_queries(rows, scattered, store)
    assert found == [int(key[1:]) for key in scattered]
    assert statements == len(scattered)


def test_rows_read_ahead_never_hide_a_later_write(store: SpillStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lookups, writes and removals mixed at random answer as a dict does, across batches and read-aheads."""
    monkeypatch.setattr(spill_module, "BATCH", 5)
    monkeypatch.setattr(spill_module, "AHEAD", 4)
    rows = SpilledRows(store, read_ahead=True)
    expected: dict[str, int] = {}
    chooser = random.Random(7)
    for step in range(3_000):
        key = f"k{chooser.randrange(40):02d}" if chooser.random() < 0.5 else f"k{step % 40:02d}"
        action = chooser.random()
        if action < 0.3:
            rows[key] = expected[key] = step
        elif action < 0.4:
            rows.discard(key)
            expected.pop(key, None)
        else:
            assert rows.get(key) == expected.get(key), (step, key)
            assert (key in rows) == (key in expected)
    assert dict(rows.items()) == expected


def test_a_table_without_read_ahead_asks_once_per_lookup(store: SpillStore) -> None:
    rows = SpilledRows(store)
    keys = [f"c{index:03d}" for index in range(300)]
    for index, key in enumerate(keys):
        rows[key] = index
    rows.flush()
    found, statements = _walk_counting_queries(rows, keys, store)
    assert found == list(range(300)) and statements == 300
