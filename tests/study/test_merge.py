"""A study split with --shard i/N and joined with `intake-eval merge` equals the study in one folder.

Real CLI (CliRunner), real files, the offline participants: the demo's design (patient QC, three
clinicians, formulations, a closure fork) on fewer profiles, run once in one folder and once as three
shard folders that are merged and reported. Then every refusal: --shard validation, a resume as
another shard, a missing or repeated shard, a conversation in two shards, another configuration,
other profiles, a non-empty target.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from intake_eval.core.shard import Shard, parse_shard, shard_index
from intake_eval.core.errors import IntakeEvalError
from tests.helpers.cli import invoke

CONFIG = """\
name: sharded
seed: 11
profiles: {n: 9, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener, offline/drifting, offline/anchored]
conditions: [minimal]
trials: 2
turns: 12
judges: [offline/judge]
judge_mode: per-turn
formulation: true
concurrency: 16
qc: {enabled: true, max_leak_rate: 0.05, min_recall: 0.5}
forks:
  - at: closure
    nudge: review
"""


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, Path]:
    """The same study in one folder and as three shard folders (each made by its own `study --shard`)."""
    root = tmp_path_factory.mktemp("shards")
    config = root / "study.yaml"
    config.write_text(CONFIG)
    folders = {"one": root / "one"}
    result = invoke("study", config, "--run-dir", folders["one"])
    assert result.exit_code == 0, result.output
    for index in (1, 2, 3):
        folders[f"s{index}"] = root / f"s{index}"
        result = invoke("study", config, "--shard", f"{index}/3", "--run-dir", folders[f"s{index}"])
        assert result.exit_code == 0, result.output
    folders["config"] = config
    return folders


def merged(studies: dict[str, Path], tmp_path: Path, *names: str) -> tuple[object, Path]:
    into = tmp_path / "merged"
    return invoke("merge", *(studies[name] for name in names), "--into", into), into


def copy_shard(studies: dict[str, Path], name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"copy-{name}"
    shutil.copytree(studies[name], target)
    return target


# ---------------------------------------------------------------- the shard a profile belongs to

def test_a_profile_s_shard_is_sha256_of_its_id_modulo_n():
    for profile_id in ("p0001", "anxious_depression-003", "é-unicode"):
        digest = hashlib.sha256(profile_id.encode("utf-8")).digest()
        assert shard_index(profile_id, 7) == int.from_bytes(digest[:8], "big") % 7 + 1
    ids = [f"profile-{i}" for i in range(300)]
    shards = [Shard(i, 3) for i in (1, 2, 3)]
    owners = [[s for s in shards if s.holds(pid)] for pid in ids]
    assert all(len(owner) == 1 for owner in owners)  # every profile in exactly one shard
    assert all(sum(1 for owner in owners if owner[0] == s) > 50 for s in shards)  # and the split is not lopsided


@pytest.mark.parametrize("spec", ["0/3", "4/3", "1/0", "-1/3", "a/b", "2", "1/3/4", ""])
def test_a_bad_shard_spec_is_one_line_naming_the_flag(spec):
    with pytest.raises(IntakeEvalError, match="^--shard "):
        parse_shard(spec)


@pytest.mark.parametrize("command", [
    ["run", "--clinician", "offline/screener", "--patient", "offline/patient"],
    ["judge", "--judge", "offline/judge"],
    ["study", "x.yaml"],
])
def test_every_command_refuses_a_bad_shard_before_any_work(command, tmp_path):
    result = invoke(*command, "--shard", "4/3", "--run-dir", tmp_path / "run")
    one_line_error(result, "--shard 4/3", "1 ≤ i ≤ N")
    assert not (tmp_path / "run").exists()


def test_parse_shard_reads_i_of_n():
    assert parse_shard("2/3") == Shard(2, 3) and str(parse_shard(" 1 / 1 ")) == "1/1" and parse_shard(None) is None


# ---------------------------------------------------------------- merge == one folder

def test_three_merged_shards_report_the_same_metrics_as_one_folder(studies, tmp_path):
    result, into = merged(studies, tmp_path, "s3", "s1", "s2")  # any order
    assert result.exit_code == 0, result.output
    shard_conversations = [sum(1 for f in (studies[f"s{i}"] / "conversations").glob("*.jsonl")
                               for _ in f.open()) for i in (1, 2, 3)]
    assert all(count > 0 for count in shard_conversations)  # each shard did a real share of the work
    report = invoke("report", "--run-dir", into)
    assert report.exit_code == 0, report.output
    one = studies["one"]
    for table in ("conversations", "clinicians"):
        assert (into / "metrics" / f"{table}.csv").read_bytes() == (one / "metrics" / f"{table}.csv").read_bytes()
    for relative in sorted(p.relative_to(one) for p in one.glob("metrics/*.csv")):
        assert (into / relative).read_bytes() == (one / relative).read_bytes(), relative
    for folder in ("conversations", "judgments"):  # forks and formulations are in these records
        for path in sorted((one / folder).rglob("*.jsonl")):
            assert (into / path.relative_to(one)).read_bytes() == path.read_bytes(), path

    mine, theirs = (json.loads((d / "manifest.json").read_text()) for d in (into, one))
    for name, stage in theirs["stages"].items():
        if name != "report":  # config hashes of a single-folder run: compare and status see one run
            assert mine["stages"][name]["config_hash"] == stage["config_hash"], name
            assert mine["stages"][name].get("counts") == stage.get("counts"), name
    assert [entry["shard"] for entry in mine["merged_from"]] == ["1/3", "2/3", "3/3"]
    assert all(entry["path"] and entry["config_hash"] for entry in mine["merged_from"])
    assert {entry["shard"] for entry in mine["study"]["history"]} == {"1/3", "2/3", "3/3"}
    log = [json.loads(line) for line in (into / "stage_log.jsonl").read_text().splitlines()]
    assert {entry.get("shard") for entry in log[:-1]} == {"1/3", "2/3", "3/3"} and log[-1]["event"] == "merge"

    status = invoke("status", "--run-dir", into)
    assert status.exit_code == 0, status.output
    compare = invoke("compare", one, into, "--out", tmp_path / "compare")
    assert compare.exit_code == 0, compare.output


def test_call_logs_are_concatenated_when_the_shards_have_them(studies, tmp_path):
    copies = [copy_shard(studies, f"s{i}", tmp_path) for i in (1, 2, 3)]
    for index, folder in enumerate(copies):
        (folder / "calls.jsonl").write_text(f'{{"call": {index}}}\n')
    into = tmp_path / "merged"
    result = invoke("merge", *copies, "--into", into)
    assert result.exit_code == 0, result.output
    assert (into / "calls.jsonl").read_text() == '{"call": 0}\n{"call": 1}\n{"call": 2}\n'


# ---------------------------------------------------------------- refusals

def test_a_shard_folder_refuses_to_resume_as_another_shard(studies, tmp_path):
    folder = copy_shard(studies, "s1", tmp_path)
    before = (folder / "manifest.json").read_bytes()
    result = invoke("study", studies["config"], "--shard", "2/3", "--run-dir", folder)
    one_line_error(result, "ran shard 1/3, not --shard 2/3")
    assert (folder / "manifest.json").read_bytes() == before
    result = invoke("run", "--clinician", "offline/screener", "--patient", "offline/patient", "--shard", "2/3",
                    "--run-dir", folder)
    assert "different configuration" in result.output and "shard.index: 1 → 2" in result.output


def test_a_missing_shard_is_a_gap(studies, tmp_path):
    result, into = merged(studies, tmp_path, "s1", "s3")
    one_line_error(result, "gap", "2/3 missing")
    assert not into.exists()


def test_a_shard_given_twice_is_an_overlap(studies, tmp_path):
    result, into = merged(studies, tmp_path, "s1", "s2", "s2", "s3")
    one_line_error(result, "overlap", "shard 2/3 is given twice")
    assert not into.exists()


def test_a_conversation_in_two_shards_is_an_overlap(studies, tmp_path):
    folder = copy_shard(studies, "s1", tmp_path)
    source = sorted((studies["s2"] / "conversations").glob("*.jsonl"))[0]
    with open(folder / "conversations" / source.name, "a", encoding="utf-8") as handle:
        handle.write(source.read_text().splitlines()[0] + "\n")
    into = tmp_path / "merged"
    result = invoke("merge", folder, studies["s2"], studies["s3"], "--into", into)
    one_line_error(result, "overlap")
    assert not into.exists() and not list(tmp_path.glob(".merged.merging-*"))


def test_a_shard_with_no_conversations_for_its_profiles_is_a_gap(studies, tmp_path):
    folder = copy_shard(studies, "s2", tmp_path)
    shutil.rmtree(folder / "conversations")
    (folder / "conversations").mkdir()
    into = tmp_path / "merged"
    result = invoke("merge", studies["s1"], folder, studies["s3"], "--into", into)
    one_line_error(result, "gap", "have no conversation", "shard 2/3")


def test_shards_made_with_another_configuration_are_refused(studies, tmp_path):
    folder = copy_shard(studies, "s3", tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["stages"]["run"]["config"]["turns"] = 10
    (folder / "manifest.json").write_text(json.dumps(manifest))
    result = invoke("merge", studies["s1"], studies["s2"], folder, "--into", tmp_path / "merged")
    one_line_error(result, "another configuration", "turns: 12 → 10")


def test_shards_with_other_profiles_are_refused(studies, tmp_path):
    folder = copy_shard(studies, "s2", tmp_path)
    lines = (folder / "profiles.jsonl").read_text().splitlines()
    (folder / "profiles.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    result = invoke("merge", studies["s1"], folder, studies["s3"], "--into", tmp_path / "merged")
    one_line_error(result, "profiles.jsonl differs")


def test_shards_split_into_different_counts_are_refused(studies, tmp_path):
    folder = copy_shard(studies, "s3", tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    for stage in manifest["stages"].values():
        if "shard" in stage["config"]:
            stage["config"]["shard"] = {"index": 3, "count": 4}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    result = invoke("merge", studies["s1"], studies["s2"], folder, "--into", tmp_path / "merged")
    one_line_error(result, "split the study differently")


def test_a_folder_that_is_not_a_shard_is_refused(studies, tmp_path):
    result, _ = merged(studies, tmp_path, "one", "s1", "s2", "s3")
    one_line_error(result, "not a shard")


def test_merge_never_writes_into_a_non_empty_folder(studies, tmp_path):
    into = tmp_path / "merged"
    into.mkdir()
    (into / "notes.txt").write_text("mine")
    result = invoke("merge", studies["s1"], studies["s2"], studies["s3"], "--into", into)
    one_line_error(result, "--into", "not an empty folder")
    assert [p.name for p in into.iterdir()] == ["notes.txt"] and (into / "notes.txt").read_text() == "mine"


# ---------------------------------------------------------------- judge --shard on one folder

def test_judge_shard_labels_only_that_shard_s_conversations(studies, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(studies["one"] / "profiles.jsonl", folder / "profiles.jsonl")
    run = invoke("run", "--clinician", "offline/screener", "--patient", "offline/patient", "--turns", "4",
                 "--run-dir", folder)
    assert run.exit_code == 0, run.output
    judged = invoke("judge", "--judge", "offline/judge", "--shard", "2/3", "--run-dir", folder)
    assert judged.exit_code == 0, judged.output
    labels = [json.loads(line) for path in (folder / "judgments").rglob("*.jsonl") for line in path.open()]
    conversations = [json.loads(line) for path in (folder / "conversations").glob("*.jsonl") for line in path.open()]
    assert labels and len(labels) < len(conversations)
    assert {c["conversation_id"] for c in conversations if Shard(2, 3).holds(c["profile_id"])} == \
        {label["conversation_id"] for label in labels}
    again = invoke("judge", "--judge", "offline/judge", "--shard", "1/3", "--run-dir", folder)
    one_line_error(again, "--shard 1/3", "is shard 2/3")


def test_judging_a_shard_folder_judges_that_shard_and_refuses_another(studies, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(studies["one"] / "profiles.jsonl", folder / "profiles.jsonl")
    run = invoke("run", "--clinician", "offline/anchored", "--patient", "offline/patient", "--turns", "4",
                 "--shard", "1/3", "--run-dir", folder)
    assert run.exit_code == 0, run.output
    judged = invoke("judge", "--judge", "offline/judge", "--run-dir", folder)
    assert judged.exit_code == 0, judged.output
    stages = json.loads((folder / "manifest.json").read_text())["stages"]
    assert stages["judge:offline/judge"]["config"]["shard"] == {"index": 1, "count": 3} == stages["run"]["config"]["shard"]
    other = invoke("judge", "--judge", "offline/judge", "--shard", "2/3", "--run-dir", folder)
    one_line_error(other, "--shard 2/3", "is shard 1/3")
