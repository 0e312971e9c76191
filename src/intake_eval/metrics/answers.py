"""Answers a run could not use, and answers cut at the token cap, counted from the records.

Three tables (metrics/answers*.csv), also read live by ``intake-eval status`` and the report:
- ``answers`` — one row per clinician arm (clinician, condition, patient mode): conversations, how
  many failed because an answer had no visible text (refused: a refusal or content filter; empty:
  nothing visible after one fresh sample), by the role that gave it, how many failed under
  ``--on-truncation fail``, and per role the answers cut at the cap with their share of that
  role's answers — the estimate of how much a token cap cut;
- ``answers_by_conversation`` — the same facts per conversation (failed ones included);
- ``answers_by_judge`` — per judge and clinician: judgments ok, refused, judge errors, provider
  errors, judge answers cut at the cap.
A conversation that failed is counted here and never scored (metrics/tables reads ok ones only).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from intake_eval.core.records import Conversation, PatientMode, Record, arm_condition
from intake_eval.core.spill import SpilledRows
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.metrics.reading import write_csv, write_csv_rows

ANSWER_ROLES: tuple[str, ...] = ("clinician", "patient", "tracker", "formulation")
UNUSABLE: tuple[str, ...] = ("refused", "empty_answer")

ANSWER_COLUMNS: tuple[str, ...] = (
    "clinician", "condition", "patient_mode", "conversations", "ok", "failed",
    *(f"{role}_{kind}" for role in ("clinician", "patient", "tracker") for kind in UNUSABLE),
    "failed_truncated",
    "clinician_answers", "clinician_truncated", "clinician_truncated_share",
    "patient_answers", "patient_truncated", "patient_truncated_share",
    "tracker_truncated", "formulation_refused", "formulation_truncated",
)
CONVERSATION_ANSWER_COLUMNS: tuple[str, ...] = (
    "conversation_id", "clinician", "condition", "patient_mode", "profile_id", "trial", "status", "failed_role",
    "refusal", "n_turns", "clinician_answers", "patient_answers",
    *(f"{role}_truncated" for role in ANSWER_ROLES), "formulation_status",
)
JUDGE_ANSWER_COLUMNS: tuple[str, ...] = (
    "judge", "clinician", "judgments", "ok", "refused", "judge_error", "provider_error", "truncated_answers",
)


class ConversationAnswers(Record):
    """What these tables read of a conversation record (its fields as ``Conversation`` declares them): a
    line is validated against this much only, so the transcript's turns are counted, not parsed."""

    conversation_id: str
    profile_id: str
    clinician: str
    patient_mode: PatientMode = "prompted"
    condition: str = "minimal"
    trial: int = 0
    opening: str
    turns: list[Any] = Field(default_factory=list)
    status: str = "ok"
    failed_role: str | None = None
    refusal: str | None = None
    truncated: dict[str, int] = Field(default_factory=dict)
    formulation: dict | None = None
    fork: dict | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def arm_condition(self) -> str:
        return arm_condition(self.condition, self.fork)


class JudgmentAnswers(Record):
    """What ``answers_by_judge`` reads of a judgment record (fields as ``Judgment`` declares them)."""

    conversation_id: str
    judge: str
    clinician: str
    status: str = "ok"
    truncated: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def conversation_answer_row(conversation: Conversation | ConversationAnswers) -> dict[str, Any]:
    """One conversation's answers: how many each role gave, how many were cut, why it failed."""
    turns = len(conversation.turns)
    failed_here = conversation.failed_role if not conversation.ok else None
    formulation = conversation.formulation or {}
    return {
        "conversation_id": conversation.conversation_id, "clinician": conversation.clinician,
        "condition": conversation.arm_condition, "patient_mode": conversation.patient_mode,
        "profile_id": conversation.profile_id, "trial": conversation.trial, "status": conversation.status,
        "failed_role": failed_here or "", "refusal": conversation.refusal or "", "n_turns": turns,
        # the failing answer was an answer too (a refusal was paid for and is part of the share)
        "clinician_answers": turns + int(failed_here == "clinician"),
        "patient_answers": turns + int(bool(conversation.opening)) + int(failed_here == "patient"),
        **{f"{role}_truncated": int(conversation.truncated.get(role, 0)) for role in ANSWER_ROLES},
        "formulation_status": str(formulation.get("status", "")) if formulation else "",
    }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


class _ArmAnswers:
    """One clinician arm's answer figures, added conversation row by conversation row (no row is kept)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, row: dict[str, Any]) -> None:
        counts = self.counts
        counts["conversations"] += 1
        counts["ok"] += row["status"] == "ok"
        counts["failed"] += row["status"] != "ok"
        for role in ("clinician", "patient", "tracker"):
            for kind in UNUSABLE:
                counts[f"{role}_{kind}"] += row["failed_role"] == role and row["status"] == kind
        counts["failed_truncated"] += row["status"] == "truncated"
        for column in ("clinician_answers", "clinician_truncated", "patient_answers", "patient_truncated",
                       "tracker_truncated", "formulation_truncated"):
            counts[column] += int(row[column])
        counts["formulation_refused"] += row["formulation_status"] == "refused"

    def row(self, clinician: str, condition: str, patient_mode: str) -> dict[str, Any]:
        counts = self.counts
        return {
            "clinician": clinician, "condition": condition, "patient_mode": patient_mode,
            "conversations": counts["conversations"], "ok": counts["ok"], "failed": counts["failed"],
            **{f"{role}_{kind}": counts[f"{role}_{kind}"] for role in ("clinician", "patient", "tracker")
               for kind in UNUSABLE},
            "failed_truncated": counts["failed_truncated"],
            "clinician_answers": counts["clinician_answers"], "clinician_truncated": counts["clinician_truncated"],
            "clinician_truncated_share": _share(counts["clinician_truncated"], counts["clinician_answers"]),
            "patient_answers": counts["patient_answers"], "patient_truncated": counts["patient_truncated"],
            "patient_truncated_share": _share(counts["patient_truncated"], counts["patient_answers"]),
            "tracker_truncated": counts["tracker_truncated"],
            "formulation_refused": counts["formulation_refused"],
            "formulation_truncated": counts["formulation_truncated"],
        }


class _AnswerTotals:
    """Per clinician arm, the figures of the conversation rows seen so far."""

    def __init__(self) -> None:
        self.arms: dict[tuple[str, str, str], _ArmAnswers] = defaultdict(_ArmAnswers)

    def add(self, row: dict[str, Any]) -> None:
        self.arms[(row["clinician"], row["condition"], row["patient_mode"])].add(row)

    def rows(self) -> list[dict[str, Any]]:
        return [arm.row(*key) for key, arm in sorted(self.arms.items())]


def answer_rows(conversation_rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per clinician arm, sorted."""
    totals = _AnswerTotals()
    for row in conversation_rows:
        totals.add(row)
    return totals.rows()


def answer_rows_after(rows: Iterable[dict[str, Any]], conversation_rows: Iterable[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """``answer_rows`` of the conversations ``rows`` were counted from, then of ``conversation_rows`` (a
    file's tail): the counts of ``rows`` carried on, the shares worked out again from the sums."""
    totals = _AnswerTotals()
    arm_columns = ANSWER_COLUMNS[:3]
    for row in rows:
        counts = totals.arms[(row["clinician"], row["condition"], row["patient_mode"])].counts
        counts.update({column: row[column] for column in ANSWER_COLUMNS
                       if column not in arm_columns and not column.endswith("_share")})
    for row in conversation_rows:
        totals.add(row)
    return totals.rows()


def judge_answer_rows(judgments: Iterable[JudgmentAnswers]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for judgment in judgments:
        counts = groups[(judgment.judge, judgment.clinician)]
        counts["judgments"] += 1
        counts["ok"] += judgment.ok
        counts["refused"] += judgment.status == "refused"
        counts["judge_error"] += judgment.status == "judge_error"
        counts["provider_error"] += judgment.status.startswith("provider_error")
        counts["truncated_answers"] += judgment.truncated
    return [{"judge": judge, "clinician": clinician, "judgments": counts["judgments"], "ok": counts["ok"],
             "refused": counts["refused"], "judge_error": counts["judge_error"],
             "provider_error": counts["provider_error"], "truncated_answers": counts["truncated_answers"]}
            for (judge, clinician), counts in sorted(groups.items())]


def _latest_answer_rows(path: Path, spill_dir: Path | None) -> Iterator[dict[str, Any]]:
    """One conversation file's latest record per conversation, as answer rows sorted by id (kept on disk
    until read back: a file's conversations grow with the run)."""
    latest = SpilledRows.alone("answer-rows", spill_dir)  # a later line supersedes (a retried failure, its success)
    try:
        for record in iter_records(path, ConversationAnswers):
            latest[record.conversation_id] = conversation_answer_row(record)
        yield from latest.sorted_values()
    finally:
        latest.close()


def iter_conversation_answers(paths: RunPaths, spill_dir: Path | None = None) -> Iterator[dict[str, Any]]:
    """Every conversation's latest record on disk (safe while a run appends), as answer rows, a file at a time."""
    for path in paths.conversation_files():
        yield from _latest_answer_rows(path, spill_dir)


def conversation_answers(paths: RunPaths) -> list[dict[str, Any]]:
    """Every conversation's latest record on disk, as answer rows."""
    return list(iter_conversation_answers(paths))


def _judge_answers(paths: RunPaths, spill_dir: Path | None) -> Iterator[JudgmentAnswers]:
    """Each judgment file's latest record per conversation (in conversation id order; the tallies are counts)."""
    for path in paths.judgment_files():
        latest = SpilledRows.alone("judge-answers", spill_dir)
        try:
            for judgment in iter_records(path, JudgmentAnswers):
                latest[judgment.conversation_id] = judgment
            yield from latest.sorted_values()
        finally:
            latest.close()


def judge_answers(paths: RunPaths, spill_dir: Path | None = None) -> list[dict[str, Any]]:
    """``spill_dir``: where each file's latest records wait (the metrics pass: metrics/; else a system temporary
    folder, so a reader such as `status` writes nothing in the run folder)."""
    return judge_answer_rows(_judge_answers(paths, spill_dir))


def write_answer_tables(paths: RunPaths) -> dict[str, Path]:
    """answers_by_conversation streamed a conversation file at a time, the arm totals added as it goes."""
    totals = _AnswerTotals()

    def cells() -> Iterator[list[Any]]:
        for row in iter_conversation_answers(paths, paths.metrics_dir):
            totals.add(row)
            yield [row.get(column) for column in CONVERSATION_ANSWER_COLUMNS]

    by_conversation = write_csv_rows(paths.metrics("answers_by_conversation"), CONVERSATION_ANSWER_COLUMNS, cells())
    return {
        "answers": write_csv(paths.metrics("answers"), ANSWER_COLUMNS, totals.rows()),
        "answers_by_conversation": by_conversation,
        "answers_by_judge": write_csv(paths.metrics("answers_by_judge"), JUDGE_ANSWER_COLUMNS,
                                       judge_answers(paths, paths.metrics_dir)),
    }

