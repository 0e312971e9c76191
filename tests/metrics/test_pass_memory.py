"""The metrics pass holds nothing per conversation or judgment: what it keeps in Python memory when its one
pass over the records ends does not grow with the run beyond a few bytes a judgment (the latest-wins digests),
once its buffers (row groups, spill batches, recent profiles) are made small."""

from __future__ import annotations

import functools
import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from intake_eval.core import spill
from intake_eval.core.store import RunPaths
from intake_eval.metrics import clinical, collect, columnar, tables, turn_labels
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.report_runs import synth_run

# main's pass kept a decoded profile, a conversation's facts, index entries and rows per conversation:
# several kB each; the digests ParquetRows keeps for latest-wins are 24 bytes a judgment and table
BYTES_PER_CONVERSATION = 1_000


def _held_at_end_of_pass(root: Path, n_profiles: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(Python memory held when the pass has read every record, conversations in the run)."""
    paths = synth_run(root, n_profiles=n_profiles, clinicians=("offline/screener", "offline/anchored"))
    held: list[int] = []

    def measure(*_args: Any, **_kwargs: Any) -> dict[str, Path]:
        gc.collect()
        held.append(tracemalloc.get_traced_memory()[0])
        return {}

    monkeypatch.setattr(tables, "_write_tables", measure)
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tables.write_metrics(RunPaths(paths.root), stage_kinds())
    finally:
        tracemalloc.stop()
    return held[0] - start, 2 * n_profiles


def test_the_pass_holds_nothing_per_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "_JUDGMENT_ROWS", 5)
    monkeypatch.setattr(collect, "_LONG_ROWS", 11)
    monkeypatch.setattr(collect._KeyTexts, "LIMIT", 4)
    monkeypatch.setattr(spill, "BATCH", 8)
    monkeypatch.setattr(spill, "AHEAD", 8)
    monkeypatch.setattr(clinical.RowCollector, "RECENT_PROFILES", 4)
    monkeypatch.setattr(turn_labels, "ParquetRows", functools.partial(columnar.ParquetRows, row_group_rows=11))
    monkeypatch.setattr(turn_labels, "SPREADSHEET_ROWS", 50)  # past a spreadsheet's size: its CSV text goes too
    _held_at_end_of_pass(tmp_path / "warm-up", 3, monkeypatch)  # what is loaded once (modules, the catalog)
    small, small_conversations = _held_at_end_of_pass(tmp_path / "small", 15, monkeypatch)
    large, large_conversations = _held_at_end_of_pass(tmp_path / "large", 75, monkeypatch)
    per_conversation = (large - small) / (large_conversations - small_conversations)
    assert per_conversation < BYTES_PER_CONVERSATION, f"{per_conversation:.0f} bytes held per conversation"
