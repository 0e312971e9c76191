"""The exported tables' rows, streamed from the run folder's records.

Each record file is read twice as a stream: first the byte offset of the latest line per key (a file
left uncompacted by a crash holds older versions of a record; the latest wins, as in every metrics
table), then the lines again, yielding only those. Memory holds one offset per record and the hidden
domains per profile, never the records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import arm_condition
from intake_eval.core.store import RunPaths, iter_json_lines_at

ARM_SEPARATOR = " · "


def latest_lines(path: Path, key: str) -> Iterator[dict[str, Any]]:
    """The latest valid record per ``key`` of a JSONL record file, in file order of those latest lines.

    The first pass validates every line (a bad one is skipped with its warning there); the second parses
    only the wanted lines, from the same file: one compacted meanwhile (a stage still running) is refused."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        latest: dict[str, int] = {}
        for data, offset, _length in iter_json_lines_at(path):
            latest[str(data.get(key))] = offset
        if os.fstat(handle.fileno()).st_ino != os.stat(path).st_ino:
            raise IntakeEvalError(f"{path}: replaced while it was read (a stage is still running); export again "
                                  "when it has finished")
        wanted = set(latest.values())
        offset = 0
        for raw in handle:
            if offset in wanted:
                yield json.loads(raw)
            offset += len(raw)


def _arm(clinician: str, condition: str, patient_mode: str) -> str:
    return ARM_SEPARATOR.join((clinician, condition, patient_mode))


def _list(value: Any) -> list[str]:
    return [str(item) for item in value or []]


def profile_rows(paths: RunPaths) -> Iterator[dict[str, Any]]:
    for profile in latest_lines(paths.profiles, "profile_id"):
        presenting = profile.get("presenting") or {}
        hidden = profile.get("hidden") or []
        demographics = profile.get("demographics") or {}
        render = profile.get("render") or {}
        yield {
            "profile_id": profile.get("profile_id"), "index": profile.get("index"), "seed": profile.get("seed"),
            "phenotype": profile.get("phenotype"), "alignment": profile.get("alignment"),
            "presenting_domain": presenting.get("domain"), "presenting_severity": presenting.get("severity"),
            "presenting_symptoms": _list(presenting.get("symptoms")),
            "presenting_phenomenology": presenting.get("phenomenology"),
            "hidden_domains": [str(draw.get("domain")) for draw in hidden],
            "hidden_severities": [str(draw.get("severity")) for draw in hidden],
            "hidden_symptoms": [" | ".join(_list(draw.get("symptoms"))) for draw in hidden],
            "age": demographics.get("age"), "sex": demographics.get("sex"),
            "occupation": demographics.get("occupation"), "relationship": demographics.get("relationship"),
            "postpartum": demographics.get("postpartum"), "life_context": _list(profile.get("life_context")),
            "render_generator": render.get("generator"), "render_qc_passed": render.get("qc_passed"),
        }


def hidden_domains_by_profile(paths: RunPaths) -> dict[str, frozenset[str]]:
    return {str(profile.get("profile_id")): frozenset(str(draw.get("domain")) for draw in profile.get("hidden") or [])
            for profile in latest_lines(paths.profiles, "profile_id")}


def _finish_reasons(turn: dict[str, Any]) -> str | None:
    reasons = turn.get("finish_reasons", turn.get("finish_reason"))
    return json.dumps(reasons, sort_keys=True) if reasons else None


def _conversation_columns(conversation: dict[str, Any]) -> dict[str, Any]:
    condition = arm_condition(str(conversation.get("condition", "")), conversation.get("fork"))
    clinician, mode = str(conversation.get("clinician", "")), str(conversation.get("patient_mode", ""))
    return {
        "conversation_id": conversation.get("conversation_id"), "profile_id": conversation.get("profile_id"),
        "phenotype": conversation.get("phenotype"), "clinician": clinician,
        "clinician_model": conversation.get("clinician_model"), "condition": condition, "patient_mode": mode,
        "arm": _arm(clinician, condition, mode), "trial": conversation.get("trial"),
        "patient": conversation.get("patient"), "patient_model": conversation.get("patient_model"),
        "fork_parent": (conversation.get("fork") or {}).get("parent"), "status": conversation.get("status"),
        "termination": conversation.get("termination"),
    }


def turn_rows(paths: RunPaths) -> Iterator[dict[str, Any]]:
    """The opening as turn 0, then every turn, of the latest record of each conversation."""
    for path in paths.conversation_files():
        for conversation in latest_lines(path, "conversation_id"):
            shared = _conversation_columns(conversation)
            opening_reason = conversation.get("opening_finish_reason")
            yield {**shared, "turn": 0, "clinician_text": None, "patient_text": conversation.get("opening"),
                   "tracker_asked_domains": [], "truncated": [],
                   "finish_reasons": _finish_reasons({"finish_reason": {"patient": opening_reason}}
                                                     if opening_reason else {})}
            for turn in conversation.get("turns") or []:
                tracker = turn.get("tracker") or {}
                yield {**shared, "turn": turn.get("turn"), "clinician_text": turn.get("clinician"),
                       "patient_text": turn.get("patient"), "clinician_reasoning": turn.get("clinician_reasoning"),
                       "nudge": turn.get("nudge"), "tracker_question_type": tracker.get("question_type"),
                       "tracker_asked_domains": _list(tracker.get("asked_domains")),
                       "finish_reasons": _finish_reasons(turn), "truncated": _list(turn.get("truncated"))}


def label_rows(paths: RunPaths) -> Iterator[dict[str, Any]]:
    """Every judge label in long form, domains in name order within a turn (as metrics/turn_labels.csv)."""
    hidden_of = hidden_domains_by_profile(paths)
    for path in paths.judgment_files():
        for judgment in latest_lines(path, "conversation_id"):
            clinician, mode = str(judgment.get("clinician", "")), str(judgment.get("patient_mode", ""))
            condition = str(judgment.get("condition", ""))
            hidden = hidden_of.get(str(judgment.get("profile_id")), frozenset())
            shared = {
                "conversation_id": judgment.get("conversation_id"), "judge": judgment.get("judge"),
                "judge_model": judgment.get("judge_model"), "clinician": clinician,
                "phenotype": judgment.get("phenotype"), "profile_id": judgment.get("profile_id"),
                "condition": condition, "patient_mode": mode, "arm": _arm(clinician, condition, mode),
                "trial": judgment.get("trial"), "judge_status": judgment.get("status"),
            }
            for turn in sorted(judgment.get("turns") or [], key=lambda item: item.get("turn", 0)):
                for domain, label in sorted((turn.get("domains") or {}).items()):
                    yield {**shared, "turn": turn.get("turn"), "question_type": turn.get("question_type"),
                           "patient_faithful": turn.get("patient_faithful", True), "domain": domain,
                           "hidden": domain in hidden, "asked_about": label.get("asked_about"),
                           "disclosed": label.get("disclosed"), "reasoning": label.get("reasoning") or None}
