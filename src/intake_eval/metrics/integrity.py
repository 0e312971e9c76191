"""Which judgments count in the metrics: only those of a conversation on disk, of the same profile,
labelling each turn once.

A judgment whose conversation is not in conversations/ (an orphan: a file copied from another run,
a conversation removed by hand) or names another profile than its conversation would be scored
against the wrong patient; a conversation id that appears under two profiles cannot say which one
its judgments are about. Each is skipped with one warning per file naming how many, and never
counted; rerunning the run and judge stages redoes what is missing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.core.records import Judgment
from intake_eval.core.spill import SpilledRows
from intake_eval.core.store import ReadStats, RunPaths, iter_json_lines
from intake_eval.metrics.figures import TurnLabels
from intake_eval.metrics.reading import iter_judgment_labels


@dataclass
class ConversationIndex:
    """What conversations/ holds: the profile of every valid conversation, the ids of lines that are
    JSON but were refused (wrong shape, repeated turn numbers), and the files with unreadable lines.
    The per-conversation entries are kept on disk (core/spill.SpilledRows); ``close`` removes them."""

    profiles: SpilledRows  # id → profile id
    refused: SpilledRows  # id → True
    damaged_files: set[Path] = field(default_factory=set)
    any_files: bool = False

    def close(self) -> None:
        self.profiles.close()
        self.refused.close()


def conversation_index(paths: RunPaths, on_valid: Callable[[dict[str, Any]], None] | None = None
                       ) -> ConversationIndex:
    """Each conversation file read raw and validated (bad lines were announced by the stage readers);
    a conversation id seen under two profiles is refused, with a warning. ``on_valid`` sees every valid
    record's dict as it is read (one line in memory at a time)."""
    index = ConversationIndex(profiles=SpilledRows.alone("conversation-profiles", paths.metrics_dir, read_ahead=True),
                              refused=SpilledRows.alone("refused-conversations", paths.metrics_dir),
                              any_files=bool(paths.conversation_files()))
    try:
        _read_conversations(paths, index, on_valid)
    except BaseException:
        index.close()
        raise
    return index


def _read_conversations(paths: RunPaths, index: ConversationIndex,
                        on_valid: Callable[[dict[str, Any]], None] | None) -> None:
    conflicting: dict[str, set[str]] = {}
    for path in paths.conversation_files():
        raw, valid_ids = SpilledRows.alone("raw-ids", paths.metrics_dir), SpilledRows.alone("valid-ids", paths.metrics_dir)
        stats = ReadStats()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for data in iter_json_lines(path, stats, model=None):
                    raw[str(data.get("conversation_id"))] = True
            if stats.skipped_corrupt or stats.truncated_tail:
                index.damaged_files.add(path)
            validated = ReadStats()
            for data in iter_json_lines(path, validated):
                cid, pid = str(data.get("conversation_id")), str(data.get("profile_id", ""))
                valid_ids[cid] = True
                known = index.profiles.get(cid)
                if known is not None and known != pid:
                    conflicting.setdefault(cid, {known}).add(pid)
                index.profiles[cid] = pid
                if on_valid is not None:
                    on_valid(data)
            if validated.skipped_corrupt == stats.skipped_corrupt:
                continue  # every line that is JSON was a valid record: no id of this file is refused
            for cid in raw.sorted_keys():
                if cid not in valid_ids:
                    index.refused[cid] = True
        finally:
            raw.close()
            valid_ids.close()
    for cid, pids in sorted(conflicting.items()):
        warnings.warn(f"{paths.conversations_dir}: conversation {cid} appears under {len(pids)} profiles "
                      f"({', '.join(sorted(pids))}); refused: its judgments are not counted in the metrics",
                      stacklevel=3)
        index.profiles.discard(cid)
        index.refused[cid] = True


def counted_judgments(paths: RunPaths, index: ConversationIndex | None = None
                      ) -> Iterator[tuple[Judgment, list[TurnLabels]]]:
    """Every judgment that counts, streamed file by file, with its labels. With no conversation files
    at all there is nothing to check a judgment against, and each counts as it stands; a judgment whose
    transcript was lost to an unreadable line keeps counting (its labels, clinician and profile are intact).
    ``index``: the conversations' index when the caller has read it already."""
    own = index is None
    index = index if index is not None else conversation_index(paths)
    try:
        for path in paths.judgment_files():
            skipped = {"orphan": 0, "refused": 0, "other_profile": 0, "repeated_turn": 0}
            for judgment, labels in iter_judgment_labels(path):
                reason = _skip_reason(judgment, labels, index, paths)
                if reason is None:
                    yield judgment, labels
                else:
                    skipped[reason] += 1
            _warn_skipped(path, skipped)
    finally:
        if own:
            index.close()


def _skip_reason(judgment: Judgment, labels: list[TurnLabels], index: ConversationIndex,
                 paths: RunPaths) -> str | None:
    numbers = [label.turn for label in labels]
    if len(set(numbers)) != len(numbers):
        return "repeated_turn"  # two label sets for one turn: which one the metrics use would be arbitrary
    if not index.any_files:
        return None
    cid = judgment.conversation_id
    if cid in index.refused:
        return "refused"
    profile = index.profiles.get(cid)
    if profile is None:
        lost = paths.conversations(judgment.clinician) in index.damaged_files
        return None if lost else "orphan"
    if judgment.profile_id and judgment.profile_id != profile:
        return "other_profile"
    return None


def _warn_skipped(path: Any, skipped: dict[str, int]) -> None:
    if skipped["orphan"]:
        warnings.warn(f"{path}: skipping {skipped['orphan']} judgment(s) of conversations that are not in "
                      "conversations/ (not counted in the metrics)", stacklevel=3)
    if skipped["refused"]:
        warnings.warn(f"{path}: skipping {skipped['refused']} judgment(s) of conversations refused above "
                      "(not counted in the metrics; rerun the run stage to redo them)", stacklevel=3)
    if skipped["repeated_turn"]:
        warnings.warn(f"{path}: skipping {skipped['repeated_turn']} judgment(s) that label a turn twice "
                      "(not counted in the metrics; rerun the judge stage with --force to redo them)", stacklevel=3)
    if skipped["other_profile"]:
        warnings.warn(f"{path}: skipping {skipped['other_profile']} judgment(s) naming another profile than their "
                      "conversation (not counted in the metrics; rerun the judge stage to redo them)", stacklevel=3)
