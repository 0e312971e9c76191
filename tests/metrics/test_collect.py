"""The metrics pass streamed to Parquet: an uncompacted run folder gives the tables of its compacted copy,
metrics/conversations.parquet holds what metrics/conversations.csv says, and a failed pass leaves nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from intake_eval.core.store import RunPaths, compact
from intake_eval.metrics import collect as collect_module
from intake_eval.metrics import columnar
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.report_runs import synth_run


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return synth_run(tmp_path_factory.mktemp("compacted") / "run", n_profiles=12,
                     clinicians=("offline/screener", "offline/anchored", "llama-3.3-70b"),
                     failures=1, judge_errors=1)


def _uncompacted_copy(source: RunPaths, target: Path) -> RunPaths:
    """The same records, each file's lines in reverse order after an earlier, different attempt of every
    other record (a resumed stage appends; the latest line per key wins)."""
    shutil.copytree(source.root, target)
    paths = RunPaths(target)
    for path in [*paths.conversation_files(), *paths.judgment_files()]:
        lines = path.read_text(encoding="utf-8").splitlines()
        earlier = []
        for line in lines[::2]:
            record = json.loads(line)
            if "judge" in record:  # a failed judging attempt, redone later
                record.update(status="judge_error", errors=["turn 3: invalid JSON"], turns=record["turns"][:2])
            else:  # a conversation cut short by a provider error, rerun later
                record.update(status="model_error", turns=record["turns"][:1])
            earlier.append(json.dumps(record))
        path.write_text("\n".join([*earlier, *lines[::-1]]) + "\n", encoding="utf-8")
    return paths


def _tables(paths: RunPaths) -> dict[str, bytes]:
    write_metrics(paths, stage_kinds())
    return {path.name: path.read_bytes() for path in sorted(paths.metrics_dir.iterdir()) if path.suffix == ".csv"}


def _parquet(paths: RunPaths, name: str) -> pd.DataFrame:
    return pd.read_parquet(paths.metrics_dir / f"{name}.parquet")


def test_an_uncompacted_folder_gives_the_tables_of_its_compacted_copy(
        compacted: RunPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # row groups of a few rows: superseded rows are dropped across row groups too
    monkeypatch.setattr(collect_module, "_JUDGMENT_ROWS", 7)
    monkeypatch.setattr(collect_module, "_LONG_ROWS", 11)
    monkeypatch.setattr(columnar, "PART_ROWS", 13)  # the long CSVs sorted a few rows at a time
    expected = _tables(compacted)
    uncompacted = _uncompacted_copy(compacted, tmp_path / "uncompacted")
    assert _tables(uncompacted) == expected
    for name in ("conversations", "domain_events"):
        pd.testing.assert_frame_equal(
            _parquet(uncompacted, name).sort_values(["judge", "conversation_id"], kind="stable").reset_index(drop=True),
            _parquet(compacted, name).sort_values(["judge", "conversation_id"], kind="stable").reset_index(drop=True))
    for path in [*uncompacted.conversation_files(), *uncompacted.judgment_files()]:
        compact(path, "conversation_id")
    assert _tables(uncompacted) == expected


def test_conversations_parquet_holds_what_the_csv_says(compacted: RunPaths) -> None:
    write_metrics(compacted, stage_kinds())
    from_csv = pd.read_csv(compacted.metrics("conversations"))
    table = _parquet(compacted, "conversations").sort_values(["judge", "conversation_id"]).reset_index(drop=True)
    assert list(table.columns) == list(from_csv.columns)
    assert len(table) == len(from_csv) == 2 * (3 * 12 - 3)  # two judges, the failed conversations not judged
    assert str(table["trial"].dtype) == "int64" and str(table["active_coverage_rate"].dtype) == "float64"
    assert set(table["overshared"].dropna()) <= {True, False}
    text = table.replace("", None)  # an empty text cell reads back from the CSV as missing
    for column in from_csv.columns:
        expected, actual = from_csv[column], text[column]
        assert (expected.isna() == actual.isna()).all(), column
        defined = expected.notna()
        if pd.api.types.is_float_dtype(expected) and not pd.api.types.is_bool_dtype(actual.dropna()):
            assert actual[defined].astype(float).round(6).tolist() == expected[defined].round(6).tolist(), column
        else:
            assert actual[defined].astype(str).str.lower().tolist() == \
                expected[defined].astype(str).str.lower().tolist(), column


def test_domain_events_parquet_holds_what_the_csv_says(compacted: RunPaths) -> None:
    write_metrics(compacted, stage_kinds())
    from_csv = pd.read_csv(compacted.metrics("domain_events"))
    table = _parquet(compacted, "domain_events")
    assert list(table.columns) == list(from_csv.columns) and len(table) == len(from_csv) > 0
    assert table["actively_covered"].dtype == bool and str(table["last_turn"].dtype) == "int64"
    ordered = table.sort_values(["judge", "conversation_id"], kind="stable").reset_index(drop=True)
    assert ordered["domain"].tolist() == from_csv["domain"].tolist()
    assert ordered["actively_covered"].tolist() == from_csv["actively_covered"].tolist()


def test_a_failed_pass_leaves_the_earlier_tables_and_no_temporary_folder(
        compacted: RunPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(shutil.copytree(compacted.root, tmp_path / "run"))
    write_metrics(paths, stage_kinds())
    before = (paths.metrics_dir / "conversations.parquet").read_bytes()

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk gone")

    monkeypatch.setattr("intake_eval.metrics.tables.agreement_table", broken)
    with pytest.raises(RuntimeError):
        write_metrics(paths, stage_kinds())
    assert [p.name for p in paths.metrics_dir.iterdir() if p.name.startswith(".")] == []
    assert (paths.metrics_dir / "conversations.parquet").read_bytes() == before
