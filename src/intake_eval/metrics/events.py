"""metrics/domain_events.csv: one row per (conversation, judge, hidden domain) of an ok judgment.

Each row says when the domain was first asked about, first disclosed and first caught (asked and
disclosed on one turn), whether its first disclosure came unasked (a leak: the patient volunteered
it) and the conversation's last clinician turn (where time-to-event curves censor). The outcomes
are those of ``metrics.figures``; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from intake_eval.metrics.figures import DomainOutcome

DOMAIN_EVENT_COLUMNS = (
    "conversation_id", "judge", "clinician", "condition", "patient_mode", "phenotype", "profile_id", "trial",
    "domain", "first_asked_turn", "first_disclosed_turn", "first_covered_turn", "first_disclosure_unasked",
    "actively_covered", "bled", "last_turn",
)


def domain_event_rows(rows: Mapping[tuple[str, str], Mapping[str, Any]],
                      outcomes: Mapping[tuple[str, str], Sequence[DomainOutcome]],
                      last_turns: Mapping[tuple[str, str], int]) -> list[dict[str, Any]]:
    """``rows``/``outcomes``/``last_turns`` are keyed by (judge, conversation_id), as the tables collect them."""
    out = []
    for key in sorted(outcomes):
        row = rows[key]
        for outcome in outcomes[key]:
            out.append({
                "conversation_id": row["conversation_id"], "judge": row["judge"], "clinician": row["clinician"],
                "condition": row["condition"], "patient_mode": row["patient_mode"], "phenotype": row["phenotype"],
                "profile_id": row["profile_id"], "trial": row["trial"], "domain": outcome.domain,
                "first_asked_turn": outcome.first_asked_turn, "first_disclosed_turn": outcome.first_disclosed_turn,
                "first_covered_turn": outcome.first_covered_turn, "first_disclosure_unasked": outcome.leaked,
                "actively_covered": outcome.actively_covered, "bled": outcome.bled, "last_turn": last_turns[key],
            })
    return out
