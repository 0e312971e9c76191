"""metrics/turn_labels.parquet: the long-form labels streamed in row groups, equal to the CSV while the CSV
is written, the latest record per key winning, and Parquet only once the table outgrows a spreadsheet."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import intake_eval
from intake_eval.core.store import RunPaths
from intake_eval.metrics import columnar, turn_labels
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.report_runs import synth_run


@pytest.fixture
def synth(tmp_path: Path) -> RunPaths:
    return synth_run(tmp_path / "run", n_profiles=6, judge_errors=1)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    keys = ["judge", "conversation_id", "turn", "domain"]
    return frame.sort_values(keys).reset_index(drop=True)


def test_parquet_holds_the_rows_of_the_csv(synth: RunPaths) -> None:
    write_metrics(synth, stage_kinds())
    from_csv = pd.read_csv(synth.metrics("turn_labels"), keep_default_na=False, dtype={"trial": "int64"})
    from_parquet = pd.read_parquet(synth.metrics_dir / "turn_labels.parquet")
    assert list(from_parquet.columns) == list(turn_labels.TURN_LABEL_COLUMNS)
    assert len(from_parquet) == len(from_csv) > 0
    pd.testing.assert_frame_equal(_sorted(from_parquet), _sorted(from_csv), check_dtype=False)


def test_a_superseded_judgment_leaves_no_rows(synth: RunPaths) -> None:
    write_metrics(synth, stage_kinds())
    before = pd.read_parquet(synth.metrics_dir / "turn_labels.parquet")
    judgments = synth.judgment_files()[0]
    first_line = judgments.read_text(encoding="utf-8").splitlines()[0]
    with judgments.open("a", encoding="utf-8") as handle:  # an uncompacted file: the same judgment again
        handle.write(first_line + "\n")
    write_metrics(synth, stage_kinds())
    after = pd.read_parquet(synth.metrics_dir / "turn_labels.parquet")
    assert len(after) == len(before)
    pd.testing.assert_frame_equal(_sorted(after), _sorted(before))


def test_beyond_a_spreadsheet_only_parquet_is_kept(synth: RunPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    write_metrics(synth, stage_kinds())
    rows = len(pd.read_csv(synth.metrics("turn_labels")))
    monkeypatch.setattr(turn_labels, "SPREADSHEET_ROWS", rows - 1)
    monkeypatch.setattr(columnar, "ROW_GROUP_ROWS", 50)  # several row groups
    write_metrics(synth, stage_kinds())
    assert not synth.metrics("turn_labels").exists()  # the earlier CSV would disagree; it is gone
    table = synth.metrics_dir / "turn_labels.parquet"
    assert len(pd.read_parquet(table)) == rows
    run = intake_eval.load_run(synth.root, refresh=False)
    assert len(run.turn_labels) == rows and "arm" in run.turn_labels.columns
    assert run.dataset("turn_labels").count_rows() == rows


def test_a_failed_pass_leaves_no_partial_file(synth: RunPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk gone")

    monkeypatch.setattr(columnar, "ROW_GROUP_ROWS", 10)
    monkeypatch.setattr("intake_eval.metrics.tables.agreement_table", broken)
    with pytest.raises(RuntimeError):
        write_metrics(synth, stage_kinds())
    assert sorted(p.name for p in synth.metrics_dir.glob("*turn_labels*")) == []
