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

from pathlib import Path
from typing import Any

from pydantic import Field

from intake_eval.core.records import Conversation, PatientMode, Record, arm_condition
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.metrics.reading import write_csv

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


def answer_rows(conversation_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per clinician arm, sorted."""
    arms: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in conversation_rows:
        arms.setdefault((row["clinician"], row["condition"], row["patient_mode"]), []).append(row)
    out = []
    for (clinician, condition, patient_mode), rows in sorted(arms.items()):
        def total(column: str) -> int:
            return sum(int(r[column]) for r in rows)

        def failed(role: str, status: str) -> int:
            return sum(1 for r in rows if r["failed_role"] == role and r["status"] == status)

        out.append({
            "clinician": clinician, "condition": condition, "patient_mode": patient_mode,
            "conversations": len(rows), "ok": sum(1 for r in rows if r["status"] == "ok"),
            "failed": sum(1 for r in rows if r["status"] != "ok"),
            **{f"{role}_{kind}": failed(role, kind) for role in ("clinician", "patient", "tracker") for kind in UNUSABLE},
            "failed_truncated": sum(1 for r in rows if r["status"] == "truncated"),
            "clinician_answers": total("clinician_answers"), "clinician_truncated": total("clinician_truncated"),
            "clinician_truncated_share": _share(total("clinician_truncated"), total("clinician_answers")),
            "patient_answers": total("patient_answers"), "patient_truncated": total("patient_truncated"),
            "patient_truncated_share": _share(total("patient_truncated"), total("patient_answers")),
            "tracker_truncated": total("tracker_truncated"),
            "formulation_refused": sum(1 for r in rows if r["formulation_status"] == "refused"),
            "formulation_truncated": total("formulation_truncated"),
        })
    return out


def judge_answer_rows(judgments: list[JudgmentAnswers]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[JudgmentAnswers]] = {}
    for judgment in judgments:
        groups.setdefault((judgment.judge, judgment.clinician), []).append(judgment)
    return [{
        "judge": judge, "clinician": clinician, "judgments": len(rows),
        "ok": sum(1 for j in rows if j.ok), "refused": sum(1 for j in rows if j.status == "refused"),
        "judge_error": sum(1 for j in rows if j.status == "judge_error"),
        "provider_error": sum(1 for j in rows if j.status.startswith("provider_error")),
        "truncated_answers": sum(j.truncated for j in rows),
    } for (judge, clinician), rows in sorted(groups.items())]


def conversation_answers(paths: RunPaths) -> list[dict[str, Any]]:
    """Every conversation's latest record on disk (safe while a run appends), as answer rows."""
    rows: list[dict[str, Any]] = []
    for path in paths.conversation_files():
        latest: dict[str, dict[str, Any]] = {}  # a later line supersedes (a retried failure, its success)
        for record in iter_records(path, ConversationAnswers):
            latest[record.conversation_id] = conversation_answer_row(record)
        rows.extend(latest[key] for key in sorted(latest))
    return rows


def judge_answers(paths: RunPaths) -> list[dict[str, Any]]:
    judgments: list[JudgmentAnswers] = []
    for path in paths.judgment_files():
        latest: dict[str, JudgmentAnswers] = {}
        for judgment in iter_records(path, JudgmentAnswers):
            latest[judgment.conversation_id] = judgment
        judgments.extend(latest.values())
    return judge_answer_rows(judgments)


def write_answer_tables(paths: RunPaths) -> dict[str, Path]:
    per_conversation = conversation_answers(paths)
    return {
        "answers": write_csv(paths.metrics("answers"), ANSWER_COLUMNS, answer_rows(per_conversation)),
        "answers_by_conversation": write_csv(paths.metrics("answers_by_conversation"), CONVERSATION_ANSWER_COLUMNS,
                                             per_conversation),
        "answers_by_judge": write_csv(paths.metrics("answers_by_judge"), JUDGE_ANSWER_COLUMNS, judge_answers(paths)),
    }

