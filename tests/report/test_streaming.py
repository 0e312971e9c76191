"""The report keeps only slim summaries in memory and reads full records back per shard: the shards
must equal what the whole records give (latest line per key, also in files that were not compacted),
and two reports swapping the shard folder at once must both finish cleanly."""

from __future__ import annotations

import json
import multiprocessing
import random
from pathlib import Path

import pytest

from intake_eval.core.store import append_record, iter_json_lines
from tests.helpers.report_runs import (
    make_conversation,
    make_judgment,
    make_profile,
    synth_run,
)


def _latest(path: Path, key: str) -> dict[str, dict]:
    return {str(d[key]): d for d in iter_json_lines(path) if key in d}


def _expected_shards(paths, judges: list[str]) -> dict[str, str]:
    """The shards as the whole-records-in-memory report wrote them (reference)."""
    from intake_eval.report import shards, viewer

    profiles = _latest(paths.profiles, "profile_id")
    conversations: dict[str, dict] = {}
    for path in paths.conversation_files():
        conversations.update(_latest(path, "conversation_id"))
    judgments: dict[str, dict[str, dict]] = {}
    for path in paths.judgment_files():
        for cid, data in _latest(path, "conversation_id").items():
            judgments.setdefault(str(data.get("judge") or path.parent.name), {})[cid] = data
    by_profile: dict[str, list[str]] = {}
    for cid, conv in conversations.items():
        by_profile.setdefault(conv.get("profile_id", ""), []).append(cid)
    pids = sorted(by_profile)
    out = {}
    for start in range(0, len(pids), shards.PROFILES_PER_SHARD):
        name = shards.shard_name(start // shards.PROFILES_PER_SHARD)
        payload = {}
        for pid in pids[start:start + shards.PROFILES_PER_SHARD]:
            for cid in sorted(by_profile[pid]):
                per_judge = {j: judgments[j][cid] for j in judges if cid in judgments.get(j, {})}
                payload[cid] = viewer.compact_conversation(conversations[cid], profiles.get(pid), per_judge, None)
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
        out[f"{name}.js"] = f"IE_SHARD({json.dumps(name)},{text});\n"
    return out


def test_shards_equal_the_whole_records_even_with_superseded_lines(tmp_path: Path):
    from intake_eval.report.build import build_report

    paths = synth_run(tmp_path / "stream", n_profiles=23, clinicians=("offline/screener", "offline/anchored"))
    rng = random.Random("later")
    profile = make_profile(3, random.Random("synth"))  # a conversation and its judgment redone later (not compacted)
    conv, plan = make_conversation(profile, "offline/screener", 9, rng)
    conv.opening = "A redone opening </script> with ünïcode."
    append_record(paths.conversations("offline/screener"), conv)
    judgment = make_judgment(conv, profile, plan, "cross-judge", rng, noise=0.5)
    append_record(paths.judgments("cross-judge", "offline/screener"), judgment)
    extra = make_profile(99, rng)  # a profile appended out of order, with its conversation
    append_record(paths.profiles, extra)
    conv2, _ = make_conversation(extra, "offline/anchored", 12, rng)
    append_record(paths.conversations("offline/anchored"), conv2)

    result = build_report(paths.root)
    written = {p.name: p.read_text(encoding="utf-8") for p in paths.report_shards_dir.glob("*.js")}
    assert written == _expected_shards(paths, result.views["judges"])
    assert "A redone opening" in "".join(written.values())


def _race(args) -> int:
    from intake_eval.core.store import RunPaths
    from intake_eval.report import shards, viewer
    from intake_eval.report.load import load_run

    root, worker = args
    data = load_run(RunPaths(Path(root)), spill_in=None, refresh=False)
    try:
        for i in range(15):
            shards.write_shards(data.paths.report_shards_dir, data.profiles, data.conversations, data.index,
                                list(data.judgments), fingerprint=f"{worker}-{i}")
    finally:
        data.close()
    return worker


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_reports_swapping_shards_at_once_both_finish(tmp_path: Path):
    paths = synth_run(tmp_path / "race", n_profiles=30, clinicians=("offline/screener",))
    with multiprocessing.get_context("fork").Pool(3) as pool:
        assert sorted(pool.map(_race, [(str(paths.root), k) for k in range(3)])) == [0, 1, 2]
    shards = sorted(p.name for p in paths.report_shards_dir.glob("*.js"))
    assert shards == ["s00000.js", "s00001.js", "s00002.js"]
    assert (paths.report_shards_dir / ".fingerprint").read_text(encoding="utf-8").endswith("-14")
    assert [p.name for p in paths.report_dir.iterdir() if p.name.startswith(".")] == []  # no staging left behind
