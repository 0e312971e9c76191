"""The metrics pass's on-disk keyed store: the latest value per key wins, entries come back in the order
Python sorts the keys (or their tuples of parts), the folder goes on close, and memory does not grow
with the number of keys."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from intake_eval.metrics.spill import DiskMap, key_of, parts_of


def test_latest_value_wins_and_removal_forgets() -> None:
    store = DiskMap("test")
    try:
        store["a"] = {"n": 1}
        store.flush()  # one value on disk, the next still pending: the pending one is the answer
        store["a"] = {"n": 2}
        assert store.get("a") == {"n": 2}
        store.flush()
        assert store.get("a") == {"n": 2}
        store.remove("a")
        assert "a" not in store
        assert store.get("a", "absent") == "absent"
        store["b"] = None  # a stored None is a value, not an absence
        assert "b" in store
        assert len(store) == 1
    finally:
        store.close()


def test_items_come_in_python_sort_order_of_keys_and_of_parts() -> None:
    pairs = [("judge", "c10"), ("judge", "c2"), ("judge-b", "c1"), ("judg", "zz"), ("é", "a"), ("z", "ä"),
             ("judge", "c2.t1"), ("a b", ""), ("", "x")]
    store = DiskMap("test")
    try:
        for index, (first, second) in enumerate(reversed(pairs)):
            store[key_of(first, second)] = index
        assert [parts_of(key) for key, _group, _value in store.items()] == sorted(pairs)
    finally:
        store.close()


def test_items_by_group_order_groups_then_keys() -> None:
    store = DiskMap("test")
    try:
        rows = [("k3", ("j", "b")), ("k1", ("j", "b")), ("k2", ("j", "a")), ("k0", ("i", "z"))]
        for key, group in rows:
            store.put(key, key.upper(), group=key_of(*group))
        seen = [(parts_of(group), key) for key, group, _value in store.items(by_group=True)]
        assert seen == sorted((group, key) for key, group in rows)
    finally:
        store.close()


def test_close_removes_the_folder(tmp_path: Path) -> None:
    store = DiskMap("test")
    store["x"] = 1
    store.flush()
    folder = store._folder
    assert folder.exists()
    store.close()
    assert not folder.exists()


def test_a_dropped_map_removes_its_folder() -> None:
    store = DiskMap("test")
    store["x"] = 1
    store.flush()
    folder = store._folder
    del store
    gc.collect()
    assert not folder.exists()


def _held_after(keys: int) -> int:
    """Python memory still allocated after ``keys`` entries were written to a map that stays open."""
    gc.collect()
    tracemalloc.start()
    try:
        store = DiskMap("test")
        for index in range(keys):
            store[key_of("judge", f"conversation-{index:07d}")] = ("row", index, float(index))
        held, _peak = tracemalloc.get_traced_memory()
        store.close()
        return held
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_keys() -> None:
    """A dict of these entries would hold ~200 bytes per key: 16 MB more at 80,000 keys than at 2,000."""
    small, large = _held_after(2_000), _held_after(80_000)
    assert large - small < 2_000_000
