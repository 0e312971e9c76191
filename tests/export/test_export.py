"""`intake-eval export` on a real offline demo run folder: every Parquet file reads back with pandas
and holds as many rows as its source (turns, labels, metrics); the `hf` card's front matter parses,
lists files that exist, and `datasets` loads the tables through it; secrets never reach the export;
bad inputs are one line and a non-zero exit, and nothing already written is overwritten."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths, iter_json_lines
from intake_eval.export.columns import LABELS, PROFILES, TURNS
from intake_eval.metrics.turn_labels import TURN_LABEL_COLUMNS


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> RunPaths:
    root = tmp_path_factory.mktemp("export") / "demo"
    result = CliRunner().invoke(app, ["demo", "--run-dir", str(root)])
    assert result.exit_code == 0, result.output
    return RunPaths(root)


def _export(demo: RunPaths, out: Path, fmt: str, *extra: str):
    return CliRunner().invoke(app, ["export", str(demo.root), "--format", fmt, "--out", str(out), *extra])


@pytest.fixture(scope="module")
def exported(demo, tmp_path_factory) -> dict[str, Path]:
    folders = {}
    for fmt in ("parquet", "hf"):
        out = tmp_path_factory.mktemp(f"out_{fmt}") / "dataset"
        result = _export(demo, out, fmt)
        assert result.exit_code == 0, result.output
        folders[fmt] = out
    return folders


def _csv_rows(path: Path) -> int:
    with open(path, newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_every_table_reads_back_with_its_source_row_count(demo, exported, fmt):
    out = exported[fmt]
    index = json.loads((out / "export.json").read_text())
    files = {table["name"]: out / table["file"] for table in index["tables"]}
    frames = {name: pd.read_parquet(path) for name, path in files.items()}
    for table in index["tables"]:
        assert len(frames[table["name"]]) == table["rows"]

    conversations = [c for path in demo.conversation_files() for c in iter_json_lines(path)]
    assert len(frames["profiles"]) == sum(1 for _ in iter_json_lines(demo.profiles)) == 36
    assert len(frames["turns"]) == sum(1 + len(c["turns"]) for c in conversations)
    assert len(frames["labels"]) == _csv_rows(demo.metrics("turn_labels")) > 0
    for path in demo.metrics_dir.glob("*.csv"):
        if path.stem != "turn_labels":
            assert len(frames[f"metrics_{path.stem}"]) == _csv_rows(path), path.name
    assert list(frames["profiles"].columns) == PROFILES.names
    assert list(frames["turns"].columns) == TURNS.names
    assert list(frames["labels"].columns) == LABELS.names


def test_labels_equal_the_metrics_turn_labels(demo, exported):
    labels = pd.read_parquet(exported["parquet"] / "labels.parquet")
    source = pd.read_csv(demo.metrics("turn_labels"), keep_default_na=False)
    columns = list(TURN_LABEL_COLUMNS)
    ours = labels[columns].astype(str).sort_values(columns).reset_index(drop=True)
    theirs = source[columns].astype(str).sort_values(columns).reset_index(drop=True)
    theirs = theirs.replace({"true": "True", "false": "False"})
    pd.testing.assert_frame_equal(ours, theirs)


def test_turns_hold_the_transcript_text(demo, exported):
    turns = pd.read_parquet(exported["parquet"] / "turns.parquet")
    conversation = next(iter_json_lines(demo.conversation_files()[0]))
    mine = turns[turns.conversation_id == conversation["conversation_id"]].sort_values("turn")
    assert mine.patient_text.iloc[0] == conversation["opening"] and pd.isna(mine.clinician_text.iloc[0])
    assert list(mine.clinician_text.iloc[1:]) == [t["clinician"] for t in conversation["turns"]]
    assert list(mine.patient_text.iloc[1:]) == [t["patient"] for t in conversation["turns"]]
    arms = zip(turns.clinician, turns.condition, turns.patient_mode)
    assert list(turns.arm) == [f"{clinician} · {condition} · {mode}" for clinician, condition, mode in arms]


def _front_matter(card: Path) -> dict:
    text = card.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_hf_card_lists_existing_files_and_states_what_it_must(exported):
    out = exported["hf"]
    meta = _front_matter(out / "README.md")
    assert meta["license"] == "cc-by-4.0"
    paths = [item["path"] for config in meta["configs"] for item in config["data_files"]]
    assert {"profiles.parquet", "turns.parquet", "labels.parquet", "metrics/conversations.parquet"} <= set(paths)
    assert all((out / path).is_file() for path in paths)
    index = json.loads((out / "export.json").read_text())
    assert {t["file"] for t in index["tables"] if t["rows"]} == set(paths)  # every non-empty table, no empty one
    card = (out / "README.md").read_text(encoding="utf-8")
    for heading in ("## Tables", "## Methods", "### Judging", "## Study configuration", "## Licence"):
        assert heading in card
    assert "no real patient" in card and "| `asked_about` | bool |" in card
    assert "| `active_coverage_rate` | double | Hidden domains with some turn where asked_about" in card
    assert not (exported["parquet"] / "README.md").exists()


def test_datasets_loads_the_export(exported, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out = exported["hf"]
    turns = datasets.load_dataset("parquet", data_files=str(out / "turns.parquet"), split="train",
                                  cache_dir=str(tmp_path / "cache"))
    assert turns.num_rows == len(pd.read_parquet(out / "turns.parquet"))
    meta = _front_matter(out / "README.md")
    for config in meta["configs"]:  # every configuration of the card loads, as the hub's viewer would
        table = datasets.load_dataset(str(out), config["config_name"], split="train", cache_dir=str(tmp_path / "c"))
        assert table.num_rows == len(pd.read_parquet(out / config["data_files"][0]["path"]))


def test_secrets_never_exported(demo, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo.root, run, ignore=shutil.ignore_patterns("report", ".lock", "cache.sqlite*"))
    manifest = json.loads((run / "manifest.json").read_text())
    for specs in manifest["models"].values():
        for spec in specs:
            spec.update(api_base="https://user:s3cret-base@llm.example", api_key_env="S3CRET_KEY_NAME",
                        extra_params={"headers": {"Authorization": "Bearer s3cret-header"}})
    manifest["study"]["config"]["api_key"] = "s3cret-key"
    (run / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["export", str(run), "--format", "hf", "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = b"".join(path.read_bytes() for path in out.rglob("*") if path.is_file())
    assert b"s3cret" not in written.lower() and b"S3CRET" not in written


def test_bad_inputs_are_one_line_and_nothing_is_overwritten(demo, tmp_path):
    runner = CliRunner()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["export", str(empty), "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "not a run folder" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["export", str(demo.root), "--format", "csv", "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "error:" in result.output and "csv" in result.output
    result = runner.invoke(app, ["export", str(demo.root), "--out", str(demo.root / "dataset")])
    assert result.exit_code == 2 and "inside" in result.output and not (demo.root / "dataset").exists()

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me")
    result = runner.invoke(app, ["export", str(demo.root), "--out", str(taken)])
    assert result.exit_code == 2 and "not empty" in result.output
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1

    result = runner.invoke(app, ["export", str(demo.root), "--out", str(taken), "--force"])
    assert result.exit_code == 0, result.output
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("taken.superseded-")]
    assert len(kept) == 1 and (kept[0] / "mine.txt").read_text() == "keep me"
    assert (taken / "turns.parquet").is_file() and not (taken / "mine.txt").exists()
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]
    result = runner.invoke(app, ["export", str(demo.root), "--out", str(taken), "--force"])  # within the second
    assert result.exit_code == 0, result.output
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("taken.superseded-")]) == 2

    link = tmp_path / "link"
    link.symlink_to(empty, target_is_directory=True)
    result = runner.invoke(app, ["export", str(demo.root), "--out", str(link)])
    assert result.exit_code == 2 and "symlink" in result.output and link.is_symlink()


def test_missing_pyarrow_is_one_install_line(demo, tmp_path, monkeypatch):
    for name in ("pyarrow", "pyarrow.parquet", "pyarrow.csv"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError, as when it is not installed
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["export", str(demo.root), "--out", str(out)])
    assert result.exit_code == 2 and "pip install 'intake-eval[export]'" in result.output
    assert not out.exists()


def test_cli_start_does_not_import_pyarrow():
    code = "import sys, intake_eval.cli; assert 'pyarrow' not in sys.modules, 'pyarrow imported at start'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_metrics_column_empty_in_the_first_block_streams(tmp_path, monkeypatch):
    from intake_eval.export import parquet

    monkeypatch.setattr(parquet, "CSV_BLOCK_BYTES", 256)  # many blocks; the first sees the column empty
    source = tmp_path / "conversations.csv"
    rows = [f"c{i},{'' if i < 100 else i}" for i in range(200)]
    source.write_text("conversation_id,premature_closure_turn\n" + "\n".join(rows) + "\n")
    written, _schema = parquet.copy_csv(source, tmp_path / "conversations.parquet")
    frame = pd.read_parquet(tmp_path / "conversations.parquet")
    assert written == len(frame) == 200 and frame.premature_closure_turn.iloc[199] == "199"
    assert frame.premature_closure_turn.iloc[:100].isna().all()


def test_an_uncompacted_file_exports_the_latest_record_once(demo, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo.root, run, ignore=shutil.ignore_patterns("report", ".lock", "cache.sqlite*"))
    paths = RunPaths(run)
    file = paths.conversation_files()[0]
    first = next(iter_json_lines(file))
    newer = {**first, "opening": "A newer opening (the record was redone after a crash)."}
    newer["turns"][0] = {**newer["turns"][0], "finish_reason": {"clinician": "length", "patient": "stop"},
                         "truncated": ["clinician"]}
    with open(file, "a", encoding="utf-8") as handle:  # as a killed stage leaves it: an older line, then the new
        handle.write("{not json\n" + json.dumps(newer) + "\n")
    for path in paths.metrics_dir.iterdir():
        path.touch()  # the metrics stand for these records (the table counts do not change)
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="corrupt line"):
        result = CliRunner().invoke(app, ["export", str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    turns = pd.read_parquet(out / "turns.parquet")
    assert len(turns) == len(pd.read_parquet(exports_of(demo, tmp_path) / "turns.parquet"))
    openings = turns[(turns.conversation_id == first["conversation_id"]) & (turns.turn == 0)].patient_text
    assert list(openings) == [newer["opening"]]
    cut = turns[(turns.conversation_id == first["conversation_id"]) & (turns.turn == 1)].iloc[0]
    assert json.loads(cut.finish_reasons) == {"clinician": "length", "patient": "stop"}
    assert list(cut.truncated) == ["clinician"]


def exports_of(demo: RunPaths, tmp_path: Path) -> Path:
    out = tmp_path / "reference"
    assert CliRunner().invoke(app, ["export", str(demo.root), "--out", str(out)]).exit_code == 0
    return out
