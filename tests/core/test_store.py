import json
import os
import subprocess
import sys
import warnings

import pytest

from intake_eval.core.errors import ConfigChangedError, IntakeEvalError
from intake_eval.core.manifest import Manifest, diff_configs
from intake_eval.core.records import Usage
from intake_eval.core.run_lock import RunLock
from intake_eval.core.store import (
    JsonlWriter,
    ReadStats,
    RunPaths,
    append_record,
    compact,
    done_keys,
    file_safe,
    iter_json_lines,
    stable_hash,
)


def test_file_safe_names():
    assert file_safe("together_ai/meta-llama/Llama-3.3-70B") == "together_ai__meta-llama__Llama-3.3-70B"
    assert file_safe("offline/screener") == "offline__screener"
    assert file_safe("a b:c") == "a_b_c"


def test_truncated_tail_is_skipped_and_repaired_on_next_append(tmp_path):
    path = tmp_path / "x.jsonl"
    append_record(path, {"id": "a", "status": "ok"})
    with open(path, "a") as handle:
        handle.write('{"id": "b", "sta')  # a crash mid-write
    stats = ReadStats()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        rows = list(iter_json_lines(path, stats))
    assert [r["id"] for r in rows] == ["a"]
    assert stats.truncated_tail
    append_record(path, {"id": "c", "status": "ok"})
    assert path.read_text().splitlines() == ['{"id":"a","status":"ok"}', '{"id":"c","status":"ok"}']


def test_corrupt_middle_line_is_counted_not_fatal(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    stats = ReadStats()
    with pytest.warns(UserWarning, match="corrupt"):
        rows = list(iter_json_lines(path, stats))
    assert [r["id"] for r in rows] == ["a", "b"]
    assert stats.skipped_corrupt == 1


def test_done_keys_latest_record_wins(tmp_path):
    path = tmp_path / "x.jsonl"
    for record in [{"id": "a", "status": "model_error"}, {"id": "b", "status": "ok"}, {"id": "a", "status": "ok"},
                   {"id": "c", "status": "ok"}, {"id": "c", "status": "model_error"}]:
        append_record(path, record)
    assert done_keys(path, "id") == {"a", "b"}
    assert done_keys(path, "id", ok_only=False) == {"a", "b", "c"}


def test_compact_sorts_and_deduplicates_atomically(tmp_path):
    path = tmp_path / "x.jsonl"
    for record in [{"id": "b", "v": 1}, {"id": "a", "v": 1}, {"id": "b", "v": 2}]:
        append_record(path, record)
    assert compact(path, "id") == 2
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"id": "a", "v": 1}, {"id": "b", "v": 2}]


def test_concurrent_writers_never_interleave_lines(tmp_path):
    import threading

    path = tmp_path / "x.jsonl"
    writers = [JsonlWriter(path) for _ in range(3)]  # opened (and tail-repaired) before anyone writes

    def write_many(writer, tag):
        for i in range(300):
            writer.write({"id": f"{tag}{i}", "pad": "x" * 5000})

    threads = [threading.Thread(target=write_many, args=(w, tag)) for w, tag in zip(writers, "abc")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for writer in writers:
        writer.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 900
    assert all(json.loads(line)["pad"] == "x" * 5000 for line in lines)


def test_stable_hash_is_order_independent_for_dict_keys():
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})


def test_manifest_refuses_changed_stage_config_and_names_the_difference(tmp_path):
    paths = RunPaths(tmp_path / "run")
    manifest = Manifest(paths)
    manifest.begin_stage("run", {"turns": 12, "patient": "gpt-4o"})
    manifest.finish_stage("run", counts={"done": 3}, usage={"gpt-4o": Usage(calls=3, cost_usd=0.5)})
    again = Manifest(paths)
    again.begin_stage("run", {"turns": 12, "patient": "gpt-4o"})  # same config resumes
    with pytest.raises(ConfigChangedError, match=r"turns: 12 → 10"):
        Manifest(paths).begin_stage("run", {"turns": 10, "patient": "gpt-4o"})


def test_manifest_force_moves_old_outputs_aside(tmp_path):
    paths = RunPaths(tmp_path / "run")
    output = paths.conversations("offline/screener")
    append_record(output, {"conversation_id": "x", "status": "ok"})
    Manifest(paths).begin_stage("run", {"turns": 12})
    Manifest(paths).begin_stage("run", {"turns": 10}, force=True, outputs=[output])
    assert not output.exists()
    moved = list(paths.superseded_dir.glob("run-*/offline__screener.jsonl"))
    assert len(moved) == 1
    assert Manifest(paths).data["stages"]["run"]["config"] == {"turns": 10}


def test_manifest_from_other_schema_version_is_refused(tmp_path):
    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir(parents=True)
    paths.manifest.write_text(json.dumps({"schema_version": 0, "stages": {}}))
    with pytest.raises(IntakeEvalError, match="schema_version 0"):
        Manifest(paths)
    paths.manifest.write_text("{not json")
    with pytest.raises(IntakeEvalError, match="unreadable"):
        Manifest(paths)


def test_diff_configs_nested():
    assert diff_configs({"a": {"b": 1}, "c": 2}, {"a": {"b": 2}, "c": 2}) == ["a.b: 1 → 2"]


def test_run_lock_names_the_holder(tmp_path):
    paths = RunPaths(tmp_path / "run")
    with RunLock(paths):
        script = (
            "import sys; from pathlib import Path; from intake_eval.core.store import RunPaths\n"
            "from intake_eval.core.run_lock import RunLock\n"
            "from intake_eval.core.errors import RunLockedError\n"
            "try:\n RunLock(RunPaths(Path(sys.argv[1]))).acquire()\n"
            "except RunLockedError as e:\n print(e.format_message()); sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", script, str(paths.root)], capture_output=True, text=True)
        assert proc.returncode == 3
        assert f"pid {os.getpid()}" in proc.stdout
    with RunLock(paths):  # released: can be taken again
        pass
