"""metrics/gc_pace: the metrics pass runs the cycle collector rarely, and gives the caller its thresholds back."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from intake_eval.core.store import RunPaths
from intake_eval.metrics import gc_pace, tables
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.report_runs import synth_run


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_the_thresholds_are_raised_inside_and_restored_after(default_thresholds: tuple[int, int, int]) -> None:
    with gc_pace.fewer_collections():
        assert gc.get_threshold() == gc_pace.PASS_THRESHOLDS
    assert gc.get_threshold() == default_thresholds


def test_the_thresholds_are_restored_when_the_block_fails(default_thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError):
        with gc_pace.fewer_collections():
            raise RuntimeError("the pass failed")
    assert gc.get_threshold() == default_thresholds


def test_a_caller_that_collects_less_often_keeps_its_thresholds() -> None:
    before = gc.get_threshold()
    gc.set_threshold(10**6, 50, 50)
    try:
        with gc_pace.fewer_collections():
            assert gc.get_threshold() == (10**6, 50, 50)
    finally:
        gc.set_threshold(*before)


def test_the_metrics_pass_runs_with_fewer_collections(tmp_path: Path, default_thresholds: tuple[int, int, int],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    paths = synth_run(tmp_path / "run", n_profiles=2, clinicians=("offline/screener",))
    seen: list[tuple[int, int, int]] = []

    def tables_written(*_args: Any, **_kwargs: Any) -> dict[str, Path]:
        seen.append(gc.get_threshold())
        return {}

    monkeypatch.setattr(tables, "_write_tables", tables_written)
    tables.write_metrics(RunPaths(paths.root), stage_kinds())
    assert seen == [gc_pace.PASS_THRESHOLDS]
    assert gc.get_threshold() == default_thresholds
