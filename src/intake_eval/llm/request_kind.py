"""What a model request is for: one kind per role that calls a model, declared once.

A request's kind is written as the ``role`` of its calls.jsonl lines, decides which stage owns the
call (llm/ledger: a formulation is the clinician's call) and groups the cost estimate. Members are
strings, so records and logs hold the same text as before and compare equal to it.
"""

from __future__ import annotations

from enum import StrEnum


class RequestKind(StrEnum):
    """The role a request is made for."""

    CLINICIAN = "clinician"  # one interview turn
    FORMULATION = "formulation"  # the clinician's structured formulation after the last turn
    PATIENT = "patient"
    TRACKER = "tracker"  # which hidden domains a clinician utterance unlocks (tracked mode)
    JUDGE = "judge"
    GENERATOR = "generator"  # a profile's domain rendered as the patient's own words
    CHECK = "check"  # `models check`: one short request to see an endpoint answer
