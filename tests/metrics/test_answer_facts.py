"""metrics/answer_facts: the answer summaries status keeps fold a file's tail in exactly: the summary of a
file's first rows folded with the rest equals the summary of them all, wherever the file is cut."""

from __future__ import annotations

import random
from typing import Any

from intake_eval.metrics.answer_facts import ConversationAnswers, JudgeAnswers
from intake_eval.metrics.answers import JudgmentAnswers


def _conversation_rows(count: int) -> list[dict[str, Any]]:
    draw = random.Random(7)
    rows = []
    for n in range(count):
        status = draw.choice(["ok", "ok", "ok", "refused", "empty_answer", "truncated", "model_error"])
        rows.append({
            "conversation_id": f"c{n}", "clinician": draw.choice(["anchored", "screener"]),
            "condition": draw.choice(["minimal", "guided"]), "patient_mode": "prompted", "status": status,
            "failed_role": "" if status == "ok" else draw.choice(["clinician", "patient", "tracker"]),
            "clinician_answers": draw.randint(0, 13), "patient_answers": draw.randint(1, 13),
            **{f"{role}_truncated": draw.randint(0, 2) for role in ("clinician", "patient", "tracker", "formulation")},
            "formulation_status": draw.choice(["", "ok", "refused"]),
        })
    return rows


def test_conversation_answers_fold_equals_the_summary_of_all() -> None:
    reader, rows = ConversationAnswers(), _conversation_rows(60)
    whole = reader.summary(rows)
    assert {row["clinician_truncated_share"] is not None for row in whole} == {True}
    for cut in (0, 1, 17, 59, 60):
        assert reader.fold(reader.summary(rows[:cut]), rows[cut:]) == whole


def test_judge_answers_fold_equals_the_summary_of_all() -> None:
    draw = random.Random(3)
    judgments = [JudgmentAnswers(conversation_id=f"c{n}", judge=draw.choice(["j1", "j2"]),
                                 clinician=draw.choice(["anchored", "screener"]),
                                 status=draw.choice(["ok", "ok", "refused", "judge_error", "provider_error_5xx"]),
                                 truncated=draw.randint(0, 1))
                 for n in range(40)]
    reader = JudgeAnswers()
    whole = reader.summary(judgments)
    for cut in (0, 9, 40):
        assert reader.fold(reader.summary(judgments[:cut]), judgments[cut:]) == whole
