"""Records that cannot be scored as they stand are refused with a warning and never counted:
judgments of no conversation on disk, a conversation whose turn numbers repeat or skip, a
conversation id under two profiles, a judgment labelling a turn twice. A clinician-only offline
participant cannot play the patient."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.adversarial_cases import CONVERSATIONS, JUDGMENTS, build_base, cli


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("integrity"))


def copy_run(base: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(base, run)
    return run


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))


def scored(run: Path) -> list[str]:
    with open(run / "metrics" / "conversations.csv", encoding="utf-8", newline="") as handle:
        return sorted(row["conversation_id"] for row in csv.DictReader(handle))


def report(run: Path):
    done = cli("report", "--quiet", "--run-dir", str(run))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("warning:")]


def test_the_base_scores_every_conversation(base, tmp_path):
    run = copy_run(base, tmp_path)
    assert report(run) == [] and len(scored(run)) == 3


def test_an_orphan_judgment_is_skipped_with_a_warning(base, tmp_path):
    run = copy_run(base, tmp_path)
    judgments = lines(run / JUDGMENTS)
    ghost = {**judgments[0], "conversation_id": "P99999.offline__screener.minimal.tracked.t0", "profile_id": "P99999"}
    write(run / JUDGMENTS, [*judgments, ghost])
    warned = report(run)
    assert any(JUDGMENTS in w and "1 judgment(s) of conversations that are not in conversations/" in w for w in warned)
    assert len(scored(run)) == 3 and ghost["conversation_id"] not in scored(run)


def test_a_conversation_with_turn_one_three_times_is_refused(base, tmp_path):
    run = copy_run(base, tmp_path)
    conversations = lines(run / CONVERSATIONS)
    victim = conversations[0]
    for turn in victim["turns"]:
        turn["turn"] = 1
    write(run / CONVERSATIONS, conversations)
    warned = report(run)
    assert any(f"{CONVERSATIONS}:1" in w and "turn numbers must run 1, 2" in w for w in warned), warned
    assert victim["conversation_id"] not in scored(run) and len(scored(run)) == 2


def test_a_conversation_with_a_missing_turn_is_refused(base, tmp_path):
    run = copy_run(base, tmp_path)
    conversations = lines(run / CONVERSATIONS)
    conversations[1]["turns"] = [t for t in conversations[1]["turns"] if t["turn"] != 2]
    write(run / CONVERSATIONS, conversations)
    warned = report(run)
    assert any(f"{CONVERSATIONS}:2" in w and "(got 1, 3)" in w for w in warned), warned
    assert conversations[1]["conversation_id"] not in scored(run)


def test_one_conversation_id_under_two_profiles_is_refused(base, tmp_path):
    run = copy_run(base, tmp_path)
    conversations = lines(run / CONVERSATIONS)
    other = next(c["profile_id"] for c in conversations if c["profile_id"] != conversations[0]["profile_id"])
    write(run / CONVERSATIONS, [*conversations, {**conversations[0], "profile_id": other}])
    warned = report(run)
    cid = conversations[0]["conversation_id"]
    assert any(cid in w and "appears under 2 profiles" in w for w in warned), warned
    assert cid not in scored(run) and len(scored(run)) == 2


def test_a_judgment_labelling_a_turn_twice_is_refused(base, tmp_path):
    run = copy_run(base, tmp_path)
    judgments = lines(run / JUDGMENTS)
    judgments[0]["turns"].append(judgments[0]["turns"][-1])
    write(run / JUDGMENTS, judgments)
    warned = report(run)
    assert any(JUDGMENTS in w and "1 judgment(s) that label a turn twice" in w for w in warned), warned
    assert judgments[0]["conversation_id"] not in scored(run)


@pytest.mark.parametrize("clinician", ["offline/screener", "offline/anchored", "offline/drifting"])
def test_a_clinician_only_offline_participant_cannot_be_the_patient(base, tmp_path, clinician):
    run = copy_run(base, tmp_path)
    before = (run / CONVERSATIONS).read_bytes()
    done = cli("run", "--clinician", "offline/screener", "--patient", clinician, "--turns", "3", "--run-dir", str(run))
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and clinician in errors[0] and "patient" in errors[0]
    assert (run / CONVERSATIONS).read_bytes() == before
