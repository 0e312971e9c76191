"""A conversation record's header: what a pass that reads no transcript validates of each line.

Validating a whole ``Conversation`` (every turn) is most of the cost of a pass that only needs a record's
ids, fork and style; such a pass reads each line against this model (fields as ``Conversation`` declares
them), so a line is still skipped with a warning when those fields are malformed.
"""

from __future__ import annotations

from intake_eval.core.records import Record


class ConversationHeader(Record):
    conversation_id: str
    profile_id: str
    clinician: str
    patient_style: str = "forthcoming"
    status: str = "ok"
    fork: dict | None = None
