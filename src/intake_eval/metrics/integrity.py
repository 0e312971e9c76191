"""Which judgments count in the metrics: only those of a conversation on disk, of the same profile.

A judgment whose conversation is not in conversations/ (an orphan: a file copied from another run,
a conversation removed by hand) or names another profile than its conversation would be scored
against the wrong patient; a conversation id that appears under two profiles cannot say which one
its judgments are about. Each is skipped with one warning per file naming how many, and never
counted; rerunning the run and judge stages redoes what is missing.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from intake_eval.core.records import Judgment
from intake_eval.core.store import RunPaths, iter_json_lines
from intake_eval.metrics.figures import TurnLabels
from intake_eval.metrics.reading import iter_judgment_labels


def conversation_profiles(paths: RunPaths) -> dict[str, str]:
    """conversation id → profile id; an id seen under two profiles is left out, with a warning."""
    profiles: dict[str, str] = {}
    conflicting: dict[str, set[str]] = {}
    for path in paths.conversation_files():
        for data in iter_json_lines(path):
            cid, pid = str(data.get("conversation_id")), str(data.get("profile_id", ""))
            if cid in profiles and profiles[cid] != pid:
                conflicting.setdefault(cid, {profiles[cid]}).add(pid)
            profiles[cid] = pid
    for cid, pids in sorted(conflicting.items()):
        warnings.warn(f"{paths.conversations_dir}: conversation {cid} appears under {len(pids)} profiles "
                      f"({', '.join(sorted(pids))}); refused: its judgments are not counted in the metrics",
                      stacklevel=2)
        profiles.pop(cid)
    return profiles


def counted_judgments(paths: RunPaths, profiles: dict[str, str] | None = None,
                      ) -> Iterator[tuple[Judgment, list[TurnLabels]]]:
    """Every judgment that counts, streamed file by file, with its labels."""
    known = conversation_profiles(paths) if profiles is None else profiles
    for path in paths.judgment_files():
        skipped: dict[str, int] = {"orphan": 0, "other_profile": 0}
        for judgment, labels in iter_judgment_labels(path):
            profile = known.get(judgment.conversation_id)
            if profile is None:
                skipped["orphan"] += 1
            elif judgment.profile_id and judgment.profile_id != profile:
                skipped["other_profile"] += 1
            else:
                yield judgment, labels
        _warn_skipped(path, skipped)


def _warn_skipped(path: Any, skipped: dict[str, int]) -> None:
    if skipped["orphan"]:
        warnings.warn(f"{path}: skipping {skipped['orphan']} judgment(s) of conversations that are not in "
                      "conversations/ (not counted in the metrics)", stacklevel=3)
    if skipped["other_profile"]:
        warnings.warn(f"{path}: skipping {skipped['other_profile']} judgment(s) naming another profile than their "
                      "conversation (not counted in the metrics; rerun the judge stage to redo them)", stacklevel=3)
