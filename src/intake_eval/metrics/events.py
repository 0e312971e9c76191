"""metrics/domain_events.parquet (and .csv while it fits a spreadsheet): one row per (conversation, judge,
hidden domain) of an ok judgment.

Each row says when the domain was first asked about, first disclosed and first caught (asked and
disclosed on one turn), whether its first disclosure came unasked (a leak: the patient volunteered
it) and the conversation's last clinician turn (where time-to-event curves censor). The outcomes
are those of ``metrics.figures``; the metrics pass (metrics/collect.py) writes the rows, sorted by
(judge, conversation) in the CSV.
"""

from __future__ import annotations

DOMAIN_EVENT_COLUMNS = (
    "conversation_id", "judge", "clinician", "condition", "patient_mode", "phenotype", "profile_id", "trial",
    "domain", "first_asked_turn", "first_disclosed_turn", "first_covered_turn", "first_disclosure_unasked",
    "actively_covered", "bled", "last_turn",
)
DOMAIN_EVENT_TYPES = {"trial": "int64", "first_asked_turn": "int64", "first_disclosed_turn": "int64",
                      "first_covered_turn": "int64", "first_disclosure_unasked": "bool", "actively_covered": "bool",
                      "bled": "bool", "last_turn": "int64"}  # every other column is text
