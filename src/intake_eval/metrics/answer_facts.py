"""The answers ``status`` counts (metrics/answers), kept per record file (core/record_facts).

Per conversation file: the clinician arms' answer rows (``answer_rows``) of its latest conversations;
per judgment file: the judge rows (``judge_answer_rows``). ``status`` puts them together: an arm lives
in one file (its clinician's), so its row is the file's; judge rows (counts only) are summed over the
files of a judge (a judge with a second mode has a second folder). An arm found in two files (never
written so) is counted from the conversations themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.record_facts import FactReader, FolderFacts
from intake_eval.core.records import Conversation, Judgment, Record
from intake_eval.core.store import RunPaths
from intake_eval.metrics.answers import (
    answer_rows,
    answer_rows_after,
    conversation_answer_row,
    conversation_answers,
    judge_answer_rows,
)

CONVERSATION_ANSWERS = "answers"  # the kept summaries' names
JUDGE_ANSWERS = "judge_answers"
JUDGE_ROW_KEYS = ("judge", "clinician")


class ConversationAnswers:
    """A conversation file's clinician arms: conversations, failures and answers cut at the cap."""

    name = CONVERSATION_ANSWERS
    key = "conversation_id"

    def claims(self, paths: RunPaths, path: Path) -> bool:
        return path.parent == paths.conversations_dir and path.suffix == ".jsonl"

    def fact(self, data: Mapping[str, Any], record: Record | None) -> Any:
        return conversation_answer_row(record) if isinstance(record, Conversation) else None

    def summary(self, facts: list[Any]) -> Any:
        return answer_rows(facts)

    def fold(self, summary: Any, facts: list[Any]) -> Any:
        return answer_rows_after(summary, facts)


class JudgeAnswers:
    """A judgment file's judge rows: judgments ok, refused, judge and provider errors, answers cut."""

    name = JUDGE_ANSWERS
    key = "conversation_id"

    def claims(self, paths: RunPaths, path: Path) -> bool:
        return path.parent.parent == paths.judgments_dir and path.suffix == ".jsonl"

    def fact(self, data: Mapping[str, Any], record: Record | None) -> Any:
        if not isinstance(record, Judgment):
            return None
        record.turns = []  # only its status and counts are read
        return record

    def summary(self, facts: list[Any]) -> Any:
        return judge_answer_rows(facts)

    def fold(self, summary: Any, facts: list[Any]) -> Any:
        return _summed_judge_rows([summary, judge_answer_rows(facts)])


def answer_readers() -> tuple[FactReader, ...]:
    return (ConversationAnswers(), JudgeAnswers())


def _clinician_rows(paths: RunPaths, facts: FolderFacts) -> list[dict[str, Any]]:
    arms: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rows in facts.summaries(CONVERSATION_ANSWERS, paths.conversation_files()):
        for row in rows:
            arm = (row["clinician"], row["condition"], row["patient_mode"])
            if arm in arms:  # an arm split over files: its shares need its conversations together
                return answer_rows(conversation_answers(paths))
            arms[arm] = row
    return [arms[arm] for arm in sorted(arms)]


def _judge_rows(paths: RunPaths, facts: FolderFacts) -> list[dict[str, Any]]:
    return _summed_judge_rows(facts.summaries(JUDGE_ANSWERS, paths.judgment_files()))


def _summed_judge_rows(summaries: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Judge rows (counts only) summed per judge and clinician, sorted."""
    judges: dict[tuple[str, ...], dict[str, Any]] = {}
    for rows in summaries:
        for row in rows:
            key = tuple(row[name] for name in JUDGE_ROW_KEYS)
            known = judges.setdefault(key, {name: row[name] for name in JUDGE_ROW_KEYS})
            for column, count in row.items():
                if column not in JUDGE_ROW_KEYS:
                    known[column] = known.get(column, 0) + count
    return [judges[key] for key in sorted(judges)]


def kept_answers(paths: RunPaths, facts: FolderFacts) -> dict[str, list[dict[str, Any]]]:
    """``{"clinicians": answer rows per arm, "judges": judge rows}``, as metrics/answers counts them."""
    return {"clinicians": _clinician_rows(paths, facts), "judges": _judge_rows(paths, facts)}
